// SPDX-License-Identifier: Apache-2.0
// Adam against a double-precision reference of torch.optim.Adam's update, with weight decay
// applied only where the layout says so.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "engine/optimizer.h"

namespace tessera {
namespace {

TEST(Adam, MatchesReferenceUpdate) {
  const AdamConfig config{.lr = 0.05f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                          .weight_decay = 0.1f};
  std::vector<ParamInfo> layout{{"w", 0, 2, 2, true}, {"b", 4, 1, 2, false}};
  std::vector<float> params{0.5f, -1.0f, 2.0f, 0.0f, 0.3f, -0.7f};
  std::vector<double> ref(params.begin(), params.end()), m(6, 0.0), v(6, 0.0);
  Adam adam(config, layout, 6);
  for (int t = 1; t <= 5; ++t) {
    std::vector<float> grads(6);
    for (int i = 0; i < 6; ++i) grads[i] = std::sin(1.0f + i + 0.3f * t);
    adam.step(params, grads);
    for (int i = 0; i < 6; ++i) {
      double g = grads[i] + (i < 4 ? 0.1 * ref[i] : 0.0);
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      double m_hat = m[i] / (1 - std::pow(0.9, t)), v_hat = v[i] / (1 - std::pow(0.999, t));
      ref[i] -= 0.05 * m_hat / (std::sqrt(v_hat) + 1e-8);
    }
  }
  // float32 arithmetic over 5 steps of size ~lr: 1e-5 absolute is ample.
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(params[i], ref[i], 1e-5) << "parameter " << i;
  EXPECT_EQ(adam.steps(), 5);
}

// A dense layer's weights decay at dense_weight_decay, the others at weight_decay; without a
// dense rate (< 0) they all take weight_decay. One step from zero moments moves every entry by
// about lr * sign(g + wd * p): a weight whose gradient is 0 then shows which rate it got.
TEST(Adam, DenseWeightsTakeTheirOwnRate) {
  const std::vector<ParamInfo> layout{{"conv", 0, 1, 2, true, false},
                                      {"dense", 2, 1, 2, true, true},
                                      {"bias", 4, 1, 1, false, true}};
  const std::vector<float> grads(5, 0.0f);
  for (float dense_rate : {-1.0f, 0.0f, 0.5f}) {
    std::vector<float> params{1.0f, -1.0f, 1.0f, -1.0f, 1.0f};
    Adam adam(AdamConfig{.lr = 0.1f, .weight_decay = 0.2f, .dense_weight_decay = dense_rate},
              layout, 5);
    adam.step(params, grads);
    SCOPED_TRACE(dense_rate);
    EXPECT_NEAR(params[0], 0.9f, 1e-6);  // decayed: the step follows +p
    EXPECT_NEAR(params[1], -0.9f, 1e-6);
    const float dense_step = dense_rate == 0.0f ? 0.0f : 0.1f;  // < 0: the conv rate
    EXPECT_NEAR(params[2], 1.0f - dense_step, 1e-6);
    EXPECT_NEAR(params[3], -1.0f + dense_step, 1e-6);
    EXPECT_EQ(params[4], 1.0f);  // not decayed, whatever `dense` says
  }
}

TEST(Adam, RejectsBadConfigAndSizes) {
  std::vector<ParamInfo> layout{{"w", 0, 1, 2, true}};
  EXPECT_THROW(Adam(AdamConfig{.lr = 0.0f}, layout, 2), Error);
  EXPECT_THROW(Adam(AdamConfig{.weight_decay = -1.0f}, layout, 2), Error);
  EXPECT_THROW(Adam(AdamConfig{}, layout, 1), Error);  // layout outside the buffer
  Adam adam(AdamConfig{}, layout, 2);
  std::vector<float> params(2), grads(3);
  EXPECT_THROW(adam.step(params, grads), Error);
}

// A restored optimizer (step count and moments, as a checkpoint holds them) continues exactly as
// the one it was saved from.
TEST(Adam, RestoredContinuesBitForBit) {
  std::vector<ParamInfo> layout{{"w", 0, 1, 3, true}};
  const AdamConfig config{.lr = 0.02f, .weight_decay = 0.01f};
  std::vector<float> params{0.1f, -0.2f, 0.3f}, grads{0.5f, -0.25f, 1.0f};
  Adam original(config, layout, 3);
  for (int t = 0; t < 4; ++t) original.step(params, grads);
  Adam restored(config, layout, 3);
  restored.restore(original.steps(), original.first_moment(), original.second_moment());
  EXPECT_EQ(restored.steps(), 4);
  std::vector<float> a = params, b = params;
  original.step(a, grads);
  restored.step(b, grads);
  EXPECT_EQ(a, b);
  EXPECT_THROW(restored.restore(1, std::vector<float>(2), std::vector<float>(3)), Error);
}

}  // namespace
}  // namespace tessera
