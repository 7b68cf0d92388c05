// SPDX-License-Identifier: Apache-2.0
// Adam update over the flat parameter buffer.
#include "engine/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/kernels.h"

namespace tessera {
Adam::Adam(const AdamConfig& config, std::span<const ParamInfo> layout, std::int64_t num_params,
           Device device)
    : config_(config), device_(device) {
  TESSERA_CHECK(config.lr > 0.0f, InvalidArgument, "learning rate must be > 0, got ", config.lr);
  TESSERA_CHECK(config.weight_decay >= 0.0f, InvalidArgument,
                "weight decay must be >= 0, got ", config.weight_decay);
  Tensor decay = Tensor::zeros(1, num_params);
  for (const ParamInfo& info : layout) {
    TESSERA_CHECK(info.offset >= 0 && info.offset + info.rows * info.cols <= num_params, Internal,
                  "parameter ", info.name, " lies outside the buffer");
    if (!info.decay) continue;
    const bool dense = info.dense && config.dense_weight_decay >= 0.0f;
    std::fill_n(decay.f32() + info.offset, info.rows * info.cols,
                dense ? config.dense_weight_decay : config.weight_decay);
  }
  decay_ = decay.to(device);
  m_ = Tensor::zeros(1, num_params, DType::F32, device);
  v_ = Tensor::zeros(1, num_params, DType::F32, device);
}

void Adam::step(std::span<float> params, std::span<const float> grads) {
  const auto n = static_cast<std::size_t>(m_.numel());
  TESSERA_CHECK(params.size() == n && grads.size() == n, InvalidArgument, "Adam over ", n,
                " parameters got ", params.size(), " values and ", grads.size(), " gradients");
  ++steps_;
  const double t = static_cast<double>(steps_);
  const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta1), t));
  const float bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta2), t));
  AdamStep step;
  step.beta1 = config_.beta1;
  step.beta2 = config_.beta2;
  step.eps = config_.eps;
  step.step_size = config_.lr / bias1;
  step.inv_sqrt_bias2 = 1.0f / std::sqrt(bias2);
  adam_update(params, m_.f32_span(), v_.f32_span(), grads, decay_.f32_span(), step, device_);
}

void Adam::restore(std::int64_t steps, std::span<const float> m, std::span<const float> v) {
  const auto n = static_cast<std::size_t>(m_.numel());
  TESSERA_CHECK(steps >= 0 && m.size() == n && v.size() == n, InvalidArgument,
                "Adam::restore: ", steps, " steps, moments of ", m.size(), " and ", v.size(),
                " values for ", n, " parameters");
  steps_ = steps;
  backend(device_).copy(m_.raw(), m.data(), m_.bytes());
  backend(device_).copy(v_.raw(), v.data(), v_.bytes());
}

std::vector<float> Adam::first_moment() const { return host_f32(m_); }
std::vector<float> Adam::second_moment() const { return host_f32(v_); }

}  // namespace tessera
