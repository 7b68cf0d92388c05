// HaloExchange: the boundary traffic of graph-parallel training, moved as a HaloPlan
// (core/halo_plan.h) says. Forward sends owned rows and receives them into the halo block;
// backward sends halo gradients back to their owners, who *add* them into their rows. Messages
// go raw (f32, straight from and into the tensors) or through a codec (codec.h), optionally
// with error feedback. Relies on Communicator, codecs and kernels.
#pragma once

#include <array>
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
// message gets 2, 4 or 8 bits from bit_plan.h under `bit_budget` bits per value (each direction
// planned on its own), re-planned by replan() from the ranges seen since the last plan (forward
// and backward codecs are then ignored); a message then carries up to three blocks, one per width.
struct ExchangeCodecs {
  CodecKind forward = CodecKind::None;
  CodecKind backward = CodecKind::None;
  bool error_feedback = false;
  bool adaptive = false;
  double bit_budget = 4.0;
  int num_layers = 1;      // layers whose messages are planned (adaptive)
  std::uint64_t seed = 0;  // rounding noise stream (see set_noise)
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
  void reset_residuals() { residuals_[0].clear(), residuals_[1].clear(); }
  const ExchangeCodecs& codecs() const { return codecs_; }
  // Adaptive: plans the bits of every row this rank sends from the ranges seen since the last
  // plan and tells every peer the bits of the rows it will receive. Collective over the peers
  // this rank exchanges with (call it on every rank at the same point). Returns the plan as text:
  // per direction the modelled rounding variance against uniform bits at the same budget
  // ("fwd variance 0.412x of uniform 4 bits"), then "layer L fwd|bwd -> rank P: B.BB bits
  // (8: n, 4: n, 2: n)" entries (mean bits, rows by width).
  std::string replan();
  // Adaptive: how much each halo row matters where it is aggregated. halo_weight (H) holds, per
  // halo row v of this rank, Σ_u A[u][v]² over the rows u that aggregate it, so that the variance
  // a row's rounding adds to this rank's output is halo_weight[v]·F·range²/(2^b − 1)². Each
  // owner receives the weights of the rows it sends and plans its forward messages with them
  // (gradients are added into their owners' rows with weight 1, so backward plans stay
  // unweighted). Collective over the peers (call on every rank once, before training); does
  // nothing unless the codec is adaptive.
  void set_receiver_weights(std::span<const double> halo_weight);

  // The tensors may live on a GPU, with a communicator that takes GPU buffers (NCCL): rows are
  // gathered, encoded (fixed codecs), sent, received, decoded and added there; only the 16-byte
  // message headers cross to the host. Adaptive bits and error feedback need host tensors.
  // Forward: x (N, F) owned rows; halo (H, F) is resized and filled by finish_forward().
  // x must stay unchanged and halo untouched until then.
  void start_forward(const Tensor& x, Tensor& halo, int layer);
  void finish_forward(Tensor& halo);
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
  // One direction's encoded messages: rows `source[rows[i]]` for i in [out_offsets[p],
  // out_offsets[p+1]) go to peer p keyed by ids[i]; in_offsets[p+1] - in_offsets[p] rows
  // come back from p.
  struct Route {
    int direction;                          // 0 forward, 1 backward
    std::span<const CodecKind> out_codecs;  // (K) codec of the message to each peer
    std::span<const CodecKind> in_codecs;   // (K) codec of the message from each peer
    RngPurpose purpose;
    TrafficCategory category;
    int tag;
    int layer;
    const std::vector<std::int64_t>& out_offsets;
    std::span<const NodeId> rows;
    std::span<const GlobalId> ids;
    const std::vector<std::int64_t>& in_offsets;
  };
  // A block of a message: `count` rows of one codec at route positions [begin, begin + count),
  // or (adaptive, not contiguous) at `positions`.
  struct Piece {
    CodecKind codec;
    std::int64_t begin;
    std::int64_t count;
    std::span<const std::int64_t> positions;  // empty: contiguous
  };
  // Bytes of a block on the wire: header and rows.
  static std::size_t piece_bytes(const Piece& piece, std::int64_t f) {
    return kMessageHeaderBytes +
           static_cast<std::size_t>(piece.count) * encoded_row_bytes(piece.codec, f);
  }
  // The blocks of the message to (outgoing) or from peer p on `route`, in wire order.
  void pieces(const Route& route, int p, bool outgoing, std::vector<Piece>& out) const;
  // Decodes one block from `bytes` (header included) into its rows of `dest`.
  void decode_piece(const Piece& piece, std::span<const std::byte> bytes, Tensor& dest,
                    const std::string& where, bool check_header);
  void rebuild_groups();
  Route forward_route(int layer) const;
  Route backward_route(int layer) const;
  void post_encoded(const Route& route, const Tensor& source);
  void post_with_feedback(const Route& route, int direction, const Tensor& source);
  void decode_received(const Route& route, Tensor& dest, const char* what);
  // source + residual of (direction, layer) into ef_input_; the residual is updated after.
  const Tensor& with_residual(int direction, int layer, const Tensor& source,
                              std::span<const NodeId> rows);
  void update_residual(int direction, int layer, const Route& route);
  void begin(double start);
  void wait_all_timed();
  // InvalidArgument unless t is a host tensor (adaptive bits, error feedback).
  void check_host(const Tensor& t, const char* what) const;
  // The encoded messages of the exchange in flight, outgoing (which 0) or incoming (1), on
  // bytes_device_: resized to `size` bytes, or as they are (kKeepSize).
  static constexpr std::size_t kKeepSize = static_cast<std::size_t>(-1);
  std::span<std::byte> message_bytes(int which, std::size_t size = kKeepSize);


