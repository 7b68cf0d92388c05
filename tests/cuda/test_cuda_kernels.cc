// SPDX-License-Identifier: Apache-2.0
// Every CUDA kernel against its CPU twin (the CPU kernels are the specification) on random
// inputs over the project's widths (1, 7, 8, 9, 31, 32, 33, 257, ...), with empty, one-row and
// zero-degree-row inputs. Exact where the GPU does the same float operations (bias + ReLU,
// dropout, row moves, distinct scatter-add); elsewhere within a stated rounding bound. Every
// test skips, printing the reason, when no GPU is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "core/cpu/dispatch.h"
#include "core/cuda/allocator.h"
#include "core/cuda/check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/runtime.h"
#include "core/kernels.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::kFloatEps;
using test::kWidths;

const std::vector<std::int64_t> kRowCounts = {0, 1, 203};

template <class T>
cuda::DeviceBuffer upload(std::span<const T> host) {
  cuda::DeviceBuffer buffer(host.size() * sizeof(T));
  if (!host.empty()) {
    TESSERA_CUDA_CHECK(cudaMemcpy(buffer.get(), host.data(), host.size() * sizeof(T),
                                  cudaMemcpyHostToDevice));
  }
  return buffer;
}
template <class T>
cuda::DeviceBuffer upload(const std::vector<T>& host) {
  return upload(std::span<const T>(host));
}
cuda::DeviceBuffer upload(const Tensor& t) {
  return upload(std::span<const float>(t.f32(), static_cast<std::size_t>(t.numel())));
}

template <class T = float>
std::vector<T> download(const cuda::DeviceBuffer& buffer, std::size_t n) {
  cuda::synchronize_compute();
  std::vector<T> host(n);
  if (n) {
    TESSERA_CUDA_CHECK(cudaMemcpy(host.data(), buffer.get(), n * sizeof(T),
                                  cudaMemcpyDeviceToHost));
  }
  return host;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::cuda_available()) {
      std::printf("skipping GPU twin test: %s\n", cuda::unavailable_reason().c_str());
      GTEST_SKIP() << "no usable CUDA GPU: " << cuda::unavailable_reason();
    }
  }
};

// Rounding bound of a float sum of n products computed in two different orders: each side is
// within (n + 1) eps sum|terms| of the exact value (Higham 4.4).
std::vector<double> sum_bound(const std::vector<float>& abs_sums, const std::vector<double>& terms) {
  std::vector<double> tol(abs_sums.size());
  for (std::size_t i = 0; i < tol.size(); ++i) {
    tol[i] = 2.0 * (terms[i] + 2.0) * kFloatEps * abs_sums[i] + 1e-30;
  }
  return tol;
}

TEST_F(CudaKernels, SpmmMatchesCpuOverWidthsAndShapes) {
  for (bool weighted : {false, true}) {
    for (std::int64_t rows : kRowCounts) {
      const Csr a = test::random_csr(rows, 150, 7, weighted);
      Csr abs_a = a;  // |A| for the bound (weights are already >= 0)
      const cuda::CudaCsr device_a(a.view());
      for (std::int64_t f : kWidths) {
        const Tensor x = test::random_tensor(150, f, 9);
        Tensor want(rows, f);
        spmm(want, a.view(), x);
        Tensor abs_x = x.clone();
        for (std::int64_t i = 0; i < abs_x.numel(); ++i) abs_x.f32()[i] = std::abs(abs_x.f32()[i]);
        Tensor abs_sums(rows, f);
        spmm(abs_sums, abs_a.view(), abs_x);
        std::vector<double> terms(static_cast<std::size_t>(rows * f));
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t k = 0; k < f; ++k)
            terms[static_cast<std::size_t>(r * f + k)] = static_cast<double>(a.degree(r));
        const cuda::DeviceBuffer d_x = upload(x);
        cuda::DeviceBuffer d_out(static_cast<std::size_t>(rows * f) * sizeof(float));
        for (int repeat = 0; repeat < 2; ++repeat) {  // the second call reuses the plan
          cuda::spmm(d_out.as<float>(), device_a, d_x.as<float>(), f);
          EXPECT_TRUE(test::near_each(download(d_out, static_cast<std::size_t>(rows * f)),
                                      as_double(test::values_of(want)),
                                      sum_bound(test::values_of(abs_sums), terms), f))
              << "weighted " << weighted << " R " << rows << " F " << f << " call " << repeat;
        }
      }
    }
  }
}

