// SPDX-License-Identifier: Apache-2.0
// GCNConv: forward against a dense Â = D^-1/2 (A + I) D^-1/2 built by hand from the definition;
// transform-first == aggregate-first; every gradient (d_x, d_weight, d_bias) against central
// finite differences on a small random graph with a zero-degree node and odd widths; skipping
// d_x; backward overwrites d_x and accumulates parameter gradients; bf16 aggregation keeps P X
// rounded, hands the propagator rows it rounded itself, and differentiates the forward it made.
#include "layers/gcn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "layers/propagator.h"
#include "tests/layers/layer_test_util.h"

namespace tessera {
namespace {

using test::dot;
using test::expect_close;
using test::expect_gradient;
using test::random_tensor;
using test::random_vector;
using test::span_of;

using test::Case;
using test::case_name;
using test::kNodes;

class GcnTest : public ::testing::TestWithParam<Case> {};

// A GCN layer's inputs, with random contents: x, weight, bias and r (d_out; loss = sum(out * r)).
struct Inputs {
  Tensor x, w;
  std::vector<float> b;
  Tensor r;
  explicit Inputs(const Case& c)
      : x(random_tensor(kNodes, c.f_in, 1)),
        w(random_tensor(c.f_in, c.f_out, 2)),
        b(random_vector(static_cast<std::size_t>(c.f_out), 3)),
        r(random_tensor(kNodes, c.f_out, 4)) {}
};

// Dense Â from the edge list: A symmetrised, plus I, degrees of A + I, 1/sqrt(deg_v deg_u).
std::vector<double> dense_gcn_matrix(const test::EdgeList& e) {
  const auto n = static_cast<std::size_t>(e.num_nodes);
  std::vector<double> a(n * n, 0.0);
  for (std::size_t i = 0; i < e.src.size(); ++i) {
    const auto u = static_cast<std::size_t>(e.src[i]), v = static_cast<std::size_t>(e.dst[i]);
    a[v * n + u] = a[u * n + v] = 1.0;
  }
  for (std::size_t v = 0; v < n; ++v) a[v * n + v] = 1.0;
  std::vector<double> deg(n, 0.0);
  for (std::size_t v = 0; v < n; ++v)
    for (std::size_t u = 0; u < n; ++u) deg[v] += a[v * n + u];
  for (std::size_t v = 0; v < n; ++v)
    for (std::size_t u = 0; u < n; ++u) a[v * n + u] /= std::sqrt(deg[v] * deg[u]);
  return a;
}

TEST_P(GcnTest, ForwardMatchesDenseReference) {
  const Case c = GetParam();
  const test::EdgeList e = test::random_edges(kNodes, 11);
  LocalPropagator prop(
      gcn_normalized(Csr::from_edges(kNodes, e.src, e.dst).symmetrize().with_self_loops()));
  Tensor x = random_tensor(kNodes, c.f_in, 1);
  Tensor w = random_tensor(c.f_in, c.f_out, 2);
  std::vector<float> b = random_vector(static_cast<std::size_t>(c.f_out), 3);

  Tensor out;
  GcnCache cache;
  gcn_forward(out, cache, x, w, b, c.act, prop, 0);

  const std::vector<double> a = dense_gcn_matrix(e);
  const auto n = static_cast<std::size_t>(kNodes);
  Tensor ref(kNodes, c.f_out);
  for (std::size_t v = 0; v < n; ++v)
    for (std::int64_t j = 0; j < c.f_out; ++j) {
      double sum = b[static_cast<std::size_t>(j)];
      for (std::size_t u = 0; u < n; ++u)
        for (std::int64_t k = 0; k < c.f_in; ++k)
          sum += a[v * n + u] * x.row<float>(static_cast<std::int64_t>(u))[k] *
                 w.row<float>(k)[j];
      if (c.act == Activation::Relu) sum = std::max(sum, 0.0);
      ref.row<float>(static_cast<std::int64_t>(v))[j] = static_cast<float>(sum);
    }
  // float32 sums of at most 9 * 9 products of magnitude <= 1: rounding stays below 1e-5.
  expect_close(span_of(out), span_of(ref), 1e-5, "GCN forward vs dense reference");
}

TEST_P(GcnTest, TransformFirstEqualsAggregateFirst) {
  const Case c = GetParam();
  LocalPropagator prop(test::weighted_csr(test::random_edges(kNodes, 12), 5));
  Tensor x = random_tensor(kNodes, c.f_in, 1);
  Tensor w = random_tensor(c.f_in, c.f_out, 2);
  std::vector<float> b = random_vector(static_cast<std::size_t>(c.f_out), 3);
  Tensor d_out = random_tensor(kNodes, c.f_out, 4);

  struct Result {
    Tensor out, d_x, d_w;
    std::vector<float> d_b;
  };
  auto run = [&](ConvOrder order) {
    Result r;
    GcnCache cache;
    gcn_forward(r.out, cache, x, w, b, c.act, prop, 0, order);
    EXPECT_EQ(cache.transform_first, order == ConvOrder::TransformFirst);
    r.d_w = Tensor::zeros(c.f_in, c.f_out);
    r.d_b.assign(static_cast<std::size_t>(c.f_out), 0.0f);
    gcn_backward(&r.d_x, r.d_w, r.d_b, cache, d_out, x, r.out, w, c.act, prop, 0);
    return r;
  };
  Result tf = run(ConvOrder::TransformFirst), af = run(ConvOrder::AggregateFirst);
  // Same sums in a different association: float32 rounding only.
  expect_close(span_of(tf.out), span_of(af.out), 1e-5, "out");
  expect_close(span_of(tf.d_x), span_of(af.d_x), 1e-5, "d_x");
  expect_close(span_of(tf.d_w), span_of(af.d_w), 1e-5, "d_weight");
  expect_close(tf.d_b, af.d_b, 1e-5, "d_bias");
}

TEST_P(GcnTest, GradientsMatchFiniteDifferences) {
  const Case c = GetParam();
  LocalPropagator prop(test::weighted_csr(test::random_edges(kNodes, 13), 6));
  Inputs in(c);
  Tensor &x = in.x, &w = in.w, &r = in.r;
  std::vector<float>& b = in.b;

  Tensor out;
  GcnCache cache;
  gcn_forward(out, cache, x, w, b, c.act, prop, 0);
  Tensor d_x, d_w = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b(static_cast<std::size_t>(c.f_out), 0.0f);
  gcn_backward(&d_x, d_w, d_b, cache, r, x, out, w, c.act, prop, 0);

  Tensor probe_out;
  GcnCache probe_cache;
  auto loss = [&] {
    gcn_forward(probe_out, probe_cache, x, w, b, c.act, prop, 0);
    return dot(probe_out, r);
  };
  auto pattern = [&] {
    std::vector<bool> on(static_cast<std::size_t>(probe_out.numel()));
    for (std::size_t i = 0; i < on.size(); ++i) on[i] = probe_out.f32()[i] > 0.0f;
    return on;
  };
  // The loss is linear in each input between ReLU kinks, so central differences are exact up
  // to float32 rounding of the loss (~1e-7 / step 1e-2); measured <= 3e-5, 3e-4 gives 10x.
  constexpr float kStep = 1e-2f;
  constexpr double kTol = 3e-4;
  expect_gradient("d_x", span_of(x), span_of(d_x), loss, kStep, kTol, pattern);
  expect_gradient("d_weight", span_of(w), span_of(d_w), loss, kStep, kTol, pattern);
  expect_gradient("d_bias", b, d_b, loss, kStep, kTol, pattern);
}

TEST_P(GcnTest, SkippingInputGradientKeepsParameterGradients) {
  const Case c = GetParam();
  LocalPropagator inner(test::weighted_csr(test::random_edges(kNodes, 14), 7));
  test::CountingPropagator prop(inner);
  Tensor x = random_tensor(kNodes, c.f_in, 1);
  Tensor w = random_tensor(c.f_in, c.f_out, 2);
  std::vector<float> b = random_vector(static_cast<std::size_t>(c.f_out), 3);
  Tensor d_out = random_tensor(kNodes, c.f_out, 4);

  Tensor out;
  GcnCache cache;
  gcn_forward(out, cache, x, w, b, c.act, prop, 3);
  EXPECT_EQ(prop.forward_calls[3], 1);  // the layer tag reaches the propagator

  Tensor d_x, d_w_full = Tensor::zeros(c.f_in, c.f_out), d_w_skip = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b_full(static_cast<std::size_t>(c.f_out), 0.0f), d_b_skip = d_b_full;
  gcn_backward(&d_x, d_w_full, d_b_full, cache, d_out, x, out, w, c.act, prop, 3);
  const int calls_full = prop.backward_calls[3];
  gcn_forward(out, cache, x, w, b, c.act, prop, 3);  // one backward per forward
  gcn_backward(nullptr, d_w_skip, d_b_skip, cache, d_out, x, out, w, c.act, prop, 3);
  const int calls_skip = prop.backward_calls[3] - calls_full;
  EXPECT_EQ(calls_full, 1);
  // Aggregate-first needs the propagator only for d_x; transform-first needs it for d_weight.
  EXPECT_EQ(calls_skip, cache.transform_first ? 1 : 0);
  expect_close(span_of(d_w_skip), span_of(d_w_full), 0.0, "d_weight without d_x");
  expect_close(d_b_skip, d_b_full, 0.0, "d_bias without d_x");
}

TEST_P(GcnTest, BackwardOverwritesInputGradientAndAccumulatesParameters) {
  const Case c = GetParam();
  LocalPropagator prop(test::weighted_csr(test::random_edges(kNodes, 15), 8));
  Tensor x = random_tensor(kNodes, c.f_in, 1);
  Tensor w = random_tensor(c.f_in, c.f_out, 2);
  std::vector<float> b = random_vector(static_cast<std::size_t>(c.f_out), 3);
  Tensor d_out = random_tensor(kNodes, c.f_out, 4);
  Tensor out;
  GcnCache cache;
  gcn_forward(out, cache, x, w, b, c.act, prop, 0);

  Tensor d_x_once, d_w_once = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b_once(static_cast<std::size_t>(c.f_out), 0.0f);
  gcn_backward(&d_x_once, d_w_once, d_b_once, cache, d_out, x, out, w, c.act, prop, 0);

  EXPECT_THROW(gcn_backward(&d_x_once, d_w_once, d_b_once, cache, d_out, x, out, w, c.act, prop,
                            0),
               Error);  // the cache was consumed

  Tensor d_x = random_tensor(kNodes, c.f_in, 99, 1e6f, 2e6f);  // stale contents
  Tensor d_w = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b(static_cast<std::size_t>(c.f_out), 0.0f);
  for (int i = 0; i < 2; ++i) {
    gcn_forward(out, cache, x, w, b, c.act, prop, 0);
    gcn_backward(&d_x, d_w, d_b, cache, d_out, x, out, w, c.act, prop, 0);
  }
  expect_close(span_of(d_x), span_of(d_x_once), 0.0, "d_x overwritten");
  for (std::int64_t i = 0; i < d_w_once.numel(); ++i) d_w_once.f32()[i] *= 2.0f;
  for (float& v : d_b_once) v *= 2.0f;
  // Doubling is exact in float, but the second add rounds: relative 1e-6.
  expect_close(span_of(d_w), span_of(d_w_once), 1e-6, "d_weight accumulated twice");
  expect_close(d_b, d_b_once, 1e-6, "d_bias accumulated twice");
}

// bf16 aggregation (--aggregate-dtype bf16), aggregating first in either order of widths: the
// layer keeps P X rounded to bf16 until its backward, and its GEMM reads those rounded sums, so
// the weight and bias gradients are exactly those of the forward (finite differences); d_x is
// P^T over the rounded rows of d_pre W^T.
TEST_P(GcnTest, Bf16AggregationKeepsRoundedSumsAndDifferentiatesThem) {
  const Case c = GetParam();
  const test::EdgeList edges = test::random_edges(kNodes, 16);
  LocalPropagator exact(test::weighted_csr(edges, 9)), local(test::weighted_csr(edges, 9));
  local.set_operand_dtype(DType::BF16);
  test::RecordingPropagator prop(local);
  Inputs in(c);
  Tensor &x = in.x, &w = in.w, &r = in.r;
  std::vector<float>& b = in.b;

  Tensor out;
  GcnCache cache;
  gcn_forward(out, cache, x, w, b, c.act, prop, 0, ConvOrder::AggregateFirst);
  // x rounded by the layer into its kept tensor: the propagator rounds nothing of its own.
  EXPECT_EQ(prop.forward_dtypes, std::vector<DType>{DType::BF16});
  ASSERT_EQ(cache.mixed.dtype(), DType::BF16);
  check_shape(cache.mixed, kNodes, c.f_in, "kept P X");
  Tensor kept(kNodes, c.f_in), px;
  to_f32(kept, cache.mixed);
  exact.forward(px, test::bf16_rounded(x), 0);
  expect_close(span_of(kept), span_of(test::bf16_rounded(px)), 0.0,
               "kept P X: P round(x), rounded");
  Tensor ref(kNodes, c.f_out);
  gemm(ref, kept, false, w, false);
  bias_act_forward(ref, ref, b, c.act);
  expect_close(span_of(out), span_of(ref), 1e-6, "out = act(round(P X) W + b)");

  Tensor d_x, d_w = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b(static_cast<std::size_t>(c.f_out), 0.0f);
  gcn_backward(&d_x, d_w, d_b, cache, r, x, out, w, c.act, prop, 0);
  EXPECT_EQ(prop.backward_dtypes, std::vector<DType>{DType::BF16}) << "d(P X) handed over in bf16";
  Tensor d_pre(kNodes, c.f_out), d_px(kNodes, c.f_in), d_x_ref;
  for (std::int64_t i = 0; i < r.numel(); ++i)
    d_pre.f32()[i] = c.act == Activation::Relu && out.f32()[i] <= 0.0f ? 0.0f : r.f32()[i];
  gemm(d_px, d_pre, false, w, true);
  exact.backward(d_x_ref, test::bf16_rounded(d_px), 0);
  expect_close(span_of(d_x), span_of(d_x_ref), 1e-6, "d_x = P^T round(d_pre W^T)");

  Tensor probe_out;
  GcnCache probe_cache;
  auto loss = [&] {
    gcn_forward(probe_out, probe_cache, x, w, b, c.act, prop, 0, ConvOrder::AggregateFirst);
    return dot(probe_out, r);
  };
  auto pattern = [&] { return test::positive(probe_out); };
  expect_gradient("d_weight", span_of(w), span_of(d_w), loss, 1e-2f, 3e-4, pattern);
  expect_gradient("d_bias", b, d_b, loss, 1e-2f, 3e-4, pattern);
}

INSTANTIATE_TEST_SUITE_P(Widths, GcnTest,
                         ::testing::Values(Case{7, 5, Activation::None},  // transform-first
                                           Case{3, 9, Activation::None},  // aggregate-first
                                           Case{7, 5, Activation::Relu},
                                           Case{3, 9, Activation::Relu},
                                           Case{1, 1, Activation::None},
                                           Case{4, 1, Activation::Relu}),
                         case_name);

TEST(GcnOrder, AutoTransformsFirstOnlyWhenNarrowing) {
  EXPECT_TRUE(is_transform_first(ConvOrder::Auto, 7, 5));
  EXPECT_FALSE(is_transform_first(ConvOrder::Auto, 5, 5));
  EXPECT_FALSE(is_transform_first(ConvOrder::Auto, 3, 9));
  EXPECT_TRUE(is_transform_first(ConvOrder::TransformFirst, 3, 9));
  EXPECT_FALSE(is_transform_first(ConvOrder::AggregateFirst, 7, 5));
}

TEST(GcnShapes, MismatchedWeightIsRefused) {
  LocalPropagator prop(test::weighted_csr(test::random_edges(kNodes, 16), 9));
  Tensor x = random_tensor(kNodes, 4, 1), w = random_tensor(5, 3, 2), out;
  GcnCache cache;
  EXPECT_THROW(gcn_forward(out, cache, x, w, {}, Activation::None, prop, 0), Error);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The trainer declares the GCN operator of a symmetric graph symmetric, so that backward reuses
// A instead of holding A^T: the adjoint must then be exactly what an explicit transpose gives.
TEST(LocalPropagator, SymmetricOperatorBackwardEqualsTransposed) {
  const test::EdgeList e = test::random_edges(kNodes, 31);
  const Csr a =
      gcn_normalized(Csr::from_edges(kNodes, e.src, e.dst).symmetrize().with_self_loops());
  LocalPropagator general(a), symmetric(a, MatrixSymmetry::Symmetric);
  Tensor d_out = random_tensor(kNodes, 5, 4);
  Tensor d_general, d_symmetric;
  general.backward(d_general, d_out, 0);
  symmetric.backward(d_symmetric, d_out, 0);
  ASSERT_TRUE(d_general.same_shape(d_symmetric));
  for (std::int64_t i = 0; i < d_general.numel(); ++i)
    EXPECT_EQ(d_general.f32()[i], d_symmetric.f32()[i]) << "entry " << i;
}

}  // namespace
}  // namespace tessera
