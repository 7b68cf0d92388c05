// SPDX-License-Identifier: Apache-2.0
// HaloExchange: the boundary traffic of graph-parallel training, moved as a HaloPlan
// (core/halo_plan.h) says. Forward sends owned rows and receives them into the halo block;
// backward sends halo gradients back to their owners, who *add* them into their rows. A plain
// exchange sends f32 rows straight from and into the tensors; with a codec every message is
// framed as blocks of encoded rows (comm/codec.h), each behind a header the receiver checks.
// Two optional parts sit beside it: ErrorFeedback (comm/error_feedback.h) adds each row's last
// quantisation residual to its next message, and AdaptiveBits (comm/adaptive_bits.h) gives every
// row 2, 4 or 8 bits under a budget, so that a message has one block per width.
// Relies on Communicator, codecs and kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/codec.h"
#include "comm/communicator.h"
#include "core/csr.h"
#include "core/halo_plan.h"
#include "core/tensor.h"

namespace tessera {

class AdaptiveBits;
class ErrorFeedback;

// Seconds of halo communication, summed over exchanges. comm_s runs from the start of an
// exchange to the moment its last message is seen complete (by a poll during overlapped work
// or by the final wait); exposed_s is the part of it on the critical path: packing, posting,
// blocking in the final wait and unpacking. hidden = comm_s - exposed_s.
// encode_s / decode_s: the codec's share of exposed_s.
struct ExchangeTimes {
  double comm_s = 0.0;
  double exposed_s = 0.0;
  double encode_s = 0.0;
  double decode_s = 0.0;
  double hidden_s() const { return comm_s > exposed_s ? comm_s - exposed_s : 0.0; }
};

// How messages are encoded. With error feedback, what a row's quantisation lost is kept (per
// layer and direction) and added to that row's next message. With `adaptive`, every row of every
// message gets 2, 4 or 8 bits under `bit_budget` bits per value (each direction planned on its
// own), re-planned by replan() from the ranges seen since the last plan (forward and backward
// codecs are then ignored); a message then carries up to three blocks, one per width.
struct ExchangeCodecs {
  CodecKind forward = CodecKind::None;
  CodecKind backward = CodecKind::None;
  bool error_feedback = false;
  bool adaptive = false;
  double bit_budget = 4.0;
  int num_layers = 1;      // layers whose messages are planned (adaptive)
  std::uint64_t seed = 0;  // rounding noise stream (see set_noise)
};

// A block of one message: `count` rows of one codec at route positions [begin, begin + count),
// or (adaptive, not contiguous) at `positions`.
struct MessageBlock {
  CodecKind codec;
  std::int64_t begin;
  std::int64_t count;
  std::span<const std::int64_t> positions;  // empty: contiguous
};

class HaloExchange {
 public:
  // Keeps references to comm, plan and the id arrays; the plan must match comm.size() peers and
  // comm.rank() as self. owned_ids (N) and halo_ids (H) key the codecs' rounding noise.
  HaloExchange(Communicator& comm, const HaloPlan& plan, std::span<const GlobalId> owned_ids,
               std::span<const GlobalId> halo_ids, const ExchangeCodecs& codecs = {});
  ~HaloExchange();

  // The seed and epoch keying the rounding noise of the next messages.
  void set_noise(std::uint64_t seed, std::uint64_t epoch) {
    codecs_.seed = seed;
    epoch_ = epoch;
  }
  // Forgets the error-feedback residuals (a new run starts from a new model).
  void reset_residuals();
  const ExchangeCodecs& codecs() const { return codecs_; }
  // Adaptive: plans the bits of every row this rank sends from the ranges seen since the last
  // plan and tells every peer the bits of the rows it will receive (AdaptiveBits::replan).
  // Collective over the peers this rank exchanges with (call it on every rank at the same
  // point). Returns the plan as text; "" when the codec is not adaptive.
  std::string replan();
  // Adaptive: how much each halo row matters where it is aggregated (AdaptiveBits::
  // set_receiver_weights). Collective over the peers (call on every rank once, before
  // training); does nothing unless the codec is adaptive.
  void set_receiver_weights(std::span<const double> halo_weight);

