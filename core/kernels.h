// SPDX-License-Identifier: Apache-2.0
// Every compute kernel of Tessera, declared once. Each has one definition per device
// (core/cpu/*.cc; CUDA twins to come in core/cuda/) and is dispatched on the
// device of its output tensor in kernels.cc, the only place that looks at Device.
// Convention: outputs first, then inputs, then sizes/options. Shapes are checked and a
// mismatch throws InvalidArgument. Shape letters: R rows, F feature width, C classes, T tasks.
#pragma once

#include <cstdint>
#include <span>

#include "core/csr.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace tessera {

// Elu: x > 0 ? x : exp(x) - 1 (GAT's hidden activation).
enum class Activation { None, Relu, Elu };

// ---- sparse ----
// out (R, F) = A (R, C) * x (C, F). Rows run in parallel (OpenMP); each row's sum is in a fixed
// order, so results do not depend on the thread count. x is f32, or on the CPU bf16 (reduced-
// precision storage: half the bytes to gather, summed in f32 exactly as its f32 widening would
// be).
void spmm(Tensor& out, const CsrView& a, const Tensor& x);
// As spmm, but only the listed rows of out are written (others untouched). Used to aggregate
// inner rows while halo rows are still in flight, then boundary rows.
void spmm_rows(Tensor& out, const CsrView& a, const Tensor& x, std::span<const NodeId> rows);

// y (R, F, bf16) = x (R, F, f32) rounded to the nearest bf16 (ties to even; NaN stays NaN). CPU.
void to_bf16(Tensor& y, const Tensor& x);
// y (R, F, f32) = x (R, F, bf16) widened (exact). CPU.
void to_f32(Tensor& y, const Tensor& x);

// ---- dense ----
// c = alpha * op(a) * op(b) + beta * c, op = transpose when the flag is set (cblas_sgemm). On the
// CPU a may be bf16 (features stored in bf16): its rows are widened exactly a block at a time
// (transposed, with b not transposed), so the products are those of its f32 widening, summed
// in a block order of their own. Or c may be bf16 on the CPU (a in f32, not transposed, beta 0):
// its rows are made in f32 a block at a time and rounded, the f32 products rounded bit for bit.
void gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
          float alpha = 1.0f, float beta = 0.0f);
// y += alpha * x (same shape).
void axpy(Tensor& y, float alpha, const Tensor& x);
// out[f] (+)= sum_r x[r, f]; out has x.cols() entries.
void column_sums(std::span<float> out, const Tensor& x, bool accumulate);

// ---- elementwise, fused ----
// y = act(x + bias) with bias broadcast over rows (bias may be empty: no bias). y may alias x.
void bias_act_forward(Tensor& y, const Tensor& x, std::span<const float> bias, Activation act);
// d_x = d_y * act'(y) where y is the forward output, or for ReLU the output's signs
// (positive_bits, u8; CPU); d_bias (+)= column sums of d_x when d_bias is not empty
// (accumulated). d_x may alias d_y.
void bias_act_backward(Tensor& d_x, std::span<float> d_bias, const Tensor& d_y, const Tensor& y,
                       Activation act);

// The signs of a ReLU's output, all its backward needs, for a layer that frees the output once
// the next layer has read it (layers/model.cc): bits (R, ceil(F / 8)) u8, bit k % 8 of byte
// k / 8 of row r set when y[r, k] > 0. bias_act_backward takes them as y. CPU.
void positive_bits(Tensor& bits, const Tensor& y);

// Inverted dropout: y[r, f] = keep ? x[r, f] / (1 - p) : 0, keep = rng.uniform(global_ids[r], f)
// >= p. The mask is a pure function of (rng key, global id, f): nothing is stored, backward
// recomputes it. p in [0, 1); y may alias x. global_ids has x.rows() entries. dropout_forward's x
// may be bf16 on the CPU (widened exactly; y is f32).
void dropout_forward(Tensor& y, const Tensor& x, float p, const CounterRng& rng,
                     std::span<const GlobalId> global_ids);