TEST_F(CudaKernels, SpmmRowsWritesOnlyTheListedRows) {
  const Csr a = test::random_csr(120, 90, 3, true);
  std::vector<NodeId> rows;
  for (NodeId r = 0; r < 120; r += 3) rows.push_back(r);
  const cuda::CudaCsr subset(a.view(), rows);
  cuda::DeviceBuffer scratch;
  for (std::int64_t f : kWidths) {
    const Tensor x = test::random_tensor(90, f, 4);
    Tensor want = Tensor::zeros(120, f);
    for (std::int64_t i = 0; i < want.numel(); ++i) want.f32()[i] = -7.0f;
    spmm_rows(want, a.view(), x, rows);
    std::vector<float> start(static_cast<std::size_t>(120 * f), -7.0f);
    cuda::DeviceBuffer d_out = upload(start);
    const cuda::DeviceBuffer d_x = upload(x);
    cuda::spmm_rows(d_out.as<float>(), subset, d_x.as<float>(), f, scratch);
    EXPECT_TRUE(test::near(download(d_out, start.size()), as_double(test::values_of(want)), 1e-5,
                           1e-5, f))
        << "F " << f;
  }
}

TEST_F(CudaKernels, GemmMatchesCpuInTheLayersShapesAndAllTransposes) {
  struct Shape {
    std::int64_t m, n, k;
  };
  for (const Shape s : {Shape{203, 33, 257}, Shape{1, 7, 9}, Shape{0, 8, 5}, Shape{31, 1, 1},
                        Shape{9, 32, 0}, Shape{257, 16, 1000}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Tensor a = ta ? test::random_tensor(s.k, s.m, 1) : test::random_tensor(s.m, s.k, 1);
        const Tensor b = tb ? test::random_tensor(s.n, s.k, 2) : test::random_tensor(s.k, s.n, 2);
        Tensor want = test::random_tensor(s.m, s.n, 3);
        const cuda::DeviceBuffer d_c = upload(want);
        gemm(want, a, ta, b, tb, 0.5f, 0.25f);
        const cuda::DeviceBuffer d_a = upload(a), d_b = upload(b);
        cuda::gemm(d_c.as<float>(), d_a.as<float>(), ta, d_b.as<float>(), tb, 0.5f, 0.25f, s.m,
                   s.n, s.k);
        // Entries of a and b are in [-1, 1]: |sum| <= k, each order within (k + 2) eps k.
        const double tol = 2.0 * (static_cast<double>(s.k) + 2.0) * kFloatEps *
                               (0.5 * static_cast<double>(s.k) + 0.25) + 1e-30;
        EXPECT_TRUE(test::near(download(d_c, static_cast<std::size_t>(s.m * s.n)),
                               as_double(test::values_of(want)), tol, 0.0, s.n))
            << "m " << s.m << " n " << s.n << " k " << s.k << " ta " << ta << " tb " << tb;
      }
    }
  }
}

TEST_F(CudaKernels, AxpyAndColumnSums) {
  for (std::int64_t rows : {std::int64_t{0}, std::int64_t{1}, std::int64_t{203},
                            std::int64_t{5000}}) {
    for (std::int64_t f : kWidths) {
      const Tensor x = test::random_tensor(rows, f, 6);
      Tensor y = test::random_tensor(rows, f, 7);
      const cuda::DeviceBuffer d_x = upload(x), d_y = upload(y);
      axpy(y, -0.75f, x);
      cuda::axpy(d_y.as<float>(), -0.75f, d_x.as<float>(), rows * f);
      EXPECT_TRUE(test::near(download(d_y, static_cast<std::size_t>(rows * f)),
                             as_double(test::values_of(y)), 0.0, 2 * kFloatEps, f));
      for (bool accumulate : {false, true}) {
        std::vector<float> want(static_cast<std::size_t>(f), 0.5f);
        const cuda::DeviceBuffer d_sums = upload(want);
        column_sums(want, x, accumulate);
        cuda::column_sums(d_sums.as<float>(), d_x.as<float>(), accumulate, rows, f);
        // Both sum in double and round once; the double orders differ by far less than a float.
        EXPECT_TRUE(test::near(download(d_sums, static_cast<std::size_t>(f)), as_double(want),
                               1e-6, 2 * kFloatEps, f))
            << "R " << rows << " F " << f << " accumulate " << accumulate;
      }
    }
  }
}

