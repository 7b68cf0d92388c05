// SPDX-License-Identifier: Apache-2.0
// The CPU backend of every kernel in core/kernels.h, on raw host pointers with explicit
// sizes (outputs first, then inputs, then sizes). kernels.cc checks shapes, dtypes, devices and
// index ranges before calling here, so these functions trust their arguments. Reductions use a
// fixed block order, so every result is independent of the thread count.
#pragma once

#include <cstdint>
#include <span>

#include "core/csr.h"
#include "core/kernels.h"
#include "core/rng.h"

namespace tessera::cpu {

// ---- sparse (spmm.cc) ----
// out (R, F) = A (R, C) * x (C, F); out must not alias x.
void spmm(float* out, const CsrView& a, const float* x, std::int64_t f);
// Only the listed rows of out (distinct) are written.
void spmm_rows(float* out, const CsrView& a, const float* x, std::span<const NodeId> rows,
               std::int64_t f);

// ---- dense (dense.cc) ----
// c (M, N) = alpha * op(a) (M, K) * op(b) (K, N) + beta * c, row-major, no aliasing.
void gemm(float* c, const float* a, bool trans_a, const float* b, bool trans_b, float alpha,
          float beta, std::int64_t m, std::int64_t n, std::int64_t k);
// y (n) += alpha * x (n).
void axpy(float* y, float alpha, const float* x, std::int64_t n);
// out (F) (+)= column sums of x (R, F).
void column_sums(float* out, const float* x, bool accumulate, std::int64_t r, std::int64_t f);
// OpenMP and BLAS thread counts.
void add_doubles(float* out, const double* values, std::int64_t n);
void adam_update(float* params, float* m, float* v, const float* grads, const float* decay,
                 const AdamStep& step, std::int64_t n);
void set_num_threads(int threads);
int num_threads();

// ---- elementwise (elementwise.cc); y may alias x, d_x may alias d_y ----
// y (R, F) = act(x (R, F) + bias (F)); bias may be null.
void bias_act_forward(float* y, const float* x, const float* bias, Activation act, std::int64_t r,
                      std::int64_t f);
// d_x (R, F) = d_y * act'(y); d_bias (F) += column sums of d_x when d_bias is not null.
void bias_act_backward(float* d_x, float* d_bias, const float* d_y, const float* y, Activation act,
                       std::int64_t r, std::int64_t f);
// y (R, F) = keep ? x / (1 - p) : 0 with keep = rng.uniform(global_ids[r], f) >= p.
void dropout_forward(float* y, const float* x, float p, const CounterRng& rng,
                     const GlobalId* global_ids, std::int64_t r, std::int64_t f);
void dropout_backward(float* d_x, const float* d_y, float p, const CounterRng& rng,
                      const GlobalId* global_ids, std::int64_t r, std::int64_t f);

// ---- row movement (rows.cc); out never aliases x ----
// out (rows.size(), F) = x[rows].
void gather_rows(float* out, const float* x, std::span<const NodeId> rows, std::int64_t f);
// out[rows[i]] += x[i] in list order (rows may repeat).
void scatter_add_rows(float* out, const float* x, std::span<const NodeId> rows, std::int64_t f);

// ---- losses (loss.cc) ----
// logp (R, C) = log_softmax(logits) row by row; logp may alias logits.
void log_softmax_forward(float* logp, const float* logits, std::int64_t r, std::int64_t c);
double nll_loss_sum(const float* logp, const std::int64_t* labels, std::span<const NodeId> rows,
                    std::int64_t c);
// d_logits (R, C): written on every row (listed rows distinct); must not alias logp.
void log_softmax_nll_backward(float* d_logits, const float* logp, const std::int64_t* labels,
                              std::span<const NodeId> rows, float scale, std::int64_t r,
                              std::int64_t c);
// *count = number of (row, task) terms with a non-NaN target; logits, targets (R, T).
double sigmoid_bce_loss_sum(std::int64_t* count, const float* logits, const float* targets,
                            std::span<const NodeId> rows, std::int64_t t);
void sigmoid_bce_backward(float* d_logits, const float* logits, const float* targets,
                          std::span<const NodeId> rows, float scale, std::int64_t r,
                          std::int64_t t);

// ---- batch normalisation (batch_norm.cc); y and x_hat may alias x, d_x may alias d_y ----
void batch_norm_stats(double* sum, double* sum_sq, const float* x, std::int64_t r, std::int64_t f);
void batch_norm_forward(float* y, float* x_hat, const float* x, const float* mean,
                        const float* inv_std, const float* gamma, const float* beta, std::int64_t r,
                        std::int64_t f);
void batch_norm_backward_stats(double* sum_dy, double* sum_dy_xhat, const float* d_y,
                               const float* x_hat, std::int64_t r, std::int64_t f);
void batch_norm_backward(float* d_x, const float* d_y, const float* x_hat, const float* gamma,
                         const float* inv_std, const double* sum_dy, const double* sum_dy_xhat,
                         double count, std::int64_t r, std::int64_t f);

}  // namespace tessera::cpu
