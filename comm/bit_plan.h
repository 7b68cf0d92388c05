// SPDX-License-Identifier: Apache-2.0
// Adaptive bit widths (in the spirit of AdaQP, MLSys 2023): given the messages a rank sends,
// choose 2, 4 or 8 bits per message to minimise the total quantisation variance under a byte
// budget. A row of width F and range r quantised to b bits adds variance ∝ F·r²/(2^b − 1)², so a
// message's variance is weight/(2^b − 1)² with weight = Σ_rows F·r². This is a multiple-choice
// knapsack; because variance falls convexly with bits, the greedy that repeatedly takes the
// upgrade (2→4 or 4→8) saving the most variance per extra bit is optimal for its relaxation and
// needs no solver. Its integral plan is compared with the widest uniform plan that fits (so
// the adaptive codec is never worse than the fixed one at its budget), and the better is kept.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

struct BitPlanItem {
  std::int64_t values = 0;  // rows × width of the message
  double weight = 0.0;      // Σ over rows of width × range²
};

// Bits (2, 4 or 8) per item such that Σ values·bits <= budget_bits·Σ values (the per-row offset
// and scale are not counted) and Σ weight/(2^bits − 1)² is as small as the greedy makes it.
// budget_bits in [2, 8] (InvalidArgument otherwise). Deterministic: ties go to the lower index.
std::vector<int> plan_bits(std::span<const BitPlanItem> items, double budget_bits);

// 1/(2^bits − 1)²: the rounding variance of `bits` relative to a row's F·range².
double variance_factor(int bits);
// The widest of 2, 4 and 8 bits that budget_bits affords for every value.
int uniform_bits(double budget_bits);

}  // namespace tessera