TEST_F(CudaKernels, BiasActForwardAndBackwardAreExact) {
  for (std::int64_t rows : kRowCounts) {
    for (std::int64_t f : kWidths) {
      for (Activation act : {Activation::None, Activation::Relu, Activation::Elu}) {
        for (bool with_bias : {false, true}) {
          const Tensor x = test::random_tensor(rows, f, 8);
          const std::vector<float> bias =
              with_bias ? test::random_floats(static_cast<std::size_t>(f), 9) : std::vector<float>{};
          Tensor y(rows, f);
          bias_act_forward(y, x, bias, act);
          const cuda::DeviceBuffer d_x = upload(x), d_bias = upload(bias);
          cuda::DeviceBuffer d_y(static_cast<std::size_t>(rows * f) * sizeof(float));
          cuda::bias_act_forward(d_y.as<float>(), d_x.as<float>(),
                                 with_bias ? d_bias.as<float>() : nullptr, act, rows, f);
          // ELU: the GPU's expm1f may round its last bit unlike the C library's expm1.
          const auto same = [&](const std::vector<float>& got, const std::vector<float>& want) {
            return act == Activation::Elu ? test::near(got, as_double(want), 1e-7, 4 * kFloatEps, f)
                                          : test::bitwise_equal(got, want, f);
          };
          EXPECT_TRUE(same(download(d_y, static_cast<std::size_t>(rows * f)), test::values_of(y)));
          // Backward, in place (d_x aliases d_y) as the layers call it.
          const Tensor d_out = test::random_tensor(rows, f, 10);
          Tensor d_in = d_out.clone();
          std::vector<float> d_bias_want(with_bias ? static_cast<std::size_t>(f) : 0, 0.25f);
          bias_act_backward(d_in, d_bias_want, d_in, y, act);
          cuda::DeviceBuffer d_grad = upload(d_out);
          const cuda::DeviceBuffer d_bias_got = upload(d_bias_want.empty()
                                                           ? std::vector<float>{}
                                                           : std::vector<float>(d_bias_want.size(),
                                                                                0.25f));
          cuda::bias_act_backward(d_grad.as<float>(), with_bias ? d_bias_got.as<float>() : nullptr,
                                  d_grad.as<float>(), d_y.as<float>(), act, rows, f);
          EXPECT_TRUE(same(download(d_grad, static_cast<std::size_t>(rows * f)),
                           test::values_of(d_in)));
          if (with_bias) {
            EXPECT_TRUE(test::near(download(d_bias_got, d_bias_want.size()),
                                   as_double(d_bias_want), 1e-6, 2 * kFloatEps, f));
          }
        }
      }
    }
  }
}

TEST_F(CudaKernels, DropoutMasksAreBitIdenticalToTheCpu) {
  for (std::int64_t rows : kRowCounts) {
    std::vector<GlobalId> ids(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) {
      ids[static_cast<std::size_t>(i)] = (i * 7919 + 3) + (i % 2 ? (GlobalId{1} << 33) : 0);
    }
    const cuda::DeviceBuffer d_ids = upload(ids);
    for (std::int64_t f : kWidths) {
      for (float p : {0.0f, 0.25f, 0.5f, 0.9f}) {
        const CounterRng rng(1234, 5, 2, RngPurpose::Dropout);
        const Tensor x = test::random_tensor(rows, f, 12);
        Tensor y(rows, f), d_x(rows, f);
        dropout_forward(y, x, p, rng, ids);
        dropout_backward(d_x, x, p, rng, ids);
        const cuda::DeviceBuffer d_in = upload(x);
        cuda::DeviceBuffer d_out(static_cast<std::size_t>(rows * f) * sizeof(float));
        cuda::dropout_forward(d_out.as<float>(), d_in.as<float>(), p, rng, d_ids.as<GlobalId>(),
                              rows, f);
        EXPECT_TRUE(test::bitwise_equal(download(d_out, static_cast<std::size_t>(rows * f)),
                                        test::values_of(y), f))
            << "forward R " << rows << " F " << f << " p " << p;
        cuda::dropout_backward(d_out.as<float>(), d_in.as<float>(), p, rng, d_ids.as<GlobalId>(),
                               rows, f);
        EXPECT_TRUE(test::bitwise_equal(download(d_out, static_cast<std::size_t>(rows * f)),
                                        test::values_of(d_x), f))
            << "backward R " << rows << " F " << f << " p " << p;
      }
    }
  }
}

