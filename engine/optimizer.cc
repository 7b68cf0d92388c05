// Adam update over the flat parameter buffer.
#include "engine/optimizer.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace tessera {

Adam::Adam(const AdamConfig& config, std::span<const ParamInfo> layout, std::int64_t num_params)
    : config_(config),
      decay_(static_cast<std::size_t>(num_params), 0.0f),
      m_(static_cast<std::size_t>(num_params), 0.0f),
      v_(static_cast<std::size_t>(num_params), 0.0f) {
  TESSERA_CHECK(config.lr > 0.0f, InvalidArgument, "learning rate must be > 0, got ", config.lr);
  TESSERA_CHECK(config.weight_decay >= 0.0f, InvalidArgument,
                "weight decay must be >= 0, got ", config.weight_decay);
  for (const ParamInfo& info : layout) {
    TESSERA_CHECK(info.offset >= 0 && info.offset + info.rows * info.cols <= num_params, Internal,
                  "parameter ", info.name, " lies outside the buffer");
    if (!info.decay) continue;
    for (std::int64_t i = 0; i < info.rows * info.cols; ++i) decay_[info.offset + i] = config.weight_decay;
  }
}

void Adam::step(std::span<float> params, std::span<const float> grads) {
  TESSERA_CHECK(params.size() == m_.size() && grads.size() == m_.size(), InvalidArgument,
                "Adam over ", m_.size(), " parameters got ", params.size(), " values and ",
                grads.size(), " gradients");
  ++steps_;
  const double t = static_cast<double>(steps_);
  const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta1), t));
  const float bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta2), t));
  const float step_size = config_.lr / bias1;
  const float inv_sqrt_bias2 = 1.0f / std::sqrt(bias2);
  const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const std::int64_t n = static_cast<std::int64_t>(params.size());
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    float g = grads[i] + decay_[i] * params[i];
    m_[i] = b1 * m_[i] + (1.0f - b1) * g;
    v_[i] = b2 * v_[i] + (1.0f - b2) * g * g;
    params[i] -= step_size * m_[i] / (std::sqrt(v_[i]) * inv_sqrt_bias2 + eps);
  }
}

void Adam::restore(std::int64_t steps, std::span<const float> m, std::span<const float> v) {
  TESSERA_CHECK(steps >= 0 && m.size() == m_.size() && v.size() == v_.size(), InvalidArgument,
                "Adam::restore: ", steps, " steps, moments of ", m.size(), " and ", v.size(),
                " values for ", m_.size(), " parameters");
  steps_ = steps;
  std::copy(m.begin(), m.end(), m_.begin());
  std::copy(v.begin(), v.end(), v_.begin());
}

}  // namespace tessera
