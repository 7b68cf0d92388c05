// Every CUDA kernel against its CPU twin (the CPU kernels are the specification) on random
// inputs over the project's widths (1, 7, 8, 9, 31, 32, 33, 257, ...), with empty, one-row and
// zero-degree-row inputs. Exact where the GPU does the same float operations (bias + ReLU,
// dropout, row moves, distinct scatter-add); elsewhere within a stated rounding bound. Every
// test skips, printing the reason, when no GPU is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <span>
#include <vector>

#include "engine/core/cuda/allocator.h"
#include "engine/core/cuda/check.h"
#include "engine/core/cuda/kernels_cuda.h"
#include "engine/core/cuda/runtime.h"
#include "engine/core/kernels.h"
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
      for (Activation act : {Activation::None, Activation::Relu}) {
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
          EXPECT_TRUE(test::bitwise_equal(download(d_y, static_cast<std::size_t>(rows * f)),
                                          test::values_of(y), f));
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
          EXPECT_TRUE(test::bitwise_equal(download(d_grad, static_cast<std::size_t>(rows * f)),
                                          test::values_of(d_in), f));
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

}  // namespace
}  // namespace tessera
