// SPDX-License-Identifier: Apache-2.0
// SAGEConv (PyG mean aggregator + root weight): forward against a dense reference computed from
// the edge list; transform-first == aggregate-first; every gradient (d_x, d_weight, d_bias,
// d_root_weight) against central finite differences on a small random graph with zero-degree
// nodes and odd widths; skipping d_x; overwrite/accumulate semantics; bf16 aggregation keeps P X
// rounded and differentiates the forward it made.
#include "layers/sage.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Everything one SAGE layer needs, with random contents.
struct Inputs {
  Tensor x, w, w_root;  // (N, F_in), (F_in, F_out) x2
  std::vector<float> b;  // (F_out)
  Tensor r;              // (N, F_out) d_out
  explicit Inputs(const Case& c)
      : x(random_tensor(kNodes, c.f_in, 1)),
        w(random_tensor(c.f_in, c.f_out, 2)),
        w_root(random_tensor(c.f_in, c.f_out, 3)),
        b(random_vector(static_cast<std::size_t>(c.f_out), 4)),
        r(random_tensor(kNodes, c.f_out, 5)) {}
};

class SageTest : public ::testing::TestWithParam<Case> {};

TEST_P(SageTest, ForwardMatchesDenseReference) {
  const Case c = GetParam();
  const test::EdgeList e = test::random_edges(kNodes, 21);
  LocalPropagator prop(mean_normalized(Csr::from_edges(kNodes, e.src, e.dst)));
  Inputs s(c);
  Tensor out;
  SageCache cache;
  sage_forward(out, cache, s.x, s.w, s.b, s.w_root, c.act, prop, 0);

  std::vector<std::vector<std::int64_t>> in(static_cast<std::size_t>(kNodes));
  for (std::size_t i = 0; i < e.src.size(); ++i)
    in[static_cast<std::size_t>(e.dst[i])].push_back(e.src[i]);
  Tensor ref(kNodes, c.f_out);
  for (std::int64_t v = 0; v < kNodes; ++v) {
    const auto& nbrs = in[static_cast<std::size_t>(v)];
    for (std::int64_t j = 0; j < c.f_out; ++j) {
      double sum = s.b[static_cast<std::size_t>(j)];
      for (std::int64_t k = 0; k < c.f_in; ++k) {
        double mean = 0.0;  // zero-degree rows aggregate to 0, as in PyG
        for (std::int64_t u : nbrs) mean += s.x.row<float>(u)[k];
        if (!nbrs.empty()) mean /= static_cast<double>(nbrs.size());
        sum += mean * s.w.row<float>(k)[j] + s.x.row<float>(v)[k] * s.w_root.row<float>(k)[j];
      }
      if (c.act == Activation::Relu) sum = std::max(sum, 0.0);
      ref.row<float>(v)[j] = static_cast<float>(sum);
    }
  }
  // float32 sums of at most ~2 * 9 * 9 terms of magnitude <= 1: rounding below 1e-5.
  expect_close(span_of(out), span_of(ref), 1e-5, "SAGE forward vs dense reference");
}

TEST_P(SageTest, TransformFirstEqualsAggregateFirst) {
  const Case c = GetParam();
  LocalPropagator prop(test::weighted_csr(test::random_edges(kNodes, 22), 5));
  Inputs s(c);
  struct Result {
    Tensor out, d_x, d_w, d_root;
    std::vector<float> d_b;
  };
  auto run = [&](ConvOrder order) {
    Result r;
    SageCache cache;
    sage_forward(r.out, cache, s.x, s.w, s.b, s.w_root, c.act, prop, 0, order);
    EXPECT_EQ(cache.transform_first, order == ConvOrder::TransformFirst);
    r.d_w = Tensor::zeros(c.f_in, c.f_out);
    r.d_root = Tensor::zeros(c.f_in, c.f_out);
    r.d_b.assign(static_cast<std::size_t>(c.f_out), 0.0f);
    sage_backward(&r.d_x, r.d_w, r.d_b, r.d_root, cache, s.r, s.x, r.out, s.w, s.w_root, c.act,
                  prop, 0);
    return r;
  };
  Result tf = run(ConvOrder::TransformFirst), af = run(ConvOrder::AggregateFirst);
  // Same sums in a different association: float32 rounding only.
  expect_close(span_of(tf.out), span_of(af.out), 1e-5, "out");
  expect_close(span_of(tf.d_x), span_of(af.d_x), 1e-5, "d_x");
  expect_close(span_of(tf.d_w), span_of(af.d_w), 1e-5, "d_weight");
  expect_close(span_of(tf.d_root), span_of(af.d_root), 1e-5, "d_root_weight");
  expect_close(tf.d_b, af.d_b, 1e-5, "d_bias");
}