void dropout_backward(Tensor& d_x, const Tensor& d_y, float p, const CounterRng& rng,
                      std::span<const GlobalId> global_ids);

// ---- attention (GAT, Velickovic et al. 2018) ----
// H heads of width D over a pattern A (R, C) whose values are ignored: zs (C, H·D + H) holds
// each column's transformed row z (H·D) and its per-head source terms s_src (H); s_dst (R, H)
// the rows' destination terms. Edge j = (r, c) of head h scores e = LeakyReLU(s_dst[r, h] +
// s_src[c, h], slope); alpha = softmax of e over the row's edges; out[r, h] = Σ_j alpha z[c, h].
// The attention dropout keeps head h of edge (r, c) when rng.uniform(column_ids[r],
// column_ids[c] · H + h) >= p (a pure function of the global ids: nothing stored).
struct AttentionDropout {
  float p = 0.0f;                        // in [0, 1); 0: none
  const CounterRng* rng = nullptr;       // needed when p > 0
  std::span<const GlobalId> column_ids;  // (C) global ids of A's columns; the first R the rows'
};
// zs (R, H·D + H) = [z, s_src] and s_dst (R, H) from z (R, H·D) and att (2·H·D: the source
// then the destination attention vectors).
void gat_project(Tensor& zs, Tensor& s_dst, const Tensor& z, std::span<const float> att, int heads);
// Its backward: d_z (R, H·D) = d_zs[:, :HD] + the source and destination terms' gradients
// through att (written); d_att (2·H·D) += their gradients (accumulated).
void gat_project_backward(Tensor& d_z, std::span<float> d_att, const Tensor& d_zs,
                          const Tensor& d_s_dst, const Tensor& zs, std::span<const float> att,
                          int heads);
// For the listed rows (distinct): alpha (nnz, H) on their edges (before dropout) and out rows
// (R, H·D) = Σ_j dropout(alpha) z; a row without edges gets 0. Other rows untouched.
void gat_attention_forward(Tensor& out, Tensor& alpha, const CsrView& a, const Tensor& zs,
                           const Tensor& s_dst, int heads, float slope,
                           const AttentionDropout& dropout, std::span<const NodeId> rows);
// Backward of the listed rows from d_out (R, H·D): d_score (nnz, H) the gradient of each edge's
// score before LeakyReLU, d_s_dst (R, H) = its sum over the row; alpha is overwritten with the
// dropped-out weights the forward aggregated with (for gat_attention_transpose).
void gat_attention_backward(Tensor& d_score, Tensor& d_s_dst, Tensor& alpha, const CsrView& a,
                            const Tensor& d_out, const Tensor& zs, const Tensor& s_dst, int heads,
                            float slope, const AttentionDropout& dropout,
                            std::span<const NodeId> rows);
// The gradients of the source rows: at (C, R) = A^T, edge_of[k] the position in A of at's
// entry k. For the listed rows c of at: d_zs[c] = [Σ_k alpha[edge_of[k], h] d_out[r_k, h],
// Σ_k d_score[edge_of[k], h]] (written; other rows untouched).
void gat_attention_transpose(Tensor& d_zs, const CsrView& at, std::span<const EdgeOffset> edge_of,
                             const Tensor& alpha, const Tensor& d_score, const Tensor& d_out,
                             int heads, std::span<const NodeId> rows);

// ---- row movement (halo gather/scatter) ----
// out[i] = x[rows[i]] for every i; out is (rows.size(), F). x may be bf16 on the CPU (widened).
void gather_rows(Tensor& out, const Tensor& x, std::span<const NodeId> rows);
// out[rows[i]] = x[i] for every i (rows distinct; other rows of out untouched).
void scatter_rows(Tensor& out, const Tensor& x, std::span<const NodeId> rows);
// out[rows[i]] += x[i] for every i (rows may repeat; applied in order).
void scatter_add_rows(Tensor& out, const Tensor& x, std::span<const NodeId> rows);

