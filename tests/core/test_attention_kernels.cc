// SPDX-License-Identifier: Apache-2.0
// The GAT attention kernels against a plain double-precision reference of GAT's formulas
// (per-head projections; LeakyReLU scores, edge softmax, attention dropout, weighted sum): the
// forward against the reference's values, and the backward (gat_project_backward,
// gat_attention_backward and gat_attention_transpose together) against central finite
// differences of the reference's loss <G, out>. Also: rows split in two calls equal one call,
// results do not depend on the thread count, and bad shapes are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "core/kernels.h"
#include "tests/core/attention_problem.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::KernelRun;
using test::kSlope;
using test::make_problem;
using test::Problem;
using test::values_of;

TEST(AttentionKernels, ForwardMatchesTheFormulas) {
  for (const float p : {0.0f, 0.4f}) {
    for (const auto& [heads, d] : {std::pair{1, 5}, std::pair{3, 4}, std::pair{8, 8}}) {
      const Problem pr = make_problem(60, 15, heads, d, p, 7);
      const KernelRun run(pr);
      EXPECT_TRUE(test::near(values_of(run.out), pr.forward(), 1e-5, 1e-5, pr.hd()))
          << heads << " heads of " << d << ", dropout " << p;
    }
  }
}

TEST(AttentionKernels, BackwardMatchesFiniteDifferencesOfTheFormulas) {
  for (const float p : {0.0f, 0.4f}) {
    Problem pr = make_problem(40, 12, 3, 4, p, 11);
    const KernelRun run(pr);
    // Central differences of the double reference (step 1e-6: a LeakyReLU kink inside a step
    // is improbable); the kernels' gradients are float.
    const auto check = [&](std::vector<double>& values, std::span<const float> analytic,
                           const char* what) {
      ASSERT_EQ(values.size(), analytic.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        const double saved = values[i];
        values[i] = saved + 1e-6;
        const double plus = pr.loss();
        values[i] = saved - 1e-6;
        const double minus = pr.loss();
        values[i] = saved;
        const double fd = (plus - minus) / 2e-6;
        EXPECT_NEAR(analytic[i], fd, 1e-4 * std::max(1.0, std::abs(fd)))
            << what << "[" << i << "], dropout " << p;
      }
    };
    check(pr.z, values_of(run.d_z), "d_z");
    check(pr.att, run.d_att, "d_att");
  }
}

TEST(AttentionKernels, RowsInTwoCallsAndAnyThreadCountGiveTheSameBits) {
  const Problem pr = make_problem(300, 40, 4, 9, 0.3f, 19);
  const KernelRun one(pr);
  const KernelRun split(pr, /*split_rows=*/true);
  std::vector<float> at_one_thread;
  {
    test::ThreadCount threads(1);
    const KernelRun serial(pr);
    EXPECT_TRUE(test::bitwise_equal(values_of(serial.out), values_of(one.out), pr.hd()));
    EXPECT_TRUE(test::bitwise_equal(values_of(serial.d_z), values_of(one.d_z), pr.hd()));
    EXPECT_TRUE(test::bitwise_equal(serial.d_att, one.d_att, pr.hd()));
  }
  EXPECT_TRUE(test::bitwise_equal(values_of(split.out), values_of(one.out), pr.hd()));
  EXPECT_TRUE(test::bitwise_equal(values_of(split.d_z), values_of(one.d_z), pr.hd()));
}

TEST(AttentionKernels, RefuseBadShapes) {
  const Problem pr = make_problem(10, 2, 2, 3, 0.0f, 3);
  KernelRun run(pr);
  std::vector<NodeId> rows = {0, 1, 2};
  Tensor wrong(10, 5);
  EXPECT_THROW(
      gat_attention_forward(wrong, run.alpha, pr.a.view(), run.zs, run.s_dst, 2, kSlope, {}, rows),
      Error);  // out must be (10, 6)
  EXPECT_THROW(gat_attention_forward(run.out, run.alpha, pr.a.view(), run.zs, run.s_dst, 4, kSlope,
                                     {}, rows),
               Error);  // zs (12, 8) is not 4 heads
  rows = {0, 0};
  EXPECT_THROW(gat_attention_forward(run.out, run.alpha, pr.a.view(), run.zs, run.s_dst, 2, kSlope,
                                     {}, rows),
               Error);  // a row twice
  rows = {0};
  const AttentionDropout no_ids{0.5f, &pr.rng, {}};
  EXPECT_THROW(gat_attention_forward(run.out, run.alpha, pr.a.view(), run.zs, run.s_dst, 2, kSlope,
                                     no_ids, rows),
               Error);  // dropout keys missing
  std::vector<float> short_att(5);
  EXPECT_THROW(gat_project(run.zs, run.s_dst, run.d_z, short_att, 2), Error);
}

}  // namespace
}  // namespace tessera
