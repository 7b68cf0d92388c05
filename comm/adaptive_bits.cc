// SPDX-License-Identifier: Apache-2.0
// AdaptiveBits (comm/adaptive_bits.h): the blocks of each message (one per width), the weights
// gathered while messages go out, and replan(): new bits per row from bit_plan.h, each peer told
// the bits of the rows it receives, the plan in words.
#include "comm/adaptive_bits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "comm/bit_plan.h"
#include "comm/halo_exchange.h"
#include "core/error.h"

namespace tessera {
namespace {

constexpr std::array<std::uint8_t, 3> kWidths = {8, 4, 2};  // block order inside a message

CodecKind codec_of_bits(int bits) {
  return bits == 8 ? CodecKind::Int8 : bits == 4 ? CodecKind::Int4 : CodecKind::Int2;
}

}  // namespace

AdaptiveBits::AdaptiveBits(const HaloPlan& plan, int num_layers, double bit_budget)
    : plan_(plan), layers_(num_layers), budget_(bit_budget) {
  const auto start = static_cast<std::uint8_t>(uniform_bits(bit_budget));
  const auto layers = static_cast<std::size_t>(num_layers);
  for (int d = 0; d < 2; ++d) {
    const auto n_out = static_cast<std::size_t>(offsets(d, true).back());
    const auto n_in = static_cast<std::size_t>(offsets(d, false).back());
    out_bits_[d].assign(layers * n_out, start);
    in_bits_[d].assign(layers * n_in, start);
    row_weight_[d].assign(layers * n_out, 0.0);
    seen_width_[d].assign(layers, 0);
  }
  rebuild_groups();
  send_weight_.assign(static_cast<std::size_t>(plan.num_send()), 1.0);
}

const std::vector<std::int64_t>& AdaptiveBits::offsets(int direction, bool outgoing) const {
  // Outgoing forward rows are the send rows, incoming the halo rows; backward the reverse.
  return (direction == 0) == outgoing ? plan_.send_offsets : plan_.recv_offsets;
}

void AdaptiveBits::blocks(int direction, int layer, int p, bool outgoing,
                          std::vector<MessageBlock>& out) const {
  const std::vector<std::int64_t>& at = offsets(direction, outgoing);
  const std::int64_t begin = at[p], count = at[p + 1] - begin;
  const std::size_t cell = static_cast<std::size_t>(layer) * plan_.num_peers() + p;
  const Groups& groups = (outgoing ? out_groups_ : in_groups_)[direction][cell];
  for (std::size_t w = 0; w < kWidths.size(); ++w) {
    const std::vector<std::int64_t>& positions = groups.positions[w];
    if (positions.empty()) continue;
    const auto n = static_cast<std::int64_t>(positions.size());
    // A whole message at one width is contiguous: no gather, no scatter.
    out.push_back({codec_of_bits(kWidths[w]), n == count ? begin : positions.front(), n,
                   n == count ? std::span<const std::int64_t>() : std::span(positions)});
  }
}

void AdaptiveBits::note_width(int direction, int layer, std::int64_t f) {
  seen_width_[direction][layer] = f;
}

void AdaptiveBits::add_ranges(int direction, int layer, const MessageBlock& block,
                              std::span<const float> ranges) {
  // Variance of a row ∝ width·range²; forward rows weigh by their receiver's aggregation
  // weight, gradients (added into their owners' rows) by 1.
  const auto n_out = static_cast<std::size_t>(offsets(direction, true).back());
  double* weight = row_weight_[direction].data() + static_cast<std::size_t>(layer) * n_out;
  for (std::int64_t i = 0; i < block.count; ++i) {
    const std::int64_t pos = block.positions.empty() ? block.begin + i : block.positions[i];
    const double r = ranges[static_cast<std::size_t>(i)];
    weight[pos] += (direction == 0 ? send_weight_[static_cast<std::size_t>(pos)] : 1.0) * r * r;
  }
}

void AdaptiveBits::set_receiver_weights(Communicator& comm, std::span<const double> halo_weight,
                                        int tag) {
  // The reverse of a forward exchange: each halo block goes back to the rank that owns it.
  std::vector<std::unique_ptr<Request>> requests;
  const std::span<double> send_weight(send_weight_);
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.send_count(p) > 0) {
      requests.push_back(comm.irecv(
          std::as_writable_bytes(send_weight.subspan(plan_.send_offsets[p], plan_.send_count(p))),
          p, tag));
    }
    if (plan_.recv_count(p) > 0) {
      requests.push_back(
          comm.isend(std::as_bytes(halo_weight.subspan(plan_.recv_offsets[p], plan_.recv_count(p))),
                     p, tag, TrafficCategory::Setup));
    }
  }
  wait_all(requests);
  for (double w : send_weight_) {
    TESSERA_CHECK(std::isfinite(w) && w >= 0.0, InvalidInput,
                  "halo exchange: a peer sent receiver weight ", w);
  }
}

void AdaptiveBits::rebuild_groups() {
  const int k = plan_.num_peers();
  for (int d = 0; d < 2; ++d) {
    for (const bool outgoing : {true, false}) {
      const std::vector<std::int64_t>& at = offsets(d, outgoing);
      const std::vector<std::uint8_t>& bits = outgoing ? out_bits_[d] : in_bits_[d];
      std::vector<Groups>& groups = outgoing ? out_groups_[d] : in_groups_[d];
      const std::size_t n = static_cast<std::size_t>(at.back());
      groups.assign(static_cast<std::size_t>(layers_) * k, Groups{});
      for (int l = 0; l < layers_; ++l) {
        for (int p = 0; p < k; ++p) {
          Groups& g = groups[static_cast<std::size_t>(l) * k + p];
          for (std::int64_t i = at[p]; i < at[p + 1]; ++i) {
            const std::uint8_t b = bits[l * n + static_cast<std::size_t>(i)];
            g.positions[b == 8 ? 0 : b == 4 ? 1 : 2].push_back(i);
          }
        }
      }
    }
  }
}