TEST_F(CudaKernels, GatherAndScatterAddRows) {
  const std::int64_t n_rows = 203;
  for (std::int64_t f : kWidths) {
    const Tensor x = test::random_tensor(n_rows, f, 13);
    const cuda::DeviceBuffer d_x = upload(x);
    for (bool repeats : {false, true}) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{150}}) {
        std::vector<NodeId> rows(count);
        for (std::size_t i = 0; i < count; ++i) {
          rows[i] = static_cast<NodeId>(repeats ? (i * 37) % 11 : (i * 37) % n_rows);
        }
        const cuda::DeviceBuffer d_rows = upload(rows);
        const auto n = static_cast<std::int64_t>(count);
        Tensor packed(n, f);
        gather_rows(packed, x, rows);
        cuda::DeviceBuffer d_packed(static_cast<std::size_t>(n * f) * sizeof(float));
        cuda::gather_rows(d_packed.as<float>(), d_x.as<float>(), d_rows.as<NodeId>(), n, f);
        EXPECT_TRUE(test::bitwise_equal(download(d_packed, static_cast<std::size_t>(n * f)),
                                        test::values_of(packed), f));
        Tensor out = test::random_tensor(n_rows, f, 14);
        const cuda::DeviceBuffer d_target = upload(out);
        scatter_add_rows(out, packed, rows);
        cuda::scatter_add_rows(d_target.as<float>(), d_packed.as<float>(), d_rows.as<NodeId>(), n,
                               f);
        const std::vector<float> got = download(d_target, static_cast<std::size_t>(n_rows * f));
        if (repeats) {  // atomics add in any order: within the rounding of up to 14 additions
          EXPECT_TRUE(test::near(got, as_double(test::values_of(out)), 16 * 16 * kFloatEps, 0.0, f));
        } else {
          EXPECT_TRUE(test::bitwise_equal(got, test::values_of(out), f)) << "F " << f;
          // Scattered by assignment (distinct rows), through the public dispatch.
          Tensor placed = test::random_tensor(n_rows, f, 15);
          Tensor d_placed = placed.to(Device{DeviceKind::Cuda, 0});
          scatter_rows(placed, packed, rows);
          scatter_rows(d_placed, packed.to(Device{DeviceKind::Cuda, 0}), rows);
          EXPECT_TRUE(test::bitwise_equal(test::values_of(d_placed.to(Device::cpu())),
                                          test::values_of(placed), f))
              << "F " << f;
        }
      }
    }
  }
}

TEST_F(CudaKernels, LogSoftmaxNllAndBackward) {
  for (std::int64_t rows : kRowCounts) {
    for (std::int64_t c : kWidths) {
      const Tensor logits = test::random_tensor(rows, c, 15, -4.0f, 4.0f);
      std::vector<std::int64_t> labels(static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r) labels[static_cast<std::size_t>(r)] = (r * 5) % c;
      std::vector<NodeId> listed;
      for (NodeId r = 0; r < rows; r += 2) listed.push_back(r);
      Tensor logp(rows, c);
      log_softmax_forward(logp, logits);
      const double loss = nll_loss_sum(logp, labels, listed);
      Tensor d_logits(rows, c);
      log_softmax_nll_backward(d_logits, logp, labels, listed, 0.125f);

      const cuda::DeviceBuffer d_logits_in = upload(logits), d_labels = upload(labels),
                               d_listed = upload(listed);
      cuda::DeviceBuffer d_logp(static_cast<std::size_t>(rows * c) * sizeof(float));
      cuda::log_softmax_forward(d_logp.as<float>(), d_logits_in.as<float>(), rows, c);
      const std::vector<float> got_logp = download(d_logp, static_cast<std::size_t>(rows * c));
      // expf/logf and the tree sum differ from the CPU by a few ulps of values up to ~10.
      EXPECT_TRUE(test::near(got_logp, as_double(test::values_of(logp)), 1e-5, 1e-5, c))
          << "R " << rows << " C " << c;
      // The rest from the CPU's logp, so that each kernel is compared on the same input.
      const cuda::DeviceBuffer d_logp_cpu = upload(logp);
      const auto n = static_cast<std::int64_t>(listed.size());
      const double got_loss = cuda::nll_loss_sum(d_logp_cpu.as<float>(),
                                                 d_labels.as<std::int64_t>(),
                                                 d_listed.as<NodeId>(), n, c);
      EXPECT_NEAR(got_loss, loss, 1e-12 * (1.0 + std::abs(loss))) << "R " << rows << " C " << c;
      cuda::DeviceBuffer d_grad(static_cast<std::size_t>(rows * c) * sizeof(float));
      cuda::log_softmax_nll_backward(d_grad.as<float>(), d_logp_cpu.as<float>(),
                                     d_labels.as<std::int64_t>(), d_listed.as<NodeId>(), n,
                                     0.125f, rows, c);
      EXPECT_TRUE(test::near(download(d_grad, static_cast<std::size_t>(rows * c)),
                             as_double(test::values_of(d_logits)), 1e-7, 8 * kFloatEps, c));
    }
  }
}