  Communicator& comm_;
  const HaloPlan& plan_;
  std::span<const GlobalId> owned_ids_;
  std::vector<GlobalId> send_ids_;   // (num_send) global id of every sent row
  std::span<const GlobalId> halo_ids_;
  std::vector<NodeId> identity_;     // 0, 1, 2, ... (rows of a tensor already in message order)
  ExchangeCodecs codecs_;
  std::uint64_t epoch_ = 0;
  int forward_layer_ = 0;   // layer of the exchange in flight
  int backward_layer_ = 0;
  Tensor send_buffer_;  // (num_send, F) gathered owned rows (forward) / received grads (backward)
  DeviceIndexList send_rows_;  // plan_.send_rows where a tensor's device reads them
  std::vector<std::byte> out_bytes_, in_bytes_;  // encoded messages, all peers back to back
  Tensor device_bytes_[2];                       // the same on a GPU (u8: out, in)
  Device bytes_device_;                          // where the messages in flight are
  std::vector<std::size_t> out_at_, in_at_;      // (K + 1) byte offsets per peer
  std::vector<Tensor> residuals_[2];             // [direction][layer] error-feedback residuals
  // [direction] (L, K) codecs of outgoing / incoming messages (fixed codecs).
  std::vector<CodecKind> out_codecs_[2], in_codecs_[2];
  // Adaptive, per direction: the bits of every outgoing / incoming row ((L, n) flattened; n =
  // rows in route order), per (layer, peer) the positions of each width (8, 4, 2) in each
  // message, and since the last plan Σ receiver weight·range² per outgoing row and the width seen
  // per layer (0: no message yet).
  struct Groups {
    std::array<std::vector<std::int64_t>, 3> positions;
  };
  std::vector<std::uint8_t> out_bits_[2], in_bits_[2];
  std::vector<Groups> out_groups_[2], in_groups_[2];
  std::vector<double> row_weight_[2];
  std::vector<std::int64_t> seen_width_[2];
  std::vector<float> ranges_;
  std::vector<Piece> pieces_;                   // scratch
  std::vector<NodeId> piece_rows_;              // scratch: rows and ids of a scattered block
  std::vector<GlobalId> piece_ids_;
  Tensor piece_decoded_;                        // scratch: a scattered block before placement
  std::vector<double> send_weight_;  // (num_send) receivers' aggregation weights (adaptive)
  Tensor ef_input_, ef_decoded_;                 // message rows + residual, and their decoding
  std::vector<std::unique_ptr<Request>> requests_;
  bool active_ = false;
  bool complete_ = false;
  double start_time_ = 0.0;
  double done_time_ = 0.0;
  ExchangeTimes times_;
};

}  // namespace tessera