TEST_P(SageTest, GradientsMatchFiniteDifferences) {
  const Case c = GetParam();
  LocalPropagator prop(test::weighted_csr(test::random_edges(kNodes, 23), 6));
  Inputs s(c);  // loss = sum(out * s.r), d_out = s.r
  Tensor out;
  SageCache cache;
  sage_forward(out, cache, s.x, s.w, s.b, s.w_root, c.act, prop, 0);
  Tensor d_x, d_w = Tensor::zeros(c.f_in, c.f_out), d_root = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b(static_cast<std::size_t>(c.f_out), 0.0f);
  sage_backward(&d_x, d_w, d_b, d_root, cache, s.r, s.x, out, s.w, s.w_root, c.act, prop, 0);

  Tensor probe_out;
  SageCache probe_cache;
  auto loss = [&] {
    sage_forward(probe_out, probe_cache, s.x, s.w, s.b, s.w_root, c.act, prop, 0);
    return dot(probe_out, s.r);
  };
  auto pattern = [&] {
    std::vector<bool> on(static_cast<std::size_t>(probe_out.numel()));
    for (std::size_t i = 0; i < on.size(); ++i) on[i] = probe_out.f32()[i] > 0.0f;
    return on;
  };
  // Linear between ReLU kinks: central differences are exact up to float32 rounding of the
  // loss (~1e-7 / step 1e-2); measured <= 3e-5, 3e-4 gives 10x.
  constexpr float kStep = 1e-2f;
  constexpr double kTol = 3e-4;
  expect_gradient("d_x", span_of(s.x), span_of(d_x), loss, kStep, kTol, pattern);
  expect_gradient("d_weight", span_of(s.w), span_of(d_w), loss, kStep, kTol, pattern);
  expect_gradient("d_root_weight", span_of(s.w_root), span_of(d_root), loss, kStep, kTol,
                  pattern);
  expect_gradient("d_bias", s.b, d_b, loss, kStep, kTol, pattern);
}

// bf16 aggregation (--aggregate-dtype bf16), aggregating first: the neighbour branch keeps P X
// rounded to bf16 and reads it so; the root branch reads x as it is. The parameter gradients are
// those of that forward (finite differences; x's are not: rounding is a step function).
TEST_P(SageTest, Bf16AggregationKeepsRoundedSumsAndDifferentiatesThem) {
  const Case c = GetParam();
  LocalPropagator local(test::weighted_csr(test::random_edges(kNodes, 26), 9));
  local.set_operand_dtype(DType::BF16);
  test::RecordingPropagator prop(local);
  Inputs s(c);
  Tensor out;
  SageCache cache;
  sage_forward(out, cache, s.x, s.w, s.b, s.w_root, c.act, prop, 0, ConvOrder::AggregateFirst);
  EXPECT_EQ(prop.forward_dtypes, std::vector<DType>{DType::BF16}) << "x rounded by the layer";
  ASSERT_EQ(cache.mixed.dtype(), DType::BF16);
  check_shape(cache.mixed, kNodes, c.f_in, "kept P X");
  Tensor d_x, d_w = Tensor::zeros(c.f_in, c.f_out), d_root = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b(static_cast<std::size_t>(c.f_out), 0.0f);
  sage_backward(&d_x, d_w, d_b, d_root, cache, s.r, s.x, out, s.w, s.w_root, c.act, prop, 0);
  check_shape(d_x, kNodes, c.f_in, "d_x");

  Tensor probe_out;
  SageCache probe_cache;
  auto loss = [&] {
    sage_forward(probe_out, probe_cache, s.x, s.w, s.b, s.w_root, c.act, prop, 0,
                 ConvOrder::AggregateFirst);
    return dot(probe_out, s.r);
  };
  auto pattern = [&] { return test::positive(probe_out); };
  expect_gradient("d_weight", span_of(s.w), span_of(d_w), loss, 1e-2f, 3e-4, pattern);
  expect_gradient("d_root_weight", span_of(s.w_root), span_of(d_root), loss, 1e-2f, 3e-4, pattern);
  expect_gradient("d_bias", s.b, d_b, loss, 1e-2f, 3e-4, pattern);
}