// ---- multi-label loss and batch normalisation ----

// Unit roundoff of double.
constexpr double kDoubleEps = 1.0 / (std::int64_t{1} << 53);

// |got[i] - want[i]| <= tol[i] for double results; on failure the largest error and the first
// mismatching index, as test::near_each reports for floats.
::testing::AssertionResult near_doubles(const std::vector<double>& got,
                                        const std::vector<double>& want,
                                        const std::vector<double>& tol) {
  if (got.size() != want.size() || tol.size() != want.size()) {
    return ::testing::AssertionFailure() << "size differs: got " << got.size() << ", want "
                                         << want.size() << ", tolerances " << tol.size();
  }
  std::size_t bad = 0, first = 0, worst = 0;
  double worst_err = -1.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    if (err <= tol[i]) continue;
    if (bad++ == 0) first = i;
    if (err > worst_err || std::isnan(err)) {
      worst_err = err;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " values off; largest error " << worst_err << " at "
         << worst << " (got " << got[worst] << ", want " << want[worst] << "); first mismatch at "
         << first << " (got " << got[first] << ", want " << want[first] << ", tolerance "
         << tol[first] << ")";
}

// Targets (R, T) of a multi-label task: every 5th entry NaN (no label), the others 0 or 1, with
// every 7th a soft label in [0, 1).
std::vector<float> bce_targets(std::int64_t rows, std::int64_t t) {
  std::vector<float> targets = test::random_floats(static_cast<std::size_t>(rows * t), 17, 0.0f,
                                                   1.0f);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (i % 5 == 3) {
      targets[i] = std::numeric_limits<float>::quiet_NaN();
    } else if (i % 7 != 0) {
      targets[i] = targets[i] < 0.5f ? 0.0f : 1.0f;
    }
  }
  return targets;
}

TEST_F(CudaKernels, SigmoidBceLossAndBackwardMatchCpu) {
  constexpr float kScale = 0.125f;
  // 5000 rows x wide T: more terms than the loss's 1024 x 256 threads (grid-stride loop).
  for (std::int64_t rows : {std::int64_t{0}, std::int64_t{1}, std::int64_t{203},
                            std::int64_t{5000}}) {
    for (std::int64_t t : kWidths) {
      // Logits in [-8, 8]: both branches of the stable sigmoid, and terms far from 0.
      const std::vector<float> logits =
          test::random_floats(static_cast<std::size_t>(rows * t), 16, -8.0f, 8.0f);
      const std::vector<float> targets = bce_targets(rows, t);
      // Listed: rows r % 3 != 1 in descending order; and no row at all (n = 0 on R rows).
      std::vector<NodeId> some;
      for (std::int64_t r = rows - 1; r >= 0; --r) {
        if (r % 3 != 1) some.push_back(static_cast<NodeId>(r));
      }
      const cuda::DeviceBuffer d_logits = upload(logits), d_targets = upload(targets);
      for (const std::vector<NodeId>& listed : {some, std::vector<NodeId>{}}) {
        const auto n = static_cast<std::int64_t>(listed.size());
        const cuda::DeviceBuffer d_listed = upload(listed);
        std::int64_t want_count = -1;
        const double want = cpu::kernels().sigmoid_bce_loss_sum(&want_count, logits.data(),
                                                                targets.data(), listed, t);
        std::int64_t got_count = -1;
        const double got = cuda::sigmoid_bce_loss_sum(&got_count, d_logits.as<float>(),
                                                      d_targets.as<float>(),
                                                      d_listed.as<NodeId>(), n, t);
        EXPECT_EQ(got_count, want_count) << "R " << rows << " T " << t << " n " << n;
        // Each term is a few double operations plus exp and log1p (within 2 ulps on both sides),
        // summed in different orders: each side is within (m + 4) eps_d of the exact sum of the
        // terms' absolute parts A = sum max(z, 0) + |z y| + log1p(exp(-|z|)) (Higham 4.4).
        double abs_parts = 0.0;
        for (NodeId r : listed) {
          for (std::int64_t k = 0; k < t; ++k) {
            const double y = targets[static_cast<std::size_t>(r * t + k)];
            if (std::isnan(y)) continue;
            const double z = logits[static_cast<std::size_t>(r * t + k)];
            abs_parts += std::max(z, 0.0) + std::abs(z * y) + std::log1p(std::exp(-std::abs(z)));
          }
        }
        const double tol =
            2.0 * (static_cast<double>(want_count) + 8.0) * kDoubleEps * abs_parts;
        EXPECT_NEAR(got, want, tol) << "R " << rows << " T " << t << " n " << n;

        // Backward; the output starts as garbage, so that the zeroing of every entry is checked.
        std::vector<float> want_grad(static_cast<std::size_t>(rows * t));
        cpu::kernels().sigmoid_bce_backward(want_grad.data(), logits.data(), targets.data(), listed,
                                            kScale, rows, t);
        const cuda::DeviceBuffer d_grad =
            upload(std::vector<float>(static_cast<std::size_t>(rows * t), -7.0f));
        cuda::sigmoid_bce_backward(d_grad.as<float>(), d_logits.as<float>(),
                                   d_targets.as<float>(), d_listed.as<NodeId>(), n, kScale, rows,
                                   t);
        // sigmoid in float: expf within 2 ulps on the GPU and 1 on the CPU, then an add and a
        // divide, so each sigmoid in [0, 1] is within ~8u (u = 2^-24) of the exact one and the
        // two differ by < 13u; the subtraction and the scaling round once more on each side (4u
        // relative). Entries with a NaN target or off the list are exactly 0 on both.
        EXPECT_TRUE(test::near(download(d_grad, static_cast<std::size_t>(rows * t)),
                               as_double(want_grad), 16 * kFloatEps * kScale, 4 * kFloatEps, t))
            << "R " << rows << " T " << t << " n " << n;
      }
    }
  }
}

