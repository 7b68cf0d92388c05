// SPDX-License-Identifier: Apache-2.0
// The GAT attention kernels on a GPU against their CPU twins, through the public kernels
// (core/kernels.h: the dispatch stages the host pattern, index lists, attention vectors and
// dropout ids): projections, scores, edge softmax, attention dropout (the CPU's Philox words, so
// the same edges are dropped), the weighted sum, its backward and the transposed aggregation,
// with rows in one call and in two. Skips, with the reason, when no GPU is usable.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "core/cuda/runtime.h"
#include "core/kernels.h"
#include "tests/core/attention_problem.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::KernelRun;
using test::values_of;

std::vector<double> as_double(const Tensor& t) {
  const std::vector<float> v = values_of(t.to(Device::cpu()));
  return {v.begin(), v.end()};
}

// Float sums of up to ~50 products in the same order; only exp and its last bit differ.
constexpr double kTolerance = 1e-5;

TEST(CudaAttention, MatchesTheCpuTwins) {
  if (!cuda::cuda_available()) {
    std::printf("skipping GPU twin test: %s\n", cuda::unavailable_reason().c_str());
    GTEST_SKIP() << "no usable CUDA GPU: " << cuda::unavailable_reason();
  }
  const Device gpu{DeviceKind::Cuda, 0};
  for (const float p : {0.0f, 0.4f}) {
    for (const auto& [heads, d] : {std::pair{1, 5}, std::pair{3, 4}, std::pair{8, 8}}) {
      for (const bool split : {false, true}) {
        SCOPED_TRACE(std::to_string(heads) + " heads of " + std::to_string(d) + ", dropout " +
                     std::to_string(p) + (split ? ", rows in two calls" : ""));
        const test::Problem pr = test::make_problem(120, 30, heads, d, p, 23);
        const KernelRun cpu(pr, split);
        const KernelRun gpu_run(pr, split, gpu);
        const std::int64_t hd = pr.hd();
        EXPECT_TRUE(test::near(values_of(gpu_run.zs.to(Device::cpu())), as_double(cpu.zs), 1e-6,
                               kTolerance, hd + heads));
        EXPECT_TRUE(test::near(values_of(gpu_run.out.to(Device::cpu())), as_double(cpu.out),
                               kTolerance, kTolerance, hd));
        EXPECT_TRUE(test::near(values_of(gpu_run.alpha.to(Device::cpu())), as_double(cpu.alpha),
                               kTolerance, kTolerance, heads));
        EXPECT_TRUE(test::near(values_of(gpu_run.d_zs.to(Device::cpu())), as_double(cpu.d_zs),
                               kTolerance, kTolerance, hd + heads));
        EXPECT_TRUE(test::near(values_of(gpu_run.d_z.to(Device::cpu())), as_double(cpu.d_z),
                               kTolerance, kTolerance, hd));
        const std::vector<double> d_att(cpu.d_att.begin(), cpu.d_att.end());
        EXPECT_TRUE(test::near(gpu_run.d_att, d_att, 1e-4, 1e-4, hd));  // column sums, reordered
      }
    }
  }
}

}  // namespace
}  // namespace tessera
