// Adam with L2 weight decay (torch.optim.Adam semantics: the decay term is added to the
// gradient before the moment updates) over one flat parameter buffer. Decay applies only to the
// ranges marked `decay` in the model's ParamInfo (convolution weights, not biases or batch norm).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "layers/model.h"

namespace tessera {

struct AdamConfig {
  float lr = 0.01f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

class Adam {
 public:
  Adam(const AdamConfig& config, std::span<const ParamInfo> layout, std::int64_t num_params);

  // One update of params from grads (both num_params long).
  void step(std::span<float> params, std::span<const float> grads);

  std::int64_t steps() const { return steps_; }
  // Puts the optimizer where a checkpoint left it: the step count (bias correction) and the
  // moments, (num_params) each.
  void restore(std::int64_t steps, std::span<const float> m, std::span<const float> v);
  // Moments, for checkpoints: (num_params) each.
  std::span<float> first_moment() { return m_; }
  std::span<float> second_moment() { return v_; }

 private:
  AdamConfig config_;
  std::vector<float> decay_;  // (num_params) weight decay factor per entry: wd or 0
  std::vector<float> m_;
  std::vector<float> v_;
  std::int64_t steps_ = 0;
};

}  // namespace tessera