// Host (F) vectors for the forward: mean and inv_std from CPU statistics (1 / sqrt(var + 1e-5)),
// gamma and beta random.
struct BatchNormParams {
  std::vector<float> mean, inv_std, gamma, beta;
};

BatchNormParams batch_norm_params(const std::vector<double>& sum,
                                  const std::vector<double>& sum_sq, std::int64_t rows) {
  BatchNormParams p;
  const std::size_t f = sum.size();
  p.gamma = test::random_floats(f, 21, 0.5f, 2.0f);
  p.beta = test::random_floats(f, 22);
  for (std::size_t k = 0; k < f; ++k) {
    const double count = static_cast<double>(std::max<std::int64_t>(rows, 1));
    const double mean = sum[k] / count;
    const double var = std::max(sum_sq[k] / count - mean * mean, 0.0);
    p.mean.push_back(static_cast<float>(mean));
    p.inv_std.push_back(static_cast<float>(1.0 / std::sqrt(var + 1e-5)));
  }
  return p;
}

// Tolerance of a per-column double sum of R exactly representable terms (float products are
// exact in double) added in two different orders: 2 (R + 2) eps_d sum |terms| (Higham 4.4).
std::vector<double> double_sum_bound(const std::vector<double>& abs_sums, std::int64_t rows) {
  std::vector<double> tol(abs_sums.size());
  for (std::size_t k = 0; k < tol.size(); ++k) {
    tol[k] = 2.0 * (static_cast<double>(rows) + 2.0) * kDoubleEps * abs_sums[k];
  }
  return tol;
}

const std::vector<std::int64_t> kBatchNormRows = {0, 1, 203, 5000};  // 5000: 3 row chunks

