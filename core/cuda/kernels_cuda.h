// SPDX-License-Identifier: Apache-2.0
// The CUDA backend of the kernels in core/kernels.h: the same names and argument order as
// core/cpu/kernels_cpu.h (outputs first, then inputs, then sizes), on device pointers,
// queued on the current device's compute stream (asynchronous unless stated). Index lists
// (rows, labels, global ids) are device arrays here; the caller validated them on the host.
// Files match the CPU backend's: spmm.cc, dense.cc, elementwise.cu, rows.cu, loss.cu,
// batch_norm.cu, attention.cu.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>

#include "core/csr.h"
#include "core/cuda/allocator.h"
#include "core/kernels.h"
#include "core/rng.h"

namespace tessera::cuda {

// ---- sparse (spmm.cc) ----
// A CSR matrix resident on the GPU, uploaded once, with its cuSPARSE descriptor and, per feature
// width, the SpMM work buffer: both created on first use and reused every epoch (cuSPARSE's
// generic SpMM, CSR_ALG2, row-major dense operands). Indices travel as 32-bit when nnz < 2^31,
// else everything is widened to 64-bit (cuSPARSE wants one index type for offsets and columns).
// Missing values (an unweighted pattern) are uploaded as ones.
class CudaCsr {
 public:
  // Uploads `a` (all rows).
  explicit CudaCsr(const CsrView& a);
  // Uploads only the listed rows of `a`, in list order (row i of this matrix = row rows[i] of a);
  // spmm_rows writes its result back to those rows.
  CudaCsr(const CsrView& a, std::span<const NodeId> rows);
  ~CudaCsr();
  CudaCsr(const CudaCsr&) = delete;
  CudaCsr& operator=(const CudaCsr&) = delete;

  std::int64_t num_rows() const { return num_rows_; }
  std::int64_t num_cols() const { return num_cols_; }
  EdgeOffset nnz() const { return nnz_; }
  // Device array of the rows of the source matrix (row-subset matrices only; else null).
  const NodeId* source_rows() const { return source_rows_.as<NodeId>(); }
  // Bytes of the uploaded indptr, indices and values (for bandwidth reports).
  std::size_t matrix_bytes() const;

  // out (R, F) = A x (C, F) on the compute stream.
  void multiply(float* out, const float* x, std::int64_t f) const;

 private:
  void upload(const CsrView& a, std::span<const NodeId> rows, bool subset);

