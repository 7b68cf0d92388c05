// SPDX-License-Identifier: Apache-2.0
// Adam with L2 weight decay (torch.optim.Adam semantics: the decay term is added to the
// gradient before the moment updates) over one flat parameter buffer. Decay applies only to the
// ranges marked `decay` in the model's ParamInfo (convolution weights, not biases or batch norm),
// at its own rate for those also marked `dense`.
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
  // The rate of the dense layers' weights (ParamInfo::dense, GCNII's first and last layers, as
  // the GCNII paper decays them apart from the convolutions); < 0: weight_decay.
  float dense_weight_decay = -1.0f;
};

class Adam {
 public:
  // The optimizer state lives on `device`, where the parameters and gradients it updates live.
  Adam(const AdamConfig& config, std::span<const ParamInfo> layout, std::int64_t num_params,
       Device device = Device::cpu());

  // One update of params from grads (both num_params long, on the optimizer's device).
  void step(std::span<float> params, std::span<const float> grads);

  std::int64_t steps() const { return steps_; }
  Device device() const { return device_; }
  // Puts the optimizer where a checkpoint left it: the step count (bias correction) and the
  // moments, (num_params) host values each.
  void restore(std::int64_t steps, std::span<const float> m, std::span<const float> v);
  // Host copies of the moments, for checkpoints: (num_params) each.
  std::vector<float> first_moment() const;
  std::vector<float> second_moment() const;

 private:
  AdamConfig config_;
  Device device_;
  Tensor decay_;  // (1, num_params) weight decay factor per entry: wd or 0
  Tensor m_;      // (1, num_params)
  Tensor v_;      // (1, num_params)
  std::int64_t steps_ = 0;
};

}  // namespace tessera