TEST_F(CudaKernels, BatchNormStatsAndForwardMatchCpu) {
  for (std::int64_t rows : kBatchNormRows) {
    for (std::int64_t f : kWidths) {
      const auto width = static_cast<std::size_t>(f);
      const std::vector<float> x =
          test::random_floats(static_cast<std::size_t>(rows * f), 18, -2.0f, 3.0f);
      std::vector<double> sum(width), sum_sq(width);
      cpu::kernels().batch_norm_stats(sum.data(), sum_sq.data(), x.data(), rows, f);
      // Outputs start as garbage: written, not accumulated (0 when R = 0).
      const cuda::DeviceBuffer d_x = upload(x), d_sum = upload(std::vector<double>(width, 99.0)),
                               d_sum_sq = upload(std::vector<double>(width, 99.0));
      cuda::batch_norm_stats(d_sum.as<double>(), d_sum_sq.as<double>(), d_x.as<float>(), rows, f);
      std::vector<double> abs_sum(width, 0.0);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::size_t k = 0; k < width; ++k) {
          abs_sum[k] += std::abs(x[static_cast<std::size_t>(r) * width + k]);
        }
      }
      EXPECT_TRUE(near_doubles(download<double>(d_sum, width), sum,
                               double_sum_bound(abs_sum, rows)))
          << "sum R " << rows << " F " << f;
      EXPECT_TRUE(near_doubles(download<double>(d_sum_sq, width), sum_sq,
                               double_sum_bound(sum_sq, rows)))  // terms x^2 >= 0
          << "sum_sq R " << rows << " F " << f;

      const BatchNormParams p = batch_norm_params(sum, sum_sq, rows);
      std::vector<float> y(x.size()), x_hat(x.size());
      cpu::kernels().batch_norm_forward(y.data(), x_hat.data(), x.data(), p.mean.data(),
                                        p.inv_std.data(), p.gamma.data(), p.beta.data(), rows, f);
      // In place as the CPU allows: x_hat overwrites x; y in a buffer of its own.
      const cuda::DeviceBuffer d_in_out = upload(x), d_mean = upload(p.mean),
                               d_inv_std = upload(p.inv_std), d_gamma = upload(p.gamma),
                               d_beta = upload(p.beta);
      cuda::DeviceBuffer d_y(x.size() * sizeof(float));
      cuda::batch_norm_forward(d_y.as<float>(), d_in_out.as<float>(), d_in_out.as<float>(),
                               d_mean.as<float>(), d_inv_std.as<float>(), d_gamma.as<float>(),
                               d_beta.as<float>(), rows, f);
      // x_hat = (x - mean) * inv_std: the same two rounded operations on both sides (nothing to
      // fuse), so bit-identical.
      EXPECT_TRUE(test::bitwise_equal(download(d_in_out, x.size()), x_hat, f))
          << "x_hat R " << rows << " F " << f;
      // y = gamma x_hat + beta: either side may fuse it into an FMA, which changes the result
      // by at most 3u (|gamma x_hat| + |beta|).
      std::vector<double> y_tol(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        y_tol[i] = 4.0 * kFloatEps * (std::abs(p.gamma[i % width] * x_hat[i]) +
                                      std::abs(p.beta[i % width]));
      }
      EXPECT_TRUE(test::near_each(download(d_y, x.size()), as_double(y), y_tol, f))
          << "y R " << rows << " F " << f;
    }
  }
}