// ---- losses ----
// logp (R, C) = log_softmax(logits) row by row (max-subtracted, stable).
void log_softmax_forward(Tensor& logp, const Tensor& logits);
// Sum over the listed rows of -logp[r, labels[r]] (double accumulation). labels has R entries.
double nll_loss_sum(const Tensor& logp, std::span<const std::int64_t> labels,
                    std::span<const NodeId> rows);
// Gradient of scale * sum_rows NLL(log_softmax(logits)) w.r.t. logits:
// d_logits[r] = scale * (exp(logp[r]) - onehot(labels[r])) for listed rows, 0 for all others.
void log_softmax_nll_backward(Tensor& d_logits, const Tensor& logp,
                              std::span<const std::int64_t> labels, std::span<const NodeId> rows,
                              float scale);
// Multi-label: sum over listed rows and tasks with a non-NaN target of
// BCE(sigmoid(logits[r, t]), targets[r, t]) computed stably from the logits; targets (R, T).
// Returns the sum; *count receives the number of (row, task) terms.
double sigmoid_bce_loss_sum(const Tensor& logits, const Tensor& targets,
                            std::span<const NodeId> rows, std::int64_t* count);
// d_logits[r, t] = scale * (sigmoid(logits[r, t]) - targets[r, t]) on listed rows and non-NaN
// targets, 0 elsewhere.
void sigmoid_bce_backward(Tensor& d_logits, const Tensor& logits, const Tensor& targets,
                          std::span<const NodeId> rows, float scale);

// ---- batch normalisation over rows (nodes) ----
// sum[f] and sum_sq[f] over all rows of x (double), written (not accumulated); each has F
// entries. Distributed callers all-reduce these before batch_norm_forward.
void batch_norm_stats(std::span<double> sum, std::span<double> sum_sq, const Tensor& x);
// x_hat = (x - mean) * inv_std; y = gamma * x_hat + beta (per column).
void batch_norm_forward(Tensor& y, Tensor& x_hat, const Tensor& x, std::span<const float> mean,
                        std::span<const float> inv_std, std::span<const float> gamma,
                        std::span<const float> beta);
// Per-column sums needed by the backward: sum_dy[f] = sum_r d_y, sum_dy_xhat[f] = sum_r d_y*x_hat
// (double, written). Distributed callers all-reduce these.
void batch_norm_backward_stats(std::span<double> sum_dy, std::span<double> sum_dy_xhat,
                               const Tensor& d_y, const Tensor& x_hat);
// d_x = gamma * inv_std * (d_y - mean_dy - x_hat * mean_dy_xhat), with mean_* = sum_* / count
// (count = the number of rows over all ranks).
void batch_norm_backward(Tensor& d_x, const Tensor& d_y, const Tensor& x_hat,
                         std::span<const float> gamma, std::span<const float> inv_std,
                         std::span<const double> sum_dy, std::span<const double> sum_dy_xhat,
                         double count);

// ---- parameters and optimizer (flat buffers: spans on `device`) ----
// out[i] += float(values[i]) for every i; on a GPU `values` may also be host memory.
void add_doubles(std::span<float> out, std::span<const double> values, Device device);
// The coefficients of Adam step t: step_size = lr / (1 - beta1^t), inv_sqrt_bias2 =
// 1 / sqrt(1 - beta2^t).
struct AdamStep {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float step_size = 0.0f;
  float inv_sqrt_bias2 = 1.0f;
};
// One Adam update (torch.optim.Adam; the L2 decay decay[i] * params[i] is added to the gradient)
// of every entry: m and v are the moments; all five spans have the same length.
void adam_update(std::span<float> params, std::span<float> m, std::span<float> v,
                 std::span<const float> grads, std::span<const float> decay, const AdamStep& step,
                 Device device);

// Number of threads kernels use (the OpenMP team; GEMM splits its work over the same team and
// keeps OpenBLAS single-threaded, so two thread pools never compete). threads <= 0: unchanged.
void set_num_threads(int threads);
int num_threads();

}  // namespace tessera
