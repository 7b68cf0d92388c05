// SPDX-License-Identifier: Apache-2.0
// The greedy of bit_plan.h: every message starts at 2 bits; upgrades are taken in order of
// variance saved per extra bit while they fit the budget. An upgrade 4→8 of a message is only
// offered after its 2→4, which the convexity of 1/(2^b − 1)² makes the better ratio anyway.
// The result is then compared with the widest uniform plan that fits, and the better one wins.
#include "comm/bit_plan.h"

#include <queue>

#include "core/error.h"

namespace tessera {

double variance_factor(int bits) {
  const double levels = static_cast<double>((1 << bits) - 1);
  return 1.0 / (levels * levels);
}

int uniform_bits(double budget_bits) { return budget_bits >= 8.0 ? 8 : budget_bits >= 4.0 ? 4 : 2; }

namespace {

struct Upgrade {
  double saved_per_bit;
  std::size_t item;
  bool operator<(const Upgrade& other) const {  // max-heap on saving, then lower index first
    if (saved_per_bit != other.saved_per_bit) return saved_per_bit < other.saved_per_bit;
    return item > other.item;
  }
};

}  // namespace

std::vector<int> plan_bits(std::span<const BitPlanItem> items, double budget_bits) {
  TESSERA_CHECK(budget_bits >= 2.0 && budget_bits <= 8.0, InvalidArgument,
                "--bit-budget must be in [2, 8] bits per value, got ", budget_bits);
  std::vector<int> bits(items.size(), 2);
  double total_values = 0.0;
  for (const BitPlanItem& item : items) total_values += static_cast<double>(item.values);
  double spare = (budget_bits - 2.0) * total_values;  // bits left above the all-2-bit plan

  auto upgrade_of = [&](std::size_t i) {
    const int to = bits[i] * 2;
    const double extra = static_cast<double>(items[i].values) * (to - bits[i]);
    const double saved = items[i].weight * (variance_factor(bits[i]) - variance_factor(to));
    return Upgrade{extra > 0 ? saved / extra : 0.0, i};
  };
  std::priority_queue<Upgrade> queue;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].values > 0) queue.push(upgrade_of(i));
  }
  while (!queue.empty()) {
    const Upgrade best = queue.top();
    queue.pop();
    const std::size_t i = best.item;
    const double extra = static_cast<double>(items[i].values) * bits[i];  // b → 2b costs b more
    if (extra > spare) continue;  // does not fit; a smaller message may
    spare -= extra;
    bits[i] *= 2;
    if (bits[i] < 8) queue.push(upgrade_of(i));
  }
  // Greedy knapsacks can strand budget when a large upgrade no longer fits after small ones
  // were taken; the widest uniform plan the budget affords is the fallback that bounds this.
  const int uniform = uniform_bits(budget_bits);
  double greedy_variance = 0.0, uniform_variance = 0.0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    greedy_variance += items[i].weight * variance_factor(bits[i]);
    uniform_variance += items[i].weight * variance_factor(uniform);
  }
  if (uniform_variance < greedy_variance) bits.assign(items.size(), uniform);
  return bits;
}

}  // namespace tessera