TEST_F(CudaKernels, BatchNormBackwardStatsAndBackwardMatchCpu) {
  for (std::int64_t rows : kBatchNormRows) {
    for (std::int64_t f : kWidths) {
      const auto width = static_cast<std::size_t>(f);
      const std::vector<float> d_y = test::random_floats(static_cast<std::size_t>(rows * f), 19);
      const std::vector<float> x_hat =
          test::random_floats(static_cast<std::size_t>(rows * f), 20, -3.0f, 3.0f);
      const std::vector<float> gamma = test::random_floats(width, 21, 0.5f, 2.0f);
      const std::vector<float> inv_std = test::random_floats(width, 23, 0.25f, 4.0f);
      std::vector<double> sum_dy(width), sum_dy_xhat(width);
      cpu::kernels().batch_norm_backward_stats(sum_dy.data(), sum_dy_xhat.data(), d_y.data(),
                                               x_hat.data(), rows, f);
      const cuda::DeviceBuffer d_dy = upload(d_y), d_xhat = upload(x_hat),
                               d_sum_dy = upload(std::vector<double>(width, 99.0)),
                               d_sum_dy_xhat = upload(std::vector<double>(width, 99.0));
      cuda::batch_norm_backward_stats(d_sum_dy.as<double>(), d_sum_dy_xhat.as<double>(),
                                      d_dy.as<float>(), d_xhat.as<float>(), rows, f);
      std::vector<double> abs_dy(width, 0.0), abs_dy_xhat(width, 0.0);
      for (std::size_t i = 0; i < d_y.size(); ++i) {
        abs_dy[i % width] += std::abs(d_y[i]);
        abs_dy_xhat[i % width] += std::abs(static_cast<double>(d_y[i]) * x_hat[i]);
      }
      EXPECT_TRUE(near_doubles(download<double>(d_sum_dy, width), sum_dy,
                               double_sum_bound(abs_dy, rows)))
          << "sum_dy R " << rows << " F " << f;
      EXPECT_TRUE(near_doubles(download<double>(d_sum_dy_xhat, width), sum_dy_xhat,
                               double_sum_bound(abs_dy_xhat, rows)))
          << "sum_dy_xhat R " << rows << " F " << f;

      // Both backwards from the CPU's sums (the same input), with a global count larger than R
      // as on one rank of several; in place on the GPU (d_x aliases d_y) as the layers call it.
      const double count = 3.0 * static_cast<double>(rows) + 1.0;
      std::vector<float> d_x(d_y.size());
      cpu::kernels().batch_norm_backward(d_x.data(), d_y.data(), x_hat.data(), gamma.data(),
                                         inv_std.data(), sum_dy.data(), sum_dy_xhat.data(), count,
                                         rows, f);
      const cuda::DeviceBuffer d_grad = upload(d_y), d_gamma = upload(gamma),
                               d_inv_std = upload(inv_std), d_sums_dy = upload(sum_dy),
                               d_sums_dy_xhat = upload(sum_dy_xhat);
      cuda::batch_norm_backward(d_grad.as<float>(), d_grad.as<float>(), d_xhat.as<float>(),
                                d_gamma.as<float>(), d_inv_std.as<float>(),
                                d_sums_dy.as<double>(), d_sums_dy_xhat.as<double>(), count, rows,
                                f);
      // The per-column factors (gamma inv_std and the two means rounded to float) are the same
      // rounded operations on both sides; d_y - mean_dy - x_hat mean_dy_xhat may be fused into
      // an FMA on either side (at most 3u of its absolute parts), then scaled by gamma inv_std.
      std::vector<double> tol(d_y.size());
      for (std::size_t i = 0; i < d_y.size(); ++i) {
        const std::size_t k = i % width;
        const double mean_dy = static_cast<float>(sum_dy[k] / count);
        const double mean_dy_xhat = static_cast<float>(sum_dy_xhat[k] / count);
        tol[i] = 4.0 * kFloatEps * std::abs(static_cast<double>(gamma[k] * inv_std[k])) *
                 (std::abs(d_y[i]) + std::abs(mean_dy) + std::abs(x_hat[i] * mean_dy_xhat));
      }
      EXPECT_TRUE(test::near_each(download(d_grad, d_y.size()), as_double(d_x), tol, f))
          << "d_x R " << rows << " F " << f;
    }
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Adam's update and the double-to-float accumulation of the batch-norm affine gradients. The
// GPU rounds every operation on its own; the CPU build may fuse multiply-adds, which moves a
// result by a few units in the last place: 8 eps of the magnitudes involved bounds both.
TEST_F(CudaKernels, AdamUpdateAndAddDoublesMatchCpu) {
  for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{257},
                         std::int64_t{100003}}) {
    const auto size = static_cast<std::size_t>(n);
    const std::vector<float> p0 = test::values_of(test::random_tensor(1, n, 21));
    const std::vector<float> g = test::values_of(test::random_tensor(1, n, 22));
    std::vector<float> m = test::values_of(test::random_tensor(1, n, 23));
    std::vector<float> v(size), decay(size);
    for (std::size_t i = 0; i < size; ++i) {
      v[i] = std::abs(m[i]) * 0.25f;
      decay[i] = i % 3 == 0 ? 0.0f : 5e-4f;
    }
    AdamStep step;
    step.step_size = 0.01f / (1.0f - 0.9f * 0.9f * 0.9f);
    step.inv_sqrt_bias2 = 1.0f / std::sqrt(1.0f - 0.999f * 0.999f * 0.999f);
    const cuda::DeviceBuffer d_p = upload(p0), d_m = upload(m), d_v = upload(v), d_g = upload(g),
                             d_decay = upload(decay);
    std::vector<float> p = p0;
    adam_update(p, m, v, g, decay, step, Device::cpu());
    cuda::adam_update(d_p.as<float>(), d_m.as<float>(), d_v.as<float>(), d_g.as<float>(),
                      d_decay.as<float>(), step, n);
    const std::vector<float> gp = download(d_p, size), gm = download(d_m, size),
                             gv = download(d_v, size);
    for (std::size_t i = 0; i < size; ++i) {
      ASSERT_NEAR(gm[i], m[i], 8 * kFloatEps * (std::abs(m[i]) + std::abs(g[i]))) << i;
      ASSERT_NEAR(gv[i], v[i], 8 * kFloatEps * (std::abs(v[i]) + g[i] * g[i])) << i;
      ASSERT_NEAR(gp[i], p[i], 8 * kFloatEps * (std::abs(p0[i]) + step.step_size)) << i;
    }
    std::vector<float> out = test::values_of(test::random_tensor(1, n, 24));
    std::vector<double> add(size);
    for (std::size_t i = 0; i < size; ++i) add[i] = 0.1 * static_cast<double>(i) - 3.0;
    const cuda::DeviceBuffer d_out = upload(out), d_add = upload(add);
    add_doubles(out, add, Device::cpu());
    cuda::add_doubles(d_out.as<float>(), d_add.as<double>(), n);
    EXPECT_EQ(download(d_out, size), out) << "n " << n;  // one conversion and one add: exact
  }
}

}  // namespace
}  // namespace tessera