  // The tensors may live on a GPU, with a communicator that takes GPU buffers (NCCL): rows are
  // gathered, encoded (fixed codecs), sent, received, decoded and added there; only the 16-byte
  // message headers cross to the host. Adaptive bits and error feedback need host tensors.
  // Forward: x (N, F) owned rows (f32, or bf16 on the CPU: gathered widened, then sent as f32
  // rows would be); halo (H, F) is resized and filled by finish_forward().
  // x must stay unchanged and halo untouched until then.
  void start_forward(const Tensor& x, Tensor& halo, int layer);
  void finish_forward(Tensor& halo);
  // Sizes the gathered send rows on `device` for the widest exchange of the run, so that the
  // narrower layers reuse them (Tensor::resize_within) instead of each keeping a block; and for
  // `spare_rows` rows of the caller's scratch at that width (idle_rows).
  void reserve(std::int64_t width, Device device, std::int64_t spare_rows = 0);
  // (rows, cols) f32 rows on `device` over the memory of the send rows, which no exchange uses
  // between its finish and the next start: the caller's scratch in that time (the propagator's
  // boundary sums), valid until the next start_forward or start_backward. Internal while an
  // exchange is in flight.
  Tensor idle_rows(std::int64_t rows, std::int64_t cols, Device device);
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
  // One direction's rows at one layer: rows `source[rows[i]]` for i in [out_offsets[p],
  // out_offsets[p+1]) go to peer p keyed by ids[i]; in_offsets[p+1] - in_offsets[p] rows come
  // back from p.
  struct Route {
    int direction;  // 0 forward, 1 backward
    CodecKind codec;
    RngPurpose purpose;
    TrafficCategory category;
    int tag;
    int layer;
    const std::vector<std::int64_t>& out_offsets;
    std::span<const NodeId> rows;
    std::span<const GlobalId> ids;
    const std::vector<std::int64_t>& in_offsets;
  };
  Route route(int direction, int layer) const;
  bool encoded(int direction) const;
  // The blocks of the message to (outgoing) or from peer p on `route`, in wire order.
  void blocks(const Route& route, int p, bool outgoing, std::vector<MessageBlock>& out) const;
  // Bytes of a block on the wire: header and rows.
  static std::size_t block_bytes(const MessageBlock& block, std::int64_t f) {
    return kMessageHeaderBytes +
           static_cast<std::size_t>(block.count) * encoded_row_bytes(block.codec, f);
  }
  // Raw f32 messages: straight from `send` rows / into `receive` rows.
  void post_raw(const Route& route, const Tensor& send, Tensor& receive);
  // Encoded messages of `source` (rows in route order), and what the peers send back.
  void post_encoded(const Route& route, const Tensor& source);
  void encode_block(const Route& route, const MessageBlock& block, std::span<std::byte> bytes,
                    const Tensor& source, const CodecNoise& noise);
  // Decodes one block from `bytes` (header included) into its rows of `dest`.
  void decode_block(const MessageBlock& block, std::span<const std::byte> bytes, Tensor& dest,
                    const std::string& where, bool check_header);
  void decode_received(const Route& route, Tensor& dest, const char* what);
  // Error feedback: encodes source rows + residual, then keeps what the encoding lost.
  void post_with_feedback(const Route& route, const Tensor& source);
  void start(const Route& route, const Tensor& source, Tensor& receive);
  void begin(double start);
  void wait_all_timed();
  // The encoded messages of the exchange in flight, outgoing (which 0) or incoming (1), on
  // bytes_device_: resized to `size` bytes, or as they are (kKeepSize).
  static constexpr std::size_t kKeepSize = static_cast<std::size_t>(-1);
  std::span<std::byte> message_bytes(int which, std::size_t size = kKeepSize);

  Communicator& comm_;
  const HaloPlan& plan_;
  std::vector<GlobalId> send_ids_;   // (num_send) global id of every sent row
  std::span<const GlobalId> halo_ids_;
  std::vector<NodeId> identity_;     // 0, 1, 2, ... (rows of a tensor already in message order)
  ExchangeCodecs codecs_;
  std::uint64_t epoch_ = 0;
  int forward_layer_ = 0;   // layer of the exchange in flight
  int backward_layer_ = 0;
  // (num_send, F) gathered owned rows (forward) / received grads (backward); between exchanges
  // the caller's scratch (idle_rows)
  Tensor send_buffer_;
  DeviceIndexList send_rows_;  // plan_.send_rows where a tensor's device reads them
  DeviceIndexList identity_rows_;                // identity_ there
  std::vector<std::byte> out_bytes_, in_bytes_;  // encoded messages, all peers back to back
  Tensor device_bytes_[2];                       // the same on a GPU (u8: out, in)
  Device bytes_device_;                          // where the messages in flight are
  std::vector<std::size_t> out_at_, in_at_;      // (K + 1) byte offsets per peer
  std::unique_ptr<AdaptiveBits> adaptive_;       // codecs_.adaptive
  std::unique_ptr<ErrorFeedback> feedback_;      // codecs_.error_feedback
  std::vector<MessageBlock> blocks_;             // scratch
  std::vector<NodeId> block_rows_;               // scratch: rows and ids of a scattered block
  std::vector<GlobalId> block_ids_;
  std::vector<float> ranges_;  // scratch: row ranges of a block (adaptive)
  Tensor block_decoded_;       // scratch: a scattered block before placement
  std::vector<std::unique_ptr<Request>> requests_;
  bool active_ = false;
  bool complete_ = false;
  double start_time_ = 0.0;
  double done_time_ = 0.0;
  ExchangeTimes times_;
};

}  // namespace tessera