std::string AdaptiveBits::replan(Communicator& comm, int tag) {
  std::string text = plan_directions();
  exchange_bits(comm, tag);
  rebuild_groups();
  const std::string messages = describe();
  if (!messages.empty()) text += (text.empty() ? "" : ", ") + messages;
  for (int d = 0; d < 2; ++d) std::fill(seen_width_[d].begin(), seen_width_[d].end(), 0);
  return text;
}

// Every outgoing row of every layer seen since the last plan is an item (width F values,
// variance weight F·Σ receiver weight·range²), planned per direction.
std::string AdaptiveBits::plan_directions() {
  const int uniform = uniform_bits(budget_);
  std::string text;
  for (int d = 0; d < 2; ++d) {
    const auto n = static_cast<std::size_t>(offsets(d, true).back());
    std::vector<BitPlanItem> items;
    std::vector<std::size_t> where;  // index into out_bits_[d] of each item
    for (int l = 0; l < layers_; ++l) {
      const std::int64_t f = seen_width_[d][l];
      if (f == 0) continue;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t at = static_cast<std::size_t>(l) * n + i;
        items.push_back({f, static_cast<double>(f) * row_weight_[d][at]});
        where.push_back(at);
      }
    }
    const std::vector<int> bits = plan_bits(items, budget_);
    double planned = 0.0, fixed = 0.0;  // the model's rounding variance, and at uniform bits
    for (std::size_t j = 0; j < items.size(); ++j) {
      out_bits_[d][where[j]] = static_cast<std::uint8_t>(bits[j]);
      planned += items[j].weight * variance_factor(bits[j]);
      fixed += items[j].weight * variance_factor(uniform);
    }
    if (fixed > 0.0) {
      char entry[96];
      std::snprintf(entry, sizeof entry, "%s%s variance %.3fx of uniform %d bits",
                    text.empty() ? "" : ", ", d == 0 ? "fwd" : "bwd", planned / fixed, uniform);
      text += entry;
    }
    std::fill(row_weight_[d].begin(), row_weight_[d].end(), 0.0);
  }
  return text;
}

// Tells each neighbour the bits of the rows it will receive from this rank, and learns those of
// the rows it sends: per direction and layer, the rows of the message in route order.
void AdaptiveBits::exchange_bits(Communicator& comm, int tag) {
  const int k = plan_.num_peers();
  std::vector<std::vector<std::uint8_t>> out(k), in(k);
  std::vector<std::unique_ptr<Request>> requests;
  for (int p = 0; p < k; ++p) {
    if (plan_.send_count(p) == 0 && plan_.recv_count(p) == 0) continue;
    for (int d = 0; d < 2; ++d) {
      const std::vector<std::int64_t>& out_offsets = offsets(d, true);
      const auto n = static_cast<std::size_t>(out_offsets.back());
      for (int l = 0; l < layers_; ++l) {
        const auto first = out_bits_[d].begin() + static_cast<std::ptrdiff_t>(l * n);
        out[p].insert(out[p].end(), first + out_offsets[p], first + out_offsets[p + 1]);
      }
    }
    in[p].resize(static_cast<std::size_t>(layers_) *
                 static_cast<std::size_t>(plan_.recv_count(p) + plan_.send_count(p)));
    requests.push_back(comm.irecv(std::as_writable_bytes(std::span(in[p])), p, tag));
    requests.push_back(
        comm.isend(std::as_bytes(std::span(out[p])), p, tag, TrafficCategory::Setup));
  }
  wait_all(requests);
  for (int p = 0; p < k; ++p) {
    if (in[p].empty()) continue;
    std::size_t at = 0;
    for (int d = 0; d < 2; ++d) {
      const std::vector<std::int64_t>& in_offsets = offsets(d, false);
      const auto n = static_cast<std::size_t>(in_offsets.back());
      for (int l = 0; l < layers_; ++l) {
        for (std::int64_t i = in_offsets[p]; i < in_offsets[p + 1]; ++i, ++at) {
          const std::uint8_t b = in[p][at];
          TESSERA_CHECK(b == 2 || b == 4 || b == 8, InvalidInput, "bit plan from rank ", p, ": ",
                        int{b}, " bits for a row (expected 2, 4 or 8)");
          in_bits_[d][l * n + static_cast<std::size_t>(i)] = b;
        }
      }
    }
  }
}

// Mean bits and rows per width of every message this rank sends.
std::string AdaptiveBits::describe() const {
  const int k = plan_.num_peers();
  std::string text;
  for (int l = 0; l < layers_; ++l) {
    for (int d = 0; d < 2; ++d) {
      if (seen_width_[d][l] == 0) continue;
      for (int p = 0; p < k; ++p) {
        const Groups& g = out_groups_[d][static_cast<std::size_t>(l) * k + p];
        const std::size_t n8 = g.positions[0].size(), n4 = g.positions[1].size(),
                          n2 = g.positions[2].size();
        if (n8 + n4 + n2 == 0) continue;
        const double mean =
            static_cast<double>(8 * n8 + 4 * n4 + 2 * n2) / static_cast<double>(n8 + n4 + n2);
        char entry[128];
        std::snprintf(entry, sizeof entry,
                      "%slayer %d %s -> rank %d: %.2f bits (8: %zu, 4: %zu, 2: %zu)",
                      text.empty() ? "" : ", ", l, d == 0 ? "fwd" : "bwd", p, mean, n8, n4, n2);
        text += entry;
      }
    }
  }
  return text;
}

}  // namespace tessera
