// HaloExchange's adaptive codec: the blocks of each message (one per codec; one per width when
// adaptive), and replan(), which gives every outgoing row 2, 4 or 8 bits with bit_plan.h from
// the ranges seen since the last plan and tells each peer the bits of the rows it receives.
#include <algorithm>
#include <cstdio>
#include <string>

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

void HaloExchange::pieces(const Route& route, int p, bool outgoing, std::vector<Piece>& out) const {
  out.clear();
  const std::vector<std::int64_t>& offsets = outgoing ? route.out_offsets : route.in_offsets;
  const std::int64_t begin = offsets[p], count = offsets[p + 1] - begin;
  if (count == 0) return;
  if (!codecs_.adaptive) {
    out.push_back({outgoing ? route.out_codecs[p] : route.in_codecs[p], begin, count, {}});
    return;
  }
  const std::size_t cell = static_cast<std::size_t>(route.layer) * plan_.num_peers() + p;
  const Groups& groups = (outgoing ? out_groups_ : in_groups_)[route.direction][cell];
  for (std::size_t w = 0; w < kWidths.size(); ++w) {
    const std::vector<std::int64_t>& positions = groups.positions[w];
    if (positions.empty()) continue;
    const auto n = static_cast<std::int64_t>(positions.size());
    // A whole message at one width is contiguous: no gather, no scatter.
    out.push_back({codec_of_bits(kWidths[w]), n == count ? begin : positions.front(), n,
                   n == count ? std::span<const std::int64_t>() : std::span(positions)});
  }
}

void HaloExchange::rebuild_groups() {
  const int k = plan_.num_peers(), layers = codecs_.num_layers;
  for (int d = 0; d < 2; ++d) {
    for (const bool outgoing : {true, false}) {
      // Outgoing forward rows are the send rows, incoming the halo rows; backward the reverse.
      const std::vector<std::int64_t>& offsets =
          (d == 0) == outgoing ? plan_.send_offsets : plan_.recv_offsets;
      const std::vector<std::uint8_t>& bits = outgoing ? out_bits_[d] : in_bits_[d];
      std::vector<Groups>& groups = outgoing ? out_groups_[d] : in_groups_[d];
      const std::size_t n = static_cast<std::size_t>(offsets.back());
      groups.assign(static_cast<std::size_t>(layers) * k, Groups{});
      for (int l = 0; l < layers; ++l) {
        for (int p = 0; p < k; ++p) {
          Groups& g = groups[static_cast<std::size_t>(l) * k + p];
          for (std::int64_t i = offsets[p]; i < offsets[p + 1]; ++i) {
            const std::uint8_t b = bits[l * n + static_cast<std::size_t>(i)];
            g.positions[b == 8 ? 0 : b == 4 ? 1 : 2].push_back(i);
          }
        }
      }
    }
  }
}

