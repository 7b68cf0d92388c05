// SPDX-License-Identifier: Apache-2.0
// AdaptiveBits: the adaptive codec of a HaloExchange (in the spirit of AdaQP). Every row this
// rank sends, per direction and layer, gets 2, 4 or 8 bits from bit_plan.h under a budget of
// bits per value, so that a message carries up to three blocks (8-, 4- and 2-bit rows, in that
// order). While messages go out it accumulates each row's weight, the variance its rounding adds
// at the receiver (receiver weight × range², the receiver weight being Σ A[u][v]² over the rows
// u that aggregate the halo row v, or 1 for gradients, which their owners add); replan() turns
// those into new bits and tells every peer the bits of the rows it will receive. Relies on
// Communicator, HaloPlan and the greedy planner of comm/bit_plan.h.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "comm/codec.h"
#include "comm/communicator.h"
#include "core/halo_plan.h"

namespace tessera {

struct MessageBlock;  // comm/halo_exchange.h

class AdaptiveBits {
 public:
  // Rows start at the widest uniform width the budget affords (bit_plan.h's uniform_bits).
  AdaptiveBits(const HaloPlan& plan, int num_layers, double bit_budget);

  // The blocks of the message to (outgoing) or from peer p in `direction` (0 forward: the send
  // rows out, the halo rows in; 1 backward: the reverse) at `layer`, in wire order.
  void blocks(int direction, int layer, int p, bool outgoing, std::vector<MessageBlock>& out) const;
  // A message of width f goes out in `direction` at `layer` (its rows are planned next time).
  void note_width(int direction, int layer, std::int64_t f);
  // Adds the ranges of the rows of `block` just encoded to their rows' weights.
  void add_ranges(int direction, int layer, const MessageBlock& block,
                  std::span<const float> ranges);

  // Exchanges the receiver weights: halo_weight (H) per halo row of this rank goes to its
  // owner, which keeps the weights of the rows it sends. Collective over the peers.
  void set_receiver_weights(Communicator& comm, std::span<const double> halo_weight, int tag);
  // New bits for every outgoing row of every layer seen since the last plan (each direction
  // under the budget on its own: embeddings and gradients differ in scale by orders of
  // magnitude, so one absolute-variance objective would starve the gradients of bits), then the
  // bits of every row sent to each peer, exchanged. Collective over the peers. Returns the plan
  // in words: per direction the modelled rounding variance against uniform bits at the same
  // budget ("fwd variance 0.412x of uniform 4 bits"), then "layer L fwd|bwd -> rank P: B.BB
  // bits (8: n, 4: n, 2: n)" entries (mean bits, rows by width).
  std::string replan(Communicator& comm, int tag);

 private:
  // Per (layer, peer) the positions of each width (8, 4, 2) in a message.
  struct Groups {
    std::array<std::vector<std::int64_t>, 3> positions;
  };
  std::string plan_directions();
  void exchange_bits(Communicator& comm, int tag);
  void rebuild_groups();
  std::string describe() const;
  // Rows of `direction`'s messages going out (or coming in).
  const std::vector<std::int64_t>& offsets(int direction, bool outgoing) const;

  const HaloPlan& plan_;
  int layers_;
  double budget_;
  // Per direction: the bits of every outgoing / incoming row ((L, n) flattened; n = rows in
  // route order), their groups per (layer, peer), and since the last plan Σ receiver
  // weight·range² per outgoing row and the width seen per layer (0: no message yet).
  std::vector<std::uint8_t> out_bits_[2], in_bits_[2];
  std::vector<Groups> out_groups_[2], in_groups_[2];
  std::vector<double> row_weight_[2];
  std::vector<std::int64_t> seen_width_[2];
  std::vector<double> send_weight_;  // (num_send) receivers' aggregation weights
};

}  // namespace tessera
