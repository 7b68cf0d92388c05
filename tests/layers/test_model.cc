// Model: whole-model gradients against central finite differences of a log_softmax + NLL loss
// (GCN and SAGE, with and without batch norm, dropout off and on at a fixed epoch), parameter
// layout and initialisation, determinism from the seed, no input-feature gradient, eval mode,
// moves, and buffers reused between epochs.
#include "layers/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/core/kernels.h"
#include "tests/layers/layer_test_util.h"

namespace tessera {
namespace {

using test::expect_close;
using test::expect_gradient;
using test::random_tensor;
using test::span_of;

constexpr std::int64_t kNodes = 12;  // node 4 has no edge at all

// A small symmetric graph with both propagators, identity global ids, and a labelled task.
struct Graph {
  LocalPropagator gcn, mean;
  std::vector<GlobalId> global_ids;
  GraphContext context;
  std::vector<std::int64_t> labels;  // (N)
  std::vector<NodeId> train_rows;    // rows that enter the loss

  Graph(std::int64_t classes, std::uint32_t seed)
      : gcn(gcn_normalized(symmetric(seed).with_self_loops())),
        mean(mean_normalized(symmetric(seed))) {
    for (GlobalId v = 0; v < kNodes; ++v) {
      global_ids.push_back(100 + 7 * v);  // not the local ids: masks follow global ids
      labels.push_back(v % classes);
      if (v % 3 != 2) train_rows.push_back(static_cast<NodeId>(v));
    }
    context.gcn = &gcn;
    context.mean = &mean;
    context.global_ids = global_ids;
    context.global_num_nodes = kNodes;
  }
  static Csr symmetric(std::uint32_t seed) {
    const test::EdgeList e = test::random_edges(kNodes, seed);
    return Csr::from_edges(kNodes, e.src, e.dst).symmetrize();
  }
};

ModelConfig make_config(ModelKind kind, std::int64_t in, std::int64_t hidden, std::int64_t out,
                        int layers, bool batch_norm, float dropout = 0.0f,
                        float input_dropout = 0.0f) {
  ModelConfig c;
  c.kind = kind;
  c.in_channels = in;
  c.hidden_channels = hidden;
  c.out_channels = out;
  c.num_layers = layers;
  c.batch_norm = batch_norm;
  c.dropout = dropout;
  c.input_dropout = input_dropout;
  c.seed = 42;
  return c;
}

// Sum of NLL(log_softmax(logits)) over the training rows; fills d_logits when asked.
double training_loss(Model& model, Graph& g, const Tensor& x, std::int64_t epoch,
                     Tensor* d_logits = nullptr) {
  Tensor logits, logp;
  model.forward(logits, x, g.context, /*training=*/true, epoch);
  logp.resize(logits.rows(), logits.cols());
  log_softmax_forward(logp, logits);
  if (d_logits) {
    d_logits->resize(logits.rows(), logits.cols());
    log_softmax_nll_backward(*d_logits, logp, g.labels, g.train_rows, 1.0f);
  }
  return nll_loss_sum(logp, g.labels, g.train_rows);
}

struct GradCase {
  std::string name;
  ModelConfig config;
};

class ModelGradient : public ::testing::TestWithParam<GradCase> {};

TEST_P(ModelGradient, MatchesFiniteDifferences) {
  const ModelConfig& config = GetParam().config;
  Graph g(config.out_channels, 31);
  Tensor x = random_tensor(kNodes, config.in_channels, 1);
  Model model(config);
  // Random biases and BN affine parameters (instead of 0 and 1): with a zero bias, a node whose
  // input row is all zero (dropout) has a pre-activation exactly on the ReLU kink.
  std::uint32_t seed = 100;
  for (const ParamInfo& info : model.param_info()) {
    if (info.decay) continue;
    std::vector<float> v = test::random_vector(static_cast<std::size_t>(info.cols), ++seed);
    const bool gamma = info.name.starts_with("bns.") && info.name.ends_with(".weight");
    const float base = gamma ? 1.0f : 0.0f;
    for (std::size_t j = 0; j < v.size(); ++j)
      model.params()[static_cast<std::size_t>(info.offset) + j] = base + 0.5f * v[j];
  }
  constexpr std::int64_t kEpoch = 3;  // fixes the dropout masks

  Tensor d_logits;
  training_loss(model, g, x, kEpoch, &d_logits);
  model.zero_grad();
  model.backward(d_logits, g.context);
  const std::vector<float> analytic(model.grads().begin(), model.grads().end());

  auto loss = [&] { return training_loss(model, g, x, kEpoch); };
  auto pattern = [&] {  // ReLU on/off of every hidden layer
    std::vector<bool> on;
    for (int l = 0; l + 1 < config.num_layers; ++l) {
      const Tensor& h = model.embeddings(l);
      for (std::int64_t i = 0; i < h.numel(); ++i) on.push_back(h.f32()[i] > 0.0f);
    }
    return on;
  };
  // float32 forward through up to 3 layers, BN and log_softmax (smooth between ReLU kinks):
  // step 5e-3 leaves truncation ~1e-5 and loss rounding ~1e-6 / 1e-2; measured <= 2.5e-4,
  // 2e-3 gives 8x.
  for (const ParamInfo& info : model.param_info()) {
    const auto offset = static_cast<std::size_t>(info.offset);
    const auto size = static_cast<std::size_t>(info.rows * info.cols);
    expect_gradient(info.name, model.params().subspan(offset, size),
                    std::span<const float>(analytic).subspan(offset, size), loss, 5e-3f, 2e-3,
                    pattern);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, ModelGradient,
    ::testing::Values(
        GradCase{"gcn", make_config(ModelKind::Gcn, 7, 5, 3, 3, false)},
        GradCase{"gcn_bn", make_config(ModelKind::Gcn, 7, 5, 3, 3, true)},
        GradCase{"sage", make_config(ModelKind::Sage, 7, 5, 3, 3, false)},
        GradCase{"sage_bn", make_config(ModelKind::Sage, 7, 5, 3, 3, true)},
        GradCase{"gcn_widening", make_config(ModelKind::Gcn, 3, 9, 4, 2, false)},
        GradCase{"sage_widening_bn", make_config(ModelKind::Sage, 3, 9, 4, 2, true)},
        GradCase{"gcn_one_layer", make_config(ModelKind::Gcn, 7, 5, 3, 1, false, 0.5f, 0.3f)},
        GradCase{"gcn_dropout", make_config(ModelKind::Gcn, 7, 5, 3, 3, false, 0.5f, 0.3f)},
        GradCase{"sage_bn_dropout", make_config(ModelKind::Sage, 7, 5, 3, 3, true, 0.5f, 0.3f)}),
    [](const ::testing::TestParamInfo<GradCase>& p) { return p.param.name; });

TEST(Model, ParamInfoCoversTheBufferExactly) {
  for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage})
    for (bool bn : {false, true}) {
      Model model(make_config(kind, 7, 5, 3, 3, bn));
      SCOPED_TRACE(to_string(kind) + (bn ? " with batch norm" : ""));
      std::int64_t next = 0;
      std::vector<std::string> names;
      for (const ParamInfo& info : model.param_info()) {
        EXPECT_EQ(info.offset, next) << info.name;
        next += info.rows * info.cols;
        names.push_back(info.name);
        const bool is_weight = info.name.ends_with(".weight") && info.name.starts_with("convs.");
        const bool is_root = info.name.ends_with(".root_weight");
        EXPECT_EQ(info.decay, is_weight || is_root) << info.name;
      }
      EXPECT_EQ(next, static_cast<std::int64_t>(model.params().size()));
      EXPECT_EQ(model.params().size(), model.grads().size());
      std::vector<std::string> expected;
      for (int l = 0; l < 3; ++l) {
        const std::string p = "convs." + std::to_string(l) + ".";
        expected.push_back(p + "weight");
        expected.push_back(p + "bias");
        if (kind == ModelKind::Sage) expected.push_back(p + "root_weight");
      }
      for (int l = 0; bn && l < 2; ++l) {
        expected.push_back("bns." + std::to_string(l) + ".weight");
        expected.push_back("bns." + std::to_string(l) + ".bias");
      }
      EXPECT_EQ(names, expected);

      std::int64_t buffer_next = 0;
      for (const ParamInfo& info : model.buffer_info()) {
        EXPECT_EQ(info.offset, buffer_next) << info.name;
        buffer_next += info.rows * info.cols;
      }
      EXPECT_EQ(buffer_next, static_cast<std::int64_t>(model.buffers().size()));
      EXPECT_EQ(model.buffer_info().size(), bn ? 4u : 0u);
    }
}

TEST(Model, InitialisationFollowsTheConvention) {
  const Model model(make_config(ModelKind::Sage, 7, 5, 3, 3, true));
  for (const ParamInfo& info : model.param_info()) {
    std::span<const float> p =
        model.params().subspan(static_cast<std::size_t>(info.offset),
                               static_cast<std::size_t>(info.rows * info.cols));
    if (info.decay) {  // Glorot uniform: within the bound, not constant
      const float bound = std::sqrt(6.0f / static_cast<float>(info.rows + info.cols));
      for (float v : p) EXPECT_LE(std::abs(v), bound) << info.name;
      EXPECT_NE(*std::min_element(p.begin(), p.end()), *std::max_element(p.begin(), p.end()));
    } else {
      const float expected = info.name.starts_with("bns.") && info.name.ends_with(".weight");
      for (float v : p) EXPECT_EQ(v, expected) << info.name;
    }
  }
  const std::span<const float> buffers = model.buffers();
  for (const ParamInfo& info : model.buffer_info())
    for (std::int64_t j = 0; j < info.cols; ++j)
      EXPECT_EQ(buffers[static_cast<std::size_t>(info.offset + j)],
                info.name.ends_with("running_var") ? 1.0f : 0.0f);
}

TEST(Model, SameSeedGivesIdenticalParamsAndLogits) {
  Graph g(3, 32);
  Tensor x = random_tensor(kNodes, 7, 1);
  const ModelConfig config = make_config(ModelKind::Gcn, 7, 5, 3, 3, true, 0.5f, 0.2f);
  Model a(config), b(config);
  ASSERT_TRUE(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
  Tensor logits_a, logits_b;
  a.forward(logits_a, x, g.context, true, 5);
  b.forward(logits_b, x, g.context, true, 5);
  expect_close(span_of(logits_a), span_of(logits_b), 0.0, "logits of two models, same seed");

  ModelConfig other = config;
  other.seed = 43;
  Model c(other);
  EXPECT_FALSE(std::equal(a.params().begin(), a.params().end(), c.params().begin()));
  // A different epoch draws different dropout masks.
  Tensor logits_other_epoch;
  a.forward(logits_other_epoch, x, g.context, true, 6);
  EXPECT_FALSE(std::equal(logits_a.f32(), logits_a.f32() + logits_a.numel(),
                          logits_other_epoch.f32()));
}

TEST(Model, EvalIgnoresDropoutAndEpoch) {
  Graph g(3, 33);
  Tensor x = random_tensor(kNodes, 7, 1);
  Model model(make_config(ModelKind::Sage, 7, 5, 3, 3, true, 0.5f, 0.2f));
  Tensor logits_1, logits_2;
  model.forward(logits_1, x, g.context, false, 1);
  model.forward(logits_2, x, g.context, false, 2);
  expect_close(span_of(logits_1), span_of(logits_2), 0.0, "eval logits at two epochs");
  Tensor d_logits = random_tensor(kNodes, 3, 2);
  EXPECT_THROW(model.backward(d_logits, g.context), Error);  // needs a training forward
}

TEST(Model, BackwardSkipsTheInputFeatureGradient) {
  Graph g(4, 34);
  test::CountingPropagator counting(g.gcn);
  g.context.gcn = &counting;
  Tensor x = random_tensor(kNodes, 3, 1);
  // Layer 0 (3 -> 9) aggregates first: its backward needs the propagator only for d_x.
  // Layer 1 (9 -> 4) transforms first: one propagator backward for d_weight and d_x.
  Model model(make_config(ModelKind::Gcn, 3, 9, 4, 2, false));
  Tensor d_logits;
  training_loss(model, g, x, 0, &d_logits);
  model.backward(d_logits, g.context);
  EXPECT_EQ(counting.forward_calls[0], 1);
  EXPECT_EQ(counting.forward_calls[1], 1);
  EXPECT_EQ(counting.backward_calls[0], 0);
  EXPECT_EQ(counting.backward_calls[1], 1);
}

TEST(Model, EmbeddingsAreActivatedAndBuffersAreReused) {
  Graph g(3, 35);
  Tensor x = random_tensor(kNodes, 7, 1);
  Model model(make_config(ModelKind::Gcn, 7, 5, 3, 3, true, 0.5f, 0.2f));
  Tensor logits, d_logits = random_tensor(kNodes, 3, 2);
  model.forward(logits, x, g.context, true, 0);
  model.backward(d_logits, g.context);
  std::vector<const void*> storage;
  for (int l = 0; l < 3; ++l) storage.push_back(model.embeddings(l).raw());
  const void* logits_storage = logits.raw();

  model.forward(logits, x, g.context, true, 1);
  model.backward(d_logits, g.context);
  EXPECT_THROW(model.backward(d_logits, g.context), Error);  // one backward per forward
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(model.embeddings(l).raw(), storage[static_cast<std::size_t>(l)]) << l;
    const Tensor& h = model.embeddings(l);
    EXPECT_EQ(h.cols(), l < 2 ? 5 : 3);
    if (l < 2) {
      for (std::int64_t i = 0; i < h.numel(); ++i) EXPECT_GE(h.f32()[i], 0.0f) << "ReLU";
    }
  }
  EXPECT_EQ(logits.raw(), logits_storage);
  expect_close(span_of(model.embeddings(2)), span_of(logits), 0.0, "last embeddings = logits");
}

TEST(Model, MovedModelKeepsWorking) {
  Graph g(3, 36);
  Tensor x = random_tensor(kNodes, 7, 1);
  const ModelConfig config = make_config(ModelKind::Sage, 7, 5, 3, 2, true, 0.5f);
  Model original(config);
  Tensor before;
  original.forward(before, x, g.context, true, 4);
  Model moved(std::move(original));
  Model assigned(make_config(ModelKind::Gcn, 7, 5, 3, 2, false));
  assigned = std::move(moved);
  Tensor d_logits = random_tensor(kNodes, 3, 2);
  assigned.backward(d_logits, g.context);  // the forward state travelled with the moves
  Tensor after;
  assigned.forward(after, x, g.context, true, 4);
  expect_close(span_of(after), span_of(before), 0.0, "logits after two moves");
  EXPECT_EQ(assigned.config().kind, ModelKind::Sage);
}

TEST(Model, RefusesBadConfigAndContext) {
  EXPECT_THROW(Model(make_config(ModelKind::Gcn, 7, 5, 3, 0, false)), Error);
  EXPECT_THROW(Model(make_config(ModelKind::Gcn, 7, 5, 3, 2, false, 1.0f)), Error);
  EXPECT_EQ(parse_model_kind("sage"), ModelKind::Sage);
  EXPECT_EQ(to_string(parse_model_kind("gcn")), "gcn");
  EXPECT_THROW(parse_model_kind("gat"), Error);

  Graph g(3, 37);
  Tensor x = random_tensor(kNodes, 7, 1), logits;
  Model sage(make_config(ModelKind::Sage, 7, 5, 3, 2, false));
  g.context.mean = nullptr;
  EXPECT_THROW(sage.forward(logits, x, g.context, false, 0), Error);
  Model gcn(make_config(ModelKind::Gcn, 6, 5, 3, 2, false));
  EXPECT_THROW(gcn.forward(logits, x, g.context, false, 0), Error);  // 7 features, not 6
}

}  // namespace
}  // namespace tessera