std::string HaloExchange::replan() {
  if (!codecs_.adaptive) return {};
  const int k = plan_.num_peers(), layers = codecs_.num_layers;
  // Every outgoing row of every layer seen since the last plan is an item (width F values,
  // variance weight F·Σ receiver weight·range²). The two directions are planned separately, each
  // under the budget: embeddings and gradients differ in scale by orders of magnitude, so one
  // absolute-variance objective would starve the gradients of bits.
  const int uniform = uniform_bits(codecs_.bit_budget);
  std::string text;
  for (int d = 0; d < 2; ++d) {
    const std::size_t n = static_cast<std::size_t>(d == 0 ? plan_.num_send() : plan_.num_halo());
    std::vector<BitPlanItem> items;
    std::vector<std::size_t> where;  // index into out_bits_[d] of each item
    for (int l = 0; l < layers; ++l) {
      const std::int64_t f = seen_width_[d][l];
      if (f == 0) continue;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t at = static_cast<std::size_t>(l) * n + i;
        items.push_back({f, static_cast<double>(f) * row_weight_[d][at]});
        where.push_back(at);
      }
    }
    const std::vector<int> bits = plan_bits(items, codecs_.bit_budget);
    double planned = 0.0, fixed = 0.0;  // the model's rounding variance, and at uniform bits
    for (std::size_t j = 0; j < items.size(); ++j) {
      out_bits_[d][where[j]] = static_cast<std::uint8_t>(bits[j]);
      planned += items[j].weight * variance_factor(bits[j]);
      fixed += items[j].weight * variance_factor(uniform);
    }
    if (fixed > 0.0) {
      char entry[96];
      std::snprintf(entry, sizeof entry, "%s%s variance %.3fx of uniform %d bits", text.empty() ? "" : ", ",
                    d == 0 ? "fwd" : "bwd", planned / fixed, uniform);
      text += entry;
    }
    std::fill(row_weight_[d].begin(), row_weight_[d].end(), 0.0);
  }
  // Tell each neighbour the bits of the rows it will receive from this rank, and learn those of
  // the rows it sends: per direction and layer, the rows of the message in route order.
  constexpr int kPlanTag = 9001;
  std::vector<std::vector<std::uint8_t>> out(k), in(k);
  std::vector<std::unique_ptr<Request>> requests;
  const std::size_t n_send = static_cast<std::size_t>(plan_.num_send());
  const std::size_t n_halo = static_cast<std::size_t>(plan_.num_halo());
  for (int p = 0; p < k; ++p) {
    if (plan_.send_count(p) == 0 && plan_.recv_count(p) == 0) continue;
    for (int d = 0; d < 2; ++d) {
      const std::vector<std::int64_t>& out_offsets = d == 0 ? plan_.send_offsets : plan_.recv_offsets;
      const std::size_t n = d == 0 ? n_send : n_halo;
      for (int l = 0; l < layers; ++l) {
        const auto first = out_bits_[d].begin() + static_cast<std::ptrdiff_t>(l * n);
        out[p].insert(out[p].end(), first + out_offsets[p], first + out_offsets[p + 1]);
      }
    }
    in[p].resize(static_cast<std::size_t>(layers) *
                 static_cast<std::size_t>(plan_.recv_count(p) + plan_.send_count(p)));
    requests.push_back(comm_.irecv(std::as_writable_bytes(std::span(in[p])), p, kPlanTag));
    requests.push_back(
        comm_.isend(std::as_bytes(std::span(out[p])), p, kPlanTag, TrafficCategory::Setup));
  }
  wait_all(requests);
  for (int p = 0; p < k; ++p) {
    if (in[p].empty()) continue;
    std::size_t at = 0;
    for (int d = 0; d < 2; ++d) {
      const std::vector<std::int64_t>& in_offsets = d == 0 ? plan_.recv_offsets : plan_.send_offsets;
      const std::size_t n = d == 0 ? n_halo : n_send;
      for (int l = 0; l < layers; ++l) {
        for (std::int64_t i = in_offsets[p]; i < in_offsets[p + 1]; ++i, ++at) {
          const std::uint8_t b = in[p][at];
          TESSERA_CHECK(b == 2 || b == 4 || b == 8, InvalidInput, "bit plan from rank ", p,
                        ": ", int{b}, " bits for a row (expected 2, 4 or 8)");
          in_bits_[d][l * n + static_cast<std::size_t>(i)] = b;
        }
      }
    }
  }
  rebuild_groups();
  // The plan in words: the variance it saves, then mean bits and rows per width of every
  // message this rank sends.
  for (int l = 0; l < layers; ++l) {
    for (int d = 0; d < 2; ++d) {
      if (seen_width_[d][l] == 0) continue;
      for (int p = 0; p < k; ++p) {
        const Groups& g = out_groups_[d][static_cast<std::size_t>(l) * k + p];
        const std::size_t rows = g.positions[0].size() + g.positions[1].size() + g.positions[2].size();
        if (rows == 0) continue;
        const double mean = static_cast<double>(8 * g.positions[0].size() +
                                                4 * g.positions[1].size() +
                                                2 * g.positions[2].size()) / static_cast<double>(rows);
        char entry[128];
        std::snprintf(entry, sizeof entry, "%slayer %d %s -> rank %d: %.2f bits (8: %zu, 4: %zu, 2: %zu)",
                      text.empty() ? "" : ", ", l, d == 0 ? "fwd" : "bwd", p, mean,
                      g.positions[0].size(), g.positions[1].size(), g.positions[2].size());
        text += entry;
      }
    }
  }
  for (int d = 0; d < 2; ++d) std::fill(seen_width_[d].begin(), seen_width_[d].end(), 0);
  return text;
}

}  // namespace tessera
