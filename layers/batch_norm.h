// SPDX-License-Identifier: Apache-2.0
// BatchNorm1d over nodes, as torch.nn.BatchNorm1d: training normalises with the batch statistics
// of ALL rows over all ranks (sums all-reduced, divided by the global row count; biased variance)
// and updates the running statistics (momentum 0.1, unbiased variance); eval uses the running
// statistics. batch_norm1d_forward fills a BatchNormCache that batch_norm1d_backward consumes.
// Backward OVERWRITES d_x and ACCUMULATES d_gamma and d_beta. Shapes: N rows, F features.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace tessera {

inline constexpr float kBatchNormEps = 1e-5f;
inline constexpr float kBatchNormMomentum = 0.1f;

// Sums a buffer of doubles over all ranks in place; empty = one process (AllReduceSum of
// layers/model.h).
using BatchNormAllReduce = std::function<void(std::span<double>)>;

struct BatchNormCache {
  // Filled by batch_norm1d_forward, read by batch_norm1d_backward.
  bool training = false;
  Tensor x_hat;                // (N, F) (x - mean) * inv_std
  std::vector<float> mean;     // (F) statistics used: the batch's (training) or running (eval)
  std::vector<float> inv_std;  // (F) 1 / sqrt(var + eps)
  // Workspace: [sum | sum_sq] in forward, [sum_dy | sum_dy_xhat] in backward; one all-reduce.
  std::vector<double> sums;    // (2F)
};

// y (N, F) = gamma * (x - mean) * inv_std + beta, x (N, F), gamma and beta (F).
// running_mean, running_var (F): read in eval, updated in training.
// global_rows: rows over all ranks (N on one process); training needs global_rows >= 2.
// all_reduce (may be empty) is called once in training, with the 2F local sums.
void batch_norm1d_forward(Tensor& y, BatchNormCache& cache, std::span<float> running_mean,
                          std::span<float> running_var, const Tensor& x,
                          std::span<const float> gamma, std::span<const float> beta,
                          bool training, std::int64_t global_rows,
                          const BatchNormAllReduce& all_reduce);

// d_y (N, F): gradient w.r.t. y of the last forward (which must have been a training forward).
// d_x (N, F): overwritten (resized). d_gamma, d_beta (F): accumulated with this rank's LOCAL
// sums only, like every other parameter gradient (the trainer all-reduces gradients); the
// input gradient uses the all-reduced sums (all_reduce called once, with 2F values).
void batch_norm1d_backward(Tensor& d_x, std::span<float> d_gamma, std::span<float> d_beta,
                           BatchNormCache& cache, const Tensor& d_y, std::span<const float> gamma,
                           std::int64_t global_rows, const BatchNormAllReduce& all_reduce);

}  // namespace tessera