TEST_P(SageTest, SkippingInputGradientKeepsParameterGradients) {
  const Case c = GetParam();
  LocalPropagator inner(test::weighted_csr(test::random_edges(kNodes, 24), 7));
  test::CountingPropagator prop(inner);
  Inputs s(c);
  Tensor out;
  SageCache cache;
  sage_forward(out, cache, s.x, s.w, s.b, s.w_root, c.act, prop, 2);
  EXPECT_EQ(prop.forward_calls[2], 1);

  Tensor d_x;
  Tensor d_w_full = Tensor::zeros(c.f_in, c.f_out), d_root_full = Tensor::zeros(c.f_in, c.f_out);
  Tensor d_w_skip = Tensor::zeros(c.f_in, c.f_out), d_root_skip = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b_full(static_cast<std::size_t>(c.f_out), 0.0f), d_b_skip = d_b_full;
  sage_backward(&d_x, d_w_full, d_b_full, d_root_full, cache, s.r, s.x, out, s.w, s.w_root,
                c.act, prop, 2);
  const int calls_full = prop.backward_calls[2];
  sage_forward(out, cache, s.x, s.w, s.b, s.w_root, c.act, prop, 2);  // one backward per forward
  sage_backward(nullptr, d_w_skip, d_b_skip, d_root_skip, cache, s.r, s.x, out, s.w, s.w_root,
                c.act, prop, 2);
  EXPECT_EQ(calls_full, 1);
  EXPECT_EQ(prop.backward_calls[2] - calls_full, cache.transform_first ? 1 : 0);
  expect_close(span_of(d_w_skip), span_of(d_w_full), 0.0, "d_weight without d_x");
  expect_close(span_of(d_root_skip), span_of(d_root_full), 0.0, "d_root_weight without d_x");
  expect_close(d_b_skip, d_b_full, 0.0, "d_bias without d_x");
}

TEST_P(SageTest, BackwardOverwritesInputGradientAndAccumulatesParameters) {
  const Case c = GetParam();
  LocalPropagator prop(test::weighted_csr(test::random_edges(kNodes, 25), 8));
  Inputs s(c);
  Tensor out;
  SageCache cache;
  sage_forward(out, cache, s.x, s.w, s.b, s.w_root, c.act, prop, 0);
  Tensor d_x_once, d_w_once = Tensor::zeros(c.f_in, c.f_out);
  Tensor d_root_once = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b_once(static_cast<std::size_t>(c.f_out), 0.0f);
  sage_backward(&d_x_once, d_w_once, d_b_once, d_root_once, cache, s.r, s.x, out, s.w, s.w_root,
                c.act, prop, 0);

  Tensor d_x = random_tensor(kNodes, c.f_in, 99, 1e6f, 2e6f);  // stale contents
  Tensor d_w = Tensor::zeros(c.f_in, c.f_out), d_root = Tensor::zeros(c.f_in, c.f_out);
  std::vector<float> d_b(static_cast<std::size_t>(c.f_out), 0.0f);
  for (int i = 0; i < 2; ++i) {
    sage_forward(out, cache, s.x, s.w, s.b, s.w_root, c.act, prop, 0);
    sage_backward(&d_x, d_w, d_b, d_root, cache, s.r, s.x, out, s.w, s.w_root, c.act, prop, 0);
  }
  EXPECT_THROW(sage_backward(&d_x, d_w, d_b, d_root, cache, s.r, s.x, out, s.w, s.w_root, c.act,
                             prop, 0),
               Error);  // the cache was consumed
  expect_close(span_of(d_x), span_of(d_x_once), 0.0, "d_x overwritten");
  for (std::int64_t i = 0; i < d_w_once.numel(); ++i) {
    d_w_once.f32()[i] *= 2.0f;
    d_root_once.f32()[i] *= 2.0f;
  }
  for (float& v : d_b_once) v *= 2.0f;
  // The second add rounds once: relative 1e-6.
  expect_close(span_of(d_w), span_of(d_w_once), 1e-6, "d_weight accumulated twice");
  expect_close(span_of(d_root), span_of(d_root_once), 1e-6, "d_root_weight accumulated twice");
  expect_close(d_b, d_b_once, 1e-6, "d_bias accumulated twice");
}

INSTANTIATE_TEST_SUITE_P(Widths, SageTest,
                         ::testing::Values(Case{7, 5, Activation::None},  // transform-first
                                           Case{3, 9, Activation::None},  // aggregate-first
                                           Case{7, 5, Activation::Relu},
                                           Case{3, 9, Activation::Relu},
                                           Case{1, 1, Activation::None},
                                           Case{4, 1, Activation::Relu}),
                         case_name);

}  // namespace
}  // namespace tessera
