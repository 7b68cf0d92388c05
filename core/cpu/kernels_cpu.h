// SPDX-License-Identifier: Apache-2.0
// The CPU backend of every kernel in core/kernels.h, on raw host pointers with explicit
// sizes (outputs first, then inputs, then sizes). kernels.cc checks shapes, dtypes, devices and
// index ranges before calling here, so these functions trust their arguments. Reductions use a
// fixed block order, so every result is independent of the thread count.
//
// Each kernel is compiled once per instruction-set level (core/cpu/cpu_level.h) into
// tessera::cpu::<level>; a KernelTable holds one level's kernels and cpu::kernels()
// (core/cpu/dispatch.h) the level this CPU runs, which is what kernels.cc calls.
#pragma once

#include <cstdint>
#include <span>

#include "core/cpu/cpu_level.h"
#include "core/csr.h"
#include "core/kernels.h"
#include "core/rng.h"

namespace tessera::cpu {

// ---- sparse (spmm.cc) ----
// spmm(out, a, x, f): out (R, F) = A (R, C) * x (C, F); out must not alias x.
using SpmmFn = void(float* out, const CsrView& a, const float* x, std::int64_t f);
// spmm_rows(out, a, x, rows, f): only the listed rows of out (distinct) are written.
using SpmmRowsFn = void(float* out, const CsrView& a, const float* x, std::span<const NodeId> rows,
                        std::int64_t f);
// The same with x in bf16 (its uint16_t bits), summed in f32.
using SpmmBf16Fn = void(float* out, const CsrView& a, const std::uint16_t* x, std::int64_t f);
using SpmmRowsBf16Fn = void(float* out, const CsrView& a, const std::uint16_t* x,
                            std::span<const NodeId> rows, std::int64_t f);

// ---- dense (dense.cc) ----
// gemm(c, a, trans_a, b, trans_b, alpha, beta, m, n, k): c (M, N) = alpha * op(a) (M, K) *
// op(b) (K, N) + beta * c, row-major, no aliasing. A call of at least kGemmSlabRows rows is split
// into fixed slabs of that many (the last takes the rest), one BLAS call each, so that every row
// is summed by a call of the same shape at any thread count; a smaller one is served in one call
// or in K-chunks. (OpenBLAS's kernels sum a call's rows in an order that depends on their place
// in the call: Prescott's and Haswell's, measured, sum some rows near a call's end otherwise.
// Slabs of M / threads rows made the results depend on the thread count.)
inline constexpr std::int64_t kGemmSlabRows = 1024;
using GemmFn = void(float* c, const float* a, bool trans_a, const float* b, bool trans_b,
                    float alpha, float beta, std::int64_t m, std::int64_t n, std::int64_t k);
// gemm_bf16_a(c, a, trans_a, b, trans_b, alpha, beta, m, n, k): gemm with a in bf16 (its bits,
// stored (M, K), or (K, M) when transposed, and then b not transposed), widened exactly a slab of
// kGemmSlabRows stored rows at a time in each thread. Not transposed, the slabs are gemm's, so
// the products are those of the widened rows, bit for bit; transposed, fixed groups of slabs are
// summed in group order. A thread holds one widened slab (4 KiB a column).
using GemmBf16AFn = void(float* c, const std::uint16_t* a, bool trans_a, const float* b,
                         bool trans_b, float alpha, float beta, std::int64_t m, std::int64_t n,
                         std::int64_t k);
// gemm_bf16_c(c, a, b, trans_b, alpha, m, n, k): c (M, N, bf16 bits) = alpha * a (M, K) op(b),
// made in f32 a slab of gemm at a time in each thread and rounded (nearest even): gemm's products
// rounded, bit for bit.
using GemmBf16CFn = void(std::uint16_t* c, const float* a, const float* b, bool trans_b,
                         float alpha, std::int64_t m, std::int64_t n, std::int64_t k);
// axpy(y, alpha, x, n): y (n) += alpha * x (n).
using AxpyFn = void(float* y, float alpha, const float* x, std::int64_t n);
// column_sums(out, x, accumulate, r, f): out (F) (+)= column sums of x (R, F).
using ColumnSumsFn = void(float* out, const float* x, bool accumulate, std::int64_t r,
                          std::int64_t f);
// add_doubles(out, values, n): out (n) += values rounded to float.
using AddDoublesFn = void(float* out, const double* values, std::int64_t n);
using AdamUpdateFn = void(float* params, float* m, float* v, const float* grads, const float* decay,
                          const AdamStep& step, std::int64_t n);

// ---- elementwise (elementwise.cc); y may alias x, d_x may alias d_y ----
// bias_act_forward(y, x, bias, act, r, f): y (R, F) = act(x (R, F) + bias (F)); bias may be
// null.
using BiasActForwardFn = void(float* y, const float* x, const float* bias, Activation act,
                              std::int64_t r, std::int64_t f);
// bias_act_backward(d_x, d_bias, d_y, y, act, r, f): d_x (R, F) = d_y * act'(y); d_bias (F) +=
// column sums of d_x when d_bias is not null.
using BiasActBackwardFn = void(float* d_x, float* d_bias, const float* d_y, const float* y,
                               Activation act, std::int64_t r, std::int64_t f);
// dropout_forward(y, x, p, rng, global_ids, r, f): y (R, F) = keep ? x / (1 - p) : 0 with
// keep = rng.uniform(global_ids[r], f) >= p; dropout_backward the same on gradients.
using DropoutFn = void(float* y, const float* x, float p, const CounterRng& rng,
                       const GlobalId* global_ids, std::int64_t r, std::int64_t f);
// positive_bits(bits, y, r, f): bits (R, ceil(F / 8)), bit k % 8 of byte k / 8 of a row set when
// y[k] > 0; relu_backward_bits(d_x, d_bias, d_y, bits, r, f): bias_act_backward for ReLU with
// its output's bits in place of the output.
using PositiveBitsFn = void(std::uint8_t* bits, const float* y, std::int64_t r, std::int64_t f);
using ReluBackwardBitsFn = void(float* d_x, float* d_bias, const float* d_y,
                                const std::uint8_t* bits, std::int64_t r, std::int64_t f);
// to_bf16(y, x, n): y (n) = x rounded to bf16 (nearest even; NaN stays NaN), as uint16_t bits.
using ToBf16Fn = void(std::uint16_t* y, const float* x, std::int64_t n);
// from_bf16(y, x, n): y (n) = x (bf16 bits) widened to f32, exactly.
using FromBf16Fn = void(float* y, const std::uint16_t* x, std::int64_t n);

// ---- row movement (rows.cc); out never aliases x ----
// gather_rows(out, x, rows, f): out (rows.size(), F) = x[rows]. scatter_rows(out, x, rows, f):
// out[rows[i]] = x[i] (rows distinct). scatter_add_rows(out, x, rows, f): out[rows[i]] += x[i]
// in list order (rows may repeat).
using RowsFn = void(float* out, const float* x, std::span<const NodeId> rows, std::int64_t f);
// gather_rows_bf16(out, x, rows, f): gather_rows of bf16 rows, widened.
using RowsBf16Fn = void(float* out, const std::uint16_t* x, std::span<const NodeId> rows,
                        std::int64_t f);

// ---- losses (loss.cc) ----
// log_softmax_forward(logp, logits, r, c): logp (R, C) = log_softmax(logits) row by row; logp
// may alias logits.
using LogSoftmaxFn = void(float* logp, const float* logits, std::int64_t r, std::int64_t c);
using NllLossSumFn = double(const float* logp, const std::int64_t* labels,
                            std::span<const NodeId> rows, std::int64_t c);
// log_softmax_nll_backward(d_logits, logp, labels, rows, scale, r, c): d_logits (R, C) written
// on every row (listed rows distinct); must not alias logp.
using LogSoftmaxNllBackwardFn = void(float* d_logits, const float* logp, const std::int64_t* labels,
                                     std::span<const NodeId> rows, float scale, std::int64_t r,
                                     std::int64_t c);
// sigmoid_bce_loss_sum(count, logits, targets, rows, t): *count = number of (row, task) terms
// with a non-NaN target; logits, targets (R, T).
using SigmoidBceLossSumFn = double(std::int64_t* count, const float* logits, const float* targets,
                                   std::span<const NodeId> rows, std::int64_t t);
using SigmoidBceBackwardFn = void(float* d_logits, const float* logits, const float* targets,
                                  std::span<const NodeId> rows, float scale, std::int64_t r,
                                  std::int64_t t);

// ---- attention (attention.cc): H heads of width D, rows of zs (·, H·D + H) = [z, s_src] ----
// The attention dropout of gat_attention_*: head h of edge (r, c) is kept when
// rng->uniform(column_ids[r], column_ids[c] · H + h) >= p (p = 0: none, rng may be null).
struct AttentionDropoutArgs {
  float p = 0.0f;
  const CounterRng* rng = nullptr;
  const GlobalId* column_ids = nullptr;
};
// gat_project(zs, s_dst, z, att, r, heads, d): zs (R, HD + H) = [z, s_src], s_dst (R, H), with
// s_src[r, h] = <z[r, h], att[0, h]> and s_dst[r, h] = <z[r, h], att[1, h]>; att (2, HD).
using GatProjectFn = void(float* zs, float* s_dst, const float* z, const float* att, std::int64_t r,
                          std::int64_t heads, std::int64_t d);
// gat_project_backward: d_z (R, HD) written, d_att (2, HD) accumulated.
using GatProjectBackwardFn = void(float* d_z, float* d_att, const float* d_zs, const float* d_s_dst,
                                  const float* zs, const float* att, std::int64_t r,
                                  std::int64_t heads, std::int64_t d);
using GatAttentionForwardFn = void(float* out, float* alpha, const CsrView& a, const float* zs,
                                   const float* s_dst, std::int64_t heads, std::int64_t d,
                                   float slope, const AttentionDropoutArgs& drop,
                                   std::span<const NodeId> rows);
using GatAttentionBackwardFn = void(float* d_score, float* d_s_dst, float* alpha, const CsrView& a,
                                    const float* d_out, const float* zs, const float* s_dst,
                                    std::int64_t heads, std::int64_t d, float slope,
                                    const AttentionDropoutArgs& drop, std::span<const NodeId> rows);
using GatAttentionTransposeFn = void(float* d_zs, const CsrView& at, const EdgeOffset* edge_of,
                                     const float* alpha, const float* d_score, const float* d_out,
                                     std::int64_t heads, std::int64_t d,
                                     std::span<const NodeId> rows);

// ---- batch normalisation (batch_norm.cc); y and x_hat may alias x, d_x may alias d_y ----
using BatchNormStatsFn = void(double* sum, double* sum_sq, const float* x, std::int64_t r,
                              std::int64_t f);
using BatchNormForwardFn = void(float* y, float* x_hat, const float* x, const float* mean,
                                const float* inv_std, const float* gamma, const float* beta,
                                std::int64_t r, std::int64_t f);
using BatchNormBackwardStatsFn = void(double* sum_dy, double* sum_dy_xhat, const float* d_y,
                                      const float* x_hat, std::int64_t r, std::int64_t f);
using BatchNormBackwardFn = void(float* d_x, const float* d_y, const float* x_hat,
                                 const float* gamma, const float* inv_std, const double* sum_dy,
                                 const double* sum_dy_xhat, double count, std::int64_t r,
                                 std::int64_t f);

// Every kernel as X(type, name), in one list: the table's members, the levels' declarations
// and their tables (kernel_table.cc) come from it.
#define TESSERA_CPU_KERNELS(X)                           \
  X(SpmmFn, spmm)                                        \
  X(SpmmRowsFn, spmm_rows)                               \
  X(SpmmBf16Fn, spmm_bf16)                               \
  X(SpmmRowsBf16Fn, spmm_rows_bf16)                      \
  X(GemmFn, gemm)                                        \
  X(GemmBf16AFn, gemm_bf16_a)                            \
  X(GemmBf16CFn, gemm_bf16_c)                            \
  X(AxpyFn, axpy)                                        \
  X(ColumnSumsFn, column_sums)                           \
  X(AddDoublesFn, add_doubles)                           \
  X(AdamUpdateFn, adam_update)                           \
  X(BiasActForwardFn, bias_act_forward)                  \
  X(BiasActBackwardFn, bias_act_backward)                \
  X(DropoutFn, dropout_forward)                          \
  X(DropoutFn, dropout_backward)                         \
  X(ToBf16Fn, to_bf16)                                   \
  X(FromBf16Fn, from_bf16)                               \
  X(PositiveBitsFn, positive_bits)                       \
  X(ReluBackwardBitsFn, relu_backward_bits)              \
  X(RowsFn, gather_rows)                                 \
  X(RowsBf16Fn, gather_rows_bf16)                        \
  X(RowsFn, scatter_rows)                                \
  X(RowsFn, scatter_add_rows)                            \
  X(LogSoftmaxFn, log_softmax_forward)                   \
  X(NllLossSumFn, nll_loss_sum)                          \
  X(LogSoftmaxNllBackwardFn, log_softmax_nll_backward)   \
  X(SigmoidBceLossSumFn, sigmoid_bce_loss_sum)           \
  X(SigmoidBceBackwardFn, sigmoid_bce_backward)          \
  X(BatchNormStatsFn, batch_norm_stats)                  \
  X(BatchNormForwardFn, batch_norm_forward)              \
  X(BatchNormBackwardStatsFn, batch_norm_backward_stats) \
  X(BatchNormBackwardFn, batch_norm_backward)            \
  X(GatProjectFn, gat_project)                           \
  X(GatProjectBackwardFn, gat_project_backward)          \
  X(GatAttentionForwardFn, gat_attention_forward)        \
  X(GatAttentionBackwardFn, gat_attention_backward)      \
  X(GatAttentionTransposeFn, gat_attention_transpose)

// One level's kernels.
struct KernelTable {
#define TESSERA_CPU_MEMBER(type, name) type* name;
  TESSERA_CPU_KERNELS(TESSERA_CPU_MEMBER)
#undef TESSERA_CPU_MEMBER
};

}  // namespace tessera::cpu

// The kernels of the level this source is compiled for (declared inside the level's target
// region, where the kernel sources define them).
TESSERA_CPU_TARGET_BEGIN
namespace tessera::cpu::TESSERA_CPU_NS {
#define TESSERA_CPU_DECLARE(type, name) type name;
TESSERA_CPU_KERNELS(TESSERA_CPU_DECLARE)
#undef TESSERA_CPU_DECLARE
}  // namespace tessera::cpu::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END

namespace tessera::cpu::TESSERA_CPU_NS {
// This level's table (kernel_table.cc): a plain function, outside the target region.
const KernelTable& kernel_table();
}  // namespace tessera::cpu::TESSERA_CPU_NS
