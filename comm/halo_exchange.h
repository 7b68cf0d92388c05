// HaloPlan and HaloExchange: the boundary traffic of graph-parallel training. The plan says,
// per peer, which owned rows this rank sends and which contiguous block of its halo rows comes
// from that peer (both in increasing global id, so sender and receiver agree on the order).
// Forward sends owned rows and receives them into the halo block; backward sends halo gradients
// back to their owners, who *add* them into their rows. Relies on Communicator and kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "engine/core/csr.h"
#include "engine/core/tensor.h"

namespace tessera {

struct HaloPlan {
  std::vector<std::int64_t> send_offsets{0};  // (K + 1) rows for peer p: [send_offsets[p], ..[p+1])
  std::vector<NodeId> send_rows;              // owned local rows, grouped by peer
  std::vector<std::int64_t> recv_offsets{0};  // (K + 1) halo rows [recv_offsets[p], ..[p+1]) of p

  int num_peers() const { return static_cast<int>(send_offsets.size()) - 1; }
  std::int64_t num_send() const { return send_offsets.back(); }
  std::int64_t num_halo() const { return recv_offsets.back(); }
  std::int64_t send_count(int peer) const { return send_offsets[peer + 1] - send_offsets[peer]; }
  std::int64_t recv_count(int peer) const { return recv_offsets[peer + 1] - recv_offsets[peer]; }
  // Throws InvalidInput (prefixed with `where`) unless both offset arrays have K + 1
  // non-decreasing entries from 0, send_rows are in [0, num_owned) and `self` sends and
  // receives nothing.
  void validate(std::int64_t num_owned, int self, const std::string& where) const;
};

// Seconds of halo communication, summed over exchanges. comm_s runs from the start of an
// exchange to the moment its last message is seen complete (by a poll during overlapped work
// or by the final wait); exposed_s is the part of it on the critical path: packing, posting,
// blocking in the final wait and unpacking. hidden = comm_s - exposed_s.
struct ExchangeTimes {
  double comm_s = 0.0;
  double exposed_s = 0.0;
  double hidden_s() const { return comm_s > exposed_s ? comm_s - exposed_s : 0.0; }
};

class HaloExchange {
 public:
  // Keeps references to both; the plan must match comm.size() peers and comm.rank() as self.
  HaloExchange(Communicator& comm, const HaloPlan& plan);
  ~HaloExchange();

  // Forward: x (N, F) owned rows; halo (H, F) is resized and filled by finish_forward().
  // x must stay unchanged and halo untouched until then.
  void start_forward(const Tensor& x, Tensor& halo, int layer);
  void finish_forward();
  // Backward: d_halo (H, F) goes to the owners (keep it alive until finish_backward);
  // finish_backward adds what the peers sent into d_x (N, F) rows, in peer order.
  void start_backward(const Tensor& d_halo, int layer);
  void finish_backward(Tensor& d_x);
  // Progresses the messages in flight; true once all have completed. Cheap: call it between
  // chunks of overlapped work.
  bool poll();

  // Whether this rank sends or receives anything at all (else start/finish may be skipped).
  bool has_traffic() const { return plan_.num_send() > 0 || plan_.num_halo() > 0; }
  bool active() const { return active_; }
  const ExchangeTimes& times() const { return times_; }
  void reset_times() { times_ = {}; }

 private:
  void wait_all_timed();

  Communicator& comm_;
  const HaloPlan& plan_;
  Tensor send_buffer_;  // (num_send, F) gathered owned rows (forward) / received grads (backward)
  std::vector<std::unique_ptr<Request>> requests_;
  bool active_ = false;
  bool complete_ = false;
  double start_time_ = 0.0;
  double done_time_ = 0.0;
  ExchangeTimes times_;
};

}  // namespace tessera