  struct Plan;  // per-width dense descriptors and work buffer
  std::int64_t num_rows_ = 0;
  std::int64_t num_cols_ = 0;
  EdgeOffset nnz_ = 0;
  bool wide_indices_ = false;
  DeviceBuffer indptr_, indices_, values_, source_rows_;
  void* descriptor_ = nullptr;  // cusparseSpMatDescr_t
  mutable std::map<std::int64_t, std::unique_ptr<Plan>> plans_;
};

// out (R, F) = A (R, C) * x (C, F); out must not alias x.
void spmm(float* out, const CudaCsr& a, const float* x, std::int64_t f);
// Rows source_rows() of out = A_sub * x (A_sub from the row-subset constructor); other rows of
// out untouched. `scratch` holds the compact result (grown as needed).
void spmm_rows(float* out, const CudaCsr& a_sub, const float* x, std::int64_t f,
               DeviceBuffer& scratch);

// ---- dense (dense.cc) ----
// c (M, N) = alpha * op(a) (M, K) * op(b) (K, N) + beta * c, row-major, through cuBLAS SGEMM
// (full fp32, no TF32). The layers use X W (false, false), X^T dY (true, false) and dY W^T
// (false, true).
void gemm(float* c, const float* a, bool trans_a, const float* b, bool trans_b, float alpha,
          float beta, std::int64_t m, std::int64_t n, std::int64_t k);
// y (n) += alpha * x (n).
void axpy(float* y, float alpha, const float* x, std::int64_t n);
// out (F) (+)= column sums of x (R, F), summed in double in a fixed order (deterministic).
void column_sums(float* out, const float* x, bool accumulate, std::int64_t r, std::int64_t f);

// ---- elementwise (elementwise.cu); y may alias x, d_x may alias d_y ----
void bias_act_forward(float* y, const float* x, const float* bias, Activation act, std::int64_t r,
                      std::int64_t f);
// d_x = d_y * act'(y); d_bias (F) += column sums of d_x when d_bias is not null.
void bias_act_backward(float* d_x, float* d_bias, const float* d_y, const float* y, Activation act,
                       std::int64_t r, std::int64_t f);
// Inverted dropout with the CPU's mask: keep = CounterRng(rng).uniform(global_ids[row], f) >= p.
void dropout_forward(float* y, const float* x, float p, const CounterRng& rng,
                     const GlobalId* global_ids, std::int64_t r, std::int64_t f);
void dropout_backward(float* d_x, const float* d_y, float p, const CounterRng& rng,
                      const GlobalId* global_ids, std::int64_t r, std::int64_t f);

// ---- attention (attention.cu): H heads of width D, rows of zs (·, H·D + H) = [z, s_src] ----
// A CSR pattern's device arrays (values unused).
struct CudaCsrArrays {
  const EdgeOffset* indptr = nullptr;
  const NodeId* indices = nullptr;
};
// The attention dropout as on the CPU: head h of edge (r, c) is kept when
// CounterRng(key).uniform(column_ids[r], column_ids[c] * H + h) >= p; p = 0: none.
struct AttentionDropoutArgs {
  float p = 0.0f;
  std::uint64_t key = 0;                // CounterRng::key()
  const GlobalId* column_ids = nullptr;  // device array
};
void gat_project(float* zs, float* s_dst, const float* z, const float* att, std::int64_t r,
                 std::int64_t heads, std::int64_t d);
// d_z written, d_att (2 H D) accumulated (deterministic column sums).
void gat_project_backward(float* d_z, float* d_att, const float* d_zs, const float* d_s_dst,
                          const float* zs, const float* att, std::int64_t r, std::int64_t heads,
                          std::int64_t d);
void gat_attention_forward(float* out, float* alpha, const CudaCsrArrays& a, const float* zs,
                           const float* s_dst, std::int64_t heads, std::int64_t d, float slope,
                           const AttentionDropoutArgs& drop, const NodeId* rows,
                           std::int64_t count);
void gat_attention_backward(float* d_score, float* d_s_dst, float* alpha, const CudaCsrArrays& a,
                            const float* d_out, const float* zs, const float* s_dst,
                            std::int64_t heads, std::int64_t d, float slope,
                            const AttentionDropoutArgs& drop, const NodeId* rows,
                            std::int64_t count);
void gat_attention_transpose(float* d_zs, const CudaCsrArrays& at, const EdgeOffset* edge_of,
                             const float* alpha, const float* d_score, const float* d_out,
                             std::int64_t heads, std::int64_t d, const NodeId* rows,
                             std::int64_t count);

// ---- row movement (rows.cu); out never aliases x ----
// out (n, F) = x[rows[0..n)].
void gather_rows(float* out, const float* x, const NodeId* rows, std::int64_t n, std::int64_t f);
// out[rows[i]] += x[i] for i < n. Rows may repeat: repeated rows are summed with atomics, so
// their last bits may depend on the order the GPU ran them (distinct rows are exact).
void scatter_add_rows(float* out, const float* x, const NodeId* rows, std::int64_t n,
                      std::int64_t f);
// out[rows[i]] = x[i] for i < n (rows distinct).
void scatter_rows(float* out, const float* x, const NodeId* rows, std::int64_t n, std::int64_t f);

// ---- losses (loss.cu) ----
// logp (R, C) = log_softmax(logits) row by row; logp may alias logits.
void log_softmax_forward(float* logp, const float* logits, std::int64_t r, std::int64_t c);
// Sum over the n listed rows of -logp[row, labels[row]] (double); waits for the result.
double nll_loss_sum(const float* logp, const std::int64_t* labels, const NodeId* rows,
                    std::int64_t n, std::int64_t c);
// d_logits (R, C): scale * (exp(logp) - onehot(label)) on the n listed (distinct) rows, 0 on all
// others; must not alias logp.
void log_softmax_nll_backward(float* d_logits, const float* logp, const std::int64_t* labels,
                              const NodeId* rows, std::int64_t n, float scale, std::int64_t r,
                              std::int64_t c);

// ---- losses, multi-label (loss.cu) ----
// Sum over the n listed rows and the T tasks with a non-NaN target of the stable BCE from
// logits, max(z, 0) - z y + log1p(exp(-|z|)) in double; logits, targets (R, T). *count = the
// number of terms. Deterministic (a grid fixed by n * T, fixed-order reductions); waits for the
// result.
double sigmoid_bce_loss_sum(std::int64_t* count, const float* logits, const float* targets,
                            const NodeId* rows, std::int64_t n, std::int64_t t);
// d_logits (R, T) = scale * (sigmoid(logits) - targets) on the n listed (distinct) rows where
// the target is not NaN, 0 everywhere else.
void sigmoid_bce_backward(float* d_logits, const float* logits, const float* targets,
                          const NodeId* rows, std::int64_t n, float scale, std::int64_t r,
                          std::int64_t t);

// ---- batch normalisation (batch_norm.cu); y and x_hat may alias x, d_x may alias d_y ----
// Every pointer is a device pointer (the double sums too); count is a host value.
// sum, sum_sq (F) = per-column sums of x (R, F) and of x^2 in double, written (not accumulated);
// deterministic fixed-order sums, 0 when R = 0.
void batch_norm_stats(double* sum, double* sum_sq, const float* x, std::int64_t r, std::int64_t f);
// x_hat (R, F) = (x - mean) * inv_std; y (R, F) = gamma * x_hat + beta (per column).
void batch_norm_forward(float* y, float* x_hat, const float* x, const float* mean,
                        const float* inv_std, const float* gamma, const float* beta, std::int64_t r,
                        std::int64_t f);
// sum_dy, sum_dy_xhat (F) = per-column sums of d_y and of d_y * x_hat (double, written).
void batch_norm_backward_stats(double* sum_dy, double* sum_dy_xhat, const float* d_y,
                               const float* x_hat, std::int64_t r, std::int64_t f);
// d_x (R, F) = gamma * inv_std * (d_y - mean_dy - x_hat * mean_dy_xhat), mean_* = sum_* / count
// rounded to float (count = the number of rows over all ranks).
void batch_norm_backward(float* d_x, const float* d_y, const float* x_hat, const float* gamma,
                         const float* inv_std, const double* sum_dy, const double* sum_dy_xhat,
                         double count, std::int64_t r, std::int64_t f);

// ---- parameters and optimizer (elementwise.cu) ----
// out[i] += float(values[i]), i < n.
void add_doubles(float* out, const double* values, std::int64_t n);
// One Adam update of n entries, as the CPU's (the same float operations, in the same order).
void adam_update(float* params, float* m, float* v, const float* grads, const float* decay,
                 const AdamStep& step, std::int64_t n);

}  // namespace tessera::cuda
