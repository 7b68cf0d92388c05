// SPDX-License-Identifier: Apache-2.0
// The one dispatch place of the compute kernels: each public kernel checks dtypes, shapes,
// devices, aliasing and index ranges (InvalidArgument saying what was expected and what was
// found), then calls the implementation for the device of its output: the CPU kernels of the
// instruction-set level in use (cpu::kernels(), core/cpu/dispatch.h) from
// core/cpu/, tessera::cuda::* from core/cuda/ (in builds with the CUDA backend).
// Nothing else in Tessera switches on Device for compute. On a GPU, span arguments (index
// lists, per-column vectors) may be host or GPU memory (core/cuda/staging.h); host-side
// validation of index lists applies to host spans only (GPU-resident callers validated theirs
// when they uploaded them).
#include "core/kernels.h"

#include <vector>

#include "core/cpu/dispatch.h"
#include "core/error.h"
#ifdef TESSERA_HAVE_CUDA
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/staging.h"
// The body of a `case DeviceKind::Cuda:` when the CUDA backend is built; else that case falls
// through to no_kernel.
#define TESSERA_CUDA_KERNEL(...) __VA_ARGS__
#else
#define TESSERA_CUDA_KERNEL(...) break
#endif

namespace tessera {
namespace {

// Whether the host may read what ptr points to: always for a CPU kernel (its spans are host
// memory); for a GPU kernel, unless ptr is GPU memory.
bool host_readable(const void* ptr, Device device) {
  if (device.kind == DeviceKind::Cpu || ptr == nullptr) return true;
#ifdef TESSERA_HAVE_CUDA
  return !cuda::is_device_memory(ptr);
#else
  return true;
#endif
}

#ifdef TESSERA_HAVE_CUDA
// The GPU copy of a CSR (Csr::upload); InvalidArgument when the matrix was never uploaded.
const cuda::CudaCsr& device_matrix(const CsrView& a, const char* kernel) {
  TESSERA_CHECK(a.device_matrix != nullptr, InvalidArgument, kernel,
                ": the sparse matrix has no GPU copy (call Csr::upload with the device first)");
  return *static_cast<const cuda::CudaCsr*>(a.device_matrix);
}
#endif

[[noreturn]] void no_kernel(const char* kernel, Device device) {
  TESSERA_FAIL(InvalidArgument, "no ", kernel, " kernel for device ", to_string(device));
}

void check_f32(const Tensor& t, const char* kernel, const char* name) {
  TESSERA_CHECK(t.dtype() == DType::F32, InvalidArgument, kernel, ": ", name,
                " must be f32, found ", to_string(t.dtype()));
}

// t is f32 and on the device the kernel runs on.
void check_input(const Tensor& t, Device device, const char* kernel, const char* name) {
  check_f32(t, kernel, name);
  TESSERA_CHECK(t.device() == device, InvalidArgument, kernel, ": ", name, " is on ",
                to_string(t.device()), ", expected ", to_string(device),
                " (the device of the output)");
}

void check_dims(const Tensor& t, std::int64_t rows, std::int64_t cols, const char* kernel,
                const char* name) {
  TESSERA_CHECK(t.rows() == rows && t.cols() == cols, InvalidArgument, kernel, ": ", name,
                " must be (", rows, ", ", cols, "), found ", t.shape_string());
}

void check_count(std::size_t found, std::int64_t expected, const char* kernel, const char* name) {
  TESSERA_CHECK(static_cast<std::int64_t>(found) == expected, InvalidArgument, kernel, ": ", name,
                " must have ", expected, " entries, found ", found);
}

// Optional per-column vector: empty or F entries.
void check_optional_count(std::size_t found, std::int64_t expected, const char* kernel,
                          const char* name) {
  TESSERA_CHECK(found == 0 || static_cast<std::int64_t>(found) == expected, InvalidArgument, kernel,
                ": ", name, " must be empty or have ", expected, " entries, found ", found);
}

void check_no_alias(const Tensor& out, const Tensor& in, const char* kernel, const char* out_name,
                    const char* in_name) {
  TESSERA_CHECK(out.empty() || in.empty() || out.raw() != in.raw(), InvalidArgument, kernel, ": ",
                out_name, " must not share memory with ", in_name);
}

// Every listed row in [0, limit); with `distinct`, no row listed twice (parallel writers).
void check_rows(std::span<const NodeId> rows, std::int64_t limit, bool distinct,
                const char* kernel, Device device) {
  if (!host_readable(rows.data(), device)) return;
  std::vector<bool> seen(distinct ? static_cast<std::size_t>(limit) : 0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const NodeId r = rows[i];
    TESSERA_CHECK(r >= 0 && r < limit, InvalidArgument, kernel, ": rows[", i, "] = ", r,
                  " is outside [0, ", limit, ")");
    if (distinct) {
      TESSERA_CHECK(!seen[static_cast<std::size_t>(r)], InvalidArgument, kernel, ": rows[", i,
                    "] = ", r, " is listed twice (rows must be distinct)");
      seen[static_cast<std::size_t>(r)] = true;
    }
  }
}

void check_labels(std::span<const std::int64_t> labels, std::span<const NodeId> rows,
                  std::int64_t num_rows, std::int64_t num_classes, const char* kernel,
                  Device device) {
  check_count(labels.size(), num_rows, kernel, "labels");
  if (!host_readable(labels.data(), device) || !host_readable(rows.data(), device)) return;
  for (const NodeId r : rows) {
    const std::int64_t label = labels[static_cast<std::size_t>(r)];
    TESSERA_CHECK(label >= 0 && label < num_classes, InvalidInput, kernel, ": label ", label,
                  " of row ", r, " is outside [0, ", num_classes, ")");
  }
}

void check_csr_view(const CsrView& a, const char* kernel) {
  TESSERA_CHECK(a.num_rows >= 0 && a.num_cols >= 0, InvalidArgument, kernel,
                ": A has a negative shape (", a.num_rows, ", ", a.num_cols, ")");
  TESSERA_CHECK(a.num_rows == 0 || (a.indptr && (a.nnz() == 0 || a.indices)), InvalidArgument,
                kernel, ": A has ", a.num_rows, " rows but null indptr or indices");
}

// An input that may be stored in bf16 (spmm's and spmm_rows' x, gemm's a, dropout_forward's x,
// gather_rows' x): f32 on the output's device, or bf16 on the CPU, widened exactly as it is read.
void check_input_or_bf16(const Tensor& x, Device device, const char* kernel, const char* name) {
  if (x.dtype() != DType::BF16) return check_input(x, device, kernel, name);
  TESSERA_CHECK(x.device() == device, InvalidArgument, kernel, ": ", name, " is on ",
                to_string(x.device()), ", expected ", to_string(device),
                " (the device of the output)");
  TESSERA_CHECK(device.kind == DeviceKind::Cpu, InvalidArgument, kernel, ": ", name,
                " in bf16 is read on the CPU only, found it on ", to_string(device));
}

const std::uint16_t* bf16_bits(const Tensor& x) {
  return static_cast<const std::uint16_t*>(x.raw());
}

// Rows [begin, begin + count) of a bf16 tensor widened into `block` (count, F), f32.
void widen_rows(Tensor& block, const Tensor& x, std::int64_t begin, std::int64_t count) {
  block.resize_within(count, x.cols(), x.device());
  cpu::kernels().from_bf16(block.f32(), bf16_bits(x) + begin * x.cols(), count * x.cols());
}

// Rows of a bf16 x that dropout_forward widens at a time: one slab of cpu::gemm, so that the f32
// block is 4 KiB a column whatever the rows.
constexpr std::int64_t kWidenBlockRows = cpu::kGemmSlabRows;

}  // namespace

// ---- sparse ----

void spmm(Tensor& out, const CsrView& a, const Tensor& x) {
  const Device device = out.device();
  check_input(out, device, "spmm", "out");
  check_input_or_bf16(x, device, "spmm", "x");
  check_csr_view(a, "spmm");
  TESSERA_CHECK(x.rows() == a.num_cols, InvalidArgument,
                "spmm: x must have A.num_cols = ", a.num_cols, " rows, found ", x.shape_string());
  check_dims(out, a.num_rows, x.cols(), "spmm", "out");
  check_no_alias(out, x, "spmm", "out", "x");
  switch (device.kind) {
    case DeviceKind::Cpu:
      if (x.dtype() == DType::BF16) {
        return cpu::kernels().spmm_bf16(out.f32(), a, bf16_bits(x), x.cols());
      }
      return cpu::kernels().spmm(out.f32(), a, x.f32(), x.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        if (out.empty()) return;  // nothing to write: an empty matrix needs no GPU copy
        return cuda::spmm(out.f32(), device_matrix(a, "spmm"), x.f32(), x.cols());
      });
  }
  no_kernel("spmm", device);
}

void spmm_rows(Tensor& out, const CsrView& a, const Tensor& x, std::span<const NodeId> rows) {
  const Device device = out.device();
  check_input(out, device, "spmm_rows", "out");
  check_input_or_bf16(x, device, "spmm_rows", "x");
  check_csr_view(a, "spmm_rows");
  TESSERA_CHECK(x.rows() == a.num_cols, InvalidArgument,
                "spmm_rows: x must have A.num_cols = ", a.num_cols, " rows, found ",
                x.shape_string());
  check_dims(out, a.num_rows, x.cols(), "spmm_rows", "out");
  check_no_alias(out, x, "spmm_rows", "out", "x");
  check_rows(rows, a.num_rows, /*distinct=*/true, "spmm_rows", device);
  switch (device.kind) {
    case DeviceKind::Cpu:
      if (x.dtype() == DType::BF16) {
        return cpu::kernels().spmm_rows_bf16(out.f32(), a, bf16_bits(x), rows, x.cols());
      }
      return cpu::kernels().spmm_rows(out.f32(), a, x.f32(), rows, x.cols());
    case DeviceKind::Cuda:
      break;
  }
  no_kernel("spmm_rows", device);
}

void to_bf16(Tensor& y, const Tensor& x) {
  check_f32(x, "to_bf16", "x");
  TESSERA_CHECK(y.dtype() == DType::BF16, InvalidArgument, "to_bf16: y must be bf16, found ",
                to_string(y.dtype()));
  check_dims(y, x.rows(), x.cols(), "to_bf16", "y");
  TESSERA_CHECK(y.device() == x.device(), InvalidArgument, "to_bf16: y is on ",
                to_string(y.device()), ", x on ", to_string(x.device()));
  if (x.device().kind != DeviceKind::Cpu) no_kernel("to_bf16", x.device());
  cpu::kernels().to_bf16(static_cast<std::uint16_t*>(y.raw()), x.f32(), x.numel());
}

void to_f32(Tensor& y, const Tensor& x) {
  TESSERA_CHECK(x.dtype() == DType::BF16, InvalidArgument, "to_f32: x must be bf16, found ",
                to_string(x.dtype()));
  check_f32(y, "to_f32", "y");
  check_dims(y, x.rows(), x.cols(), "to_f32", "y");
  TESSERA_CHECK(y.device() == x.device(), InvalidArgument, "to_f32: y is on ",
                to_string(y.device()), ", x on ", to_string(x.device()));
  if (x.device().kind != DeviceKind::Cpu) no_kernel("to_f32", x.device());
  cpu::kernels().from_bf16(y.f32(), bf16_bits(x), x.numel());
}

void positive_bits(Tensor& bits, const Tensor& y) {
  check_f32(y, "positive_bits", "y");
  TESSERA_CHECK(bits.dtype() == DType::U8, InvalidArgument,
                "positive_bits: bits must be u8, found ", to_string(bits.dtype()));
  check_dims(bits, y.rows(), (y.cols() + 7) / 8, "positive_bits", "bits");
  TESSERA_CHECK(bits.device() == y.device(), InvalidArgument, "positive_bits: bits are on ",
                to_string(bits.device()), ", y on ", to_string(y.device()));
  if (y.device().kind != DeviceKind::Cpu) no_kernel("positive_bits", y.device());
  cpu::kernels().positive_bits(bits.data<std::uint8_t>(), y.f32(), y.rows(), y.cols());
}

// ---- dense ----

void gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha,
          float beta) {
  const Device device = c.device();
  check_input_or_bf16(c, device, "gemm", "c");
  check_input_or_bf16(a, device, "gemm", "a");
  TESSERA_CHECK(c.dtype() != DType::BF16 || (a.dtype() == DType::F32 && !trans_a && beta == 0.0f),
                InvalidArgument,
                "gemm: c in bf16 takes a in f32, not transposed, and beta 0 (it is overwritten)");
  check_input(b, device, "gemm", "b");
  const std::int64_t m = trans_a ? a.cols() : a.rows();
  const std::int64_t k = trans_a ? a.rows() : a.cols();
  const std::int64_t k_b = trans_b ? b.cols() : b.rows();
  const std::int64_t n = trans_b ? b.rows() : b.cols();
  TESSERA_CHECK(k == k_b, InvalidArgument, "gemm: op(a) is (", m, ", ", k, ") and op(b) is (", k_b,
                ", ", n, "): inner dimensions must match (a ", a.shape_string(),
                trans_a ? " transposed" : "", ", b ", b.shape_string(),
                trans_b ? " transposed" : "", ")");
  check_dims(c, m, n, "gemm", "c");
  check_no_alias(c, a, "gemm", "c", "a");
  check_no_alias(c, b, "gemm", "c", "b");
  switch (device.kind) {
    case DeviceKind::Cpu:
      if (a.dtype() == DType::BF16) {
        TESSERA_CHECK(!(trans_a && trans_b), InvalidArgument,
                      "gemm: a in bf16 transposed takes b as it is stored, not transposed");
        return cpu::kernels().gemm_bf16_a(c.f32(), bf16_bits(a), trans_a, b.f32(), trans_b, alpha,
                                          beta, m, n, k);
      }
      if (c.dtype() == DType::BF16)
        return cpu::kernels().gemm_bf16_c(static_cast<std::uint16_t*>(c.raw()), a.f32(), b.f32(),
                                          trans_b, alpha, m, n, k);
      return cpu::kernels().gemm(c.f32(), a.f32(), trans_a, b.f32(), trans_b, alpha, beta, m, n, k);
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL(
          return cuda::gemm(c.f32(), a.f32(), trans_a, b.f32(), trans_b, alpha, beta, m, n, k));
  }
  no_kernel("gemm", device);
}

void axpy(Tensor& y, float alpha, const Tensor& x) {
  const Device device = y.device();
  check_input(y, device, "axpy", "y");
  check_input(x, device, "axpy", "x");
  check_dims(x, y.rows(), y.cols(), "axpy", "x");
  switch (device.kind) {
    case DeviceKind::Cpu: return cpu::kernels().axpy(y.f32(), alpha, x.f32(), y.numel());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL(return cuda::axpy(y.f32(), alpha, x.f32(), y.numel()));
  }
  no_kernel("axpy", device);
}

void column_sums(std::span<float> out, const Tensor& x, bool accumulate) {
  const Device device = x.device();
  check_input(x, device, "column_sums", "x");
  check_count(out.size(), x.cols(), "column_sums", "out");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().column_sums(out.data(), x.f32(), accumulate, x.rows(), x.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceOutput<float> sums(out);
        cuda::column_sums(sums.get(), x.f32(), accumulate, x.rows(), x.cols());
        sums.finish();
        return;
      });
  }
  no_kernel("column_sums", device);
}

// ---- elementwise, fused ----

void bias_act_forward(Tensor& y, const Tensor& x, std::span<const float> bias, Activation act) {
  const Device device = y.device();
  check_input(y, device, "bias_act_forward", "y");
  check_input(x, device, "bias_act_forward", "x");
  check_dims(y, x.rows(), x.cols(), "bias_act_forward", "y");
  check_optional_count(bias.size(), x.cols(), "bias_act_forward", "bias");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().bias_act_forward(y.f32(), x.f32(), bias.empty() ? nullptr : bias.data(),
                                             act, x.rows(), x.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<float> b(bias);
        return cuda::bias_act_forward(y.f32(), x.f32(), b.get(), act, x.rows(), x.cols());
      });
  }
  no_kernel("bias_act_forward", device);
}

void bias_act_backward(Tensor& d_x, std::span<float> d_bias, const Tensor& d_y, const Tensor& y,
                       Activation act) {
  const Device device = d_x.device();
  check_input(d_x, device, "bias_act_backward", "d_x");
  check_input(d_y, device, "bias_act_backward", "d_y");
  check_dims(d_x, d_y.rows(), d_y.cols(), "bias_act_backward", "d_x");
  check_optional_count(d_bias.size(), d_y.cols(), "bias_act_backward", "d_bias");
  if (y.dtype() == DType::U8) {  // ReLU from the output's signs (positive_bits)
    TESSERA_CHECK(act == Activation::Relu, InvalidArgument,
                  "bias_act_backward: the signs of y (u8 bits) serve ReLU only");
    check_dims(y, d_y.rows(), (d_y.cols() + 7) / 8, "bias_act_backward", "y (bits)");
    TESSERA_CHECK(y.device() == device && device.kind == DeviceKind::Cpu, InvalidArgument,
                  "bias_act_backward: the signs of y are a host tensor's");
    return cpu::kernels().relu_backward_bits(d_x.f32(), d_bias.empty() ? nullptr : d_bias.data(),
                                             d_y.f32(), y.data<std::uint8_t>(), d_y.rows(),
                                             d_y.cols());
  }
  check_input(y, device, "bias_act_backward", "y");
  check_dims(y, d_y.rows(), d_y.cols(), "bias_act_backward", "y");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().bias_act_backward(d_x.f32(), d_bias.empty() ? nullptr : d_bias.data(),
                                              d_y.f32(), y.f32(), act, d_y.rows(), d_y.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceOutput<float> db(d_bias);
        cuda::bias_act_backward(d_x.f32(), db.get(), d_y.f32(), y.f32(), act, d_y.rows(),
                                d_y.cols());
        db.finish();
        return;
      });
  }
  no_kernel("bias_act_backward", device);
}

namespace {
// `in` may be bf16 (on the CPU) in the forward only.
void check_dropout(const Tensor& out, const Tensor& in, float p,
                   std::span<const GlobalId> global_ids, const char* kernel, const char* out_name,
                   const char* in_name, bool bf16_in) {
  check_input(out, out.device(), kernel, out_name);
  if (bf16_in) {
    check_input_or_bf16(in, out.device(), kernel, in_name);
  } else {
    check_input(in, out.device(), kernel, in_name);
  }
  check_dims(out, in.rows(), in.cols(), kernel, out_name);
  TESSERA_CHECK(p >= 0.0f && p < 1.0f, InvalidArgument, kernel, ": p must be in [0, 1), found ", p);
  check_count(global_ids.size(), in.rows(), kernel, "global_ids");
}

// dropout_forward of a bf16 x (CPU), widened a block of rows at a time: the mask is a function
// of each row's global id, so the blocks draw exactly the whole tensor's.
void dropout_bf16_x(Tensor& y, const Tensor& x, float p, const CounterRng& rng,
                    std::span<const GlobalId> global_ids) {
  const std::int64_t rows = x.rows(), f = x.cols(), step = kWidenBlockRows;
  Tensor block;
  for (std::int64_t begin = 0; begin < rows; begin += step) {
    const std::int64_t count = std::min(step, rows - begin);
    widen_rows(block, x, begin, count);
    cpu::kernels().dropout_forward(y.f32() + begin * f, block.f32(), p, rng,
                                   global_ids.data() + begin, count, f);
  }
}
}  // namespace

void dropout_forward(Tensor& y, const Tensor& x, float p, const CounterRng& rng,
                     std::span<const GlobalId> global_ids) {
  check_dropout(y, x, p, global_ids, "dropout_forward", "y", "x", true);
  switch (y.device().kind) {
    case DeviceKind::Cpu:
      if (x.dtype() == DType::BF16) return dropout_bf16_x(y, x, p, rng, global_ids);
      return cpu::kernels().dropout_forward(y.f32(), x.f32(), p, rng, global_ids.data(), x.rows(),
                                            x.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<GlobalId> ids(global_ids);
        return cuda::dropout_forward(y.f32(), x.f32(), p, rng, ids.get(), x.rows(), x.cols());
      });
  }
  no_kernel("dropout_forward", y.device());
}

void dropout_backward(Tensor& d_x, const Tensor& d_y, float p, const CounterRng& rng,
                      std::span<const GlobalId> global_ids) {
  check_dropout(d_x, d_y, p, global_ids, "dropout_backward", "d_x", "d_y", false);
  switch (d_x.device().kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().dropout_backward(d_x.f32(), d_y.f32(), p, rng, global_ids.data(),
                                             d_y.rows(), d_y.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<GlobalId> ids(global_ids);
        return cuda::dropout_backward(d_x.f32(), d_y.f32(), p, rng, ids.get(), d_y.rows(),
                                      d_y.cols());
      });
  }
  no_kernel("dropout_backward", d_x.device());
}

// ---- attention ----

namespace {

// heads >= 1 dividing zs's width into H·D + H; returns D.
std::int64_t head_width(const Tensor& zs, int heads, const char* kernel) {
  TESSERA_CHECK(heads >= 1, InvalidArgument, kernel, ": heads must be >= 1, got ", heads);
  const std::int64_t w = zs.cols() - heads;
  TESSERA_CHECK(w >= heads && w % heads == 0, InvalidArgument, kernel,
                ": zs must be (R, H*D + H) for ", heads, " heads, found ", zs.shape_string());
  return w / heads;
}

void check_dropout(const AttentionDropout& d, std::int64_t num_cols, const char* kernel) {
  TESSERA_CHECK(d.p >= 0.0f && d.p < 1.0f, InvalidArgument, kernel,
                ": attention dropout must be in [0, 1), got ", d.p);
  if (d.p == 0.0f) return;
  TESSERA_CHECK(d.rng != nullptr, InvalidArgument, kernel, ": attention dropout without an rng");
  check_count(d.column_ids.size(), num_cols, kernel, "dropout column_ids");
}

cpu::AttentionDropoutArgs cpu_dropout(const AttentionDropout& d) {
  if (d.p == 0.0f) return {};
  return {d.p, d.rng, d.column_ids.data()};
}

// The shared checks of gat_attention_forward/backward: a (R, C) over zs (C, HD + H), s_dst
// (R, H), per-edge (nnz, H) and per-row (R, HD) tensors; returns D.
std::int64_t check_attention(const CsrView& a, const Tensor& zs, const Tensor& s_dst,
                             const Tensor& edge, const Tensor& row, int heads,
                             const AttentionDropout& dropout, std::span<const NodeId> rows,
                             const char* kernel) {
  const Device device = row.device();
  for (const Tensor* t : {&zs, &s_dst, &edge}) check_input(*t, device, kernel, "input");
  check_csr_view(a, kernel);
  const std::int64_t d = head_width(zs, heads, kernel);
  check_dims(zs, a.num_cols, zs.cols(), kernel, "zs");
  check_dims(s_dst, a.num_rows, heads, kernel, "s_dst");
  check_dims(edge, a.nnz(), heads, kernel, "edge tensor");
  check_dims(row, a.num_rows, heads * d, kernel, "row tensor");
  check_rows(rows, a.num_rows, /*distinct=*/true, kernel, device);
  check_dropout(dropout, a.num_cols, kernel);
  return d;
}

#ifdef TESSERA_HAVE_CUDA
// The CUDA kernels' view of a host CSR pattern, its index lists and the dropout's ids: staged
// for the one call (uploaded on the compute stream).
struct CudaAttentionArgs {
  cuda::DeviceInput<EdgeOffset> indptr;
  cuda::DeviceInput<NodeId> indices;
  cuda::DeviceInput<NodeId> rows;
  cuda::DeviceInput<GlobalId> ids;
  cuda::AttentionDropoutArgs drop;

  CudaAttentionArgs(const CsrView& a, std::span<const NodeId> row_list,
                    const AttentionDropout& d)
      : indptr(std::span<const EdgeOffset>(a.indptr, static_cast<std::size_t>(a.num_rows + 1))),
        indices(std::span<const NodeId>(a.indices, static_cast<std::size_t>(a.nnz()))),
        rows(row_list),
        ids(d.p > 0.0f ? d.column_ids : std::span<const GlobalId>()) {
    if (d.p > 0.0f) drop = {d.p, d.rng->key(), ids.get()};
  }
  cuda::CudaCsrArrays pattern() const { return {indptr.get(), indices.get()}; }
};
#endif

}  // namespace

void gat_project(Tensor& zs, Tensor& s_dst, const Tensor& z, std::span<const float> att,
                 int heads) {
  const Device device = zs.device();
  check_input(s_dst, device, "gat_project", "s_dst");
  check_input(z, device, "gat_project", "z");
  const std::int64_t d = head_width(zs, heads, "gat_project");
  check_dims(z, zs.rows(), heads * d, "gat_project", "z");
  check_dims(s_dst, zs.rows(), heads, "gat_project", "s_dst");
  check_count(att.size(), 2 * heads * d, "gat_project", "att");
  check_no_alias(zs, z, "gat_project", "zs", "z");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().gat_project(zs.f32(), s_dst.f32(), z.f32(), att.data(), z.rows(),
                                        heads, d);
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<float> a(att);
        return cuda::gat_project(zs.f32(), s_dst.f32(), z.f32(), a.get(), z.rows(), heads, d);
      });
  }
  no_kernel("gat_project", device);
}

void gat_project_backward(Tensor& d_z, std::span<float> d_att, const Tensor& d_zs,
                          const Tensor& d_s_dst, const Tensor& zs, std::span<const float> att,
                          int heads) {
  const Device device = d_z.device();
  for (const Tensor* t : {&d_zs, &d_s_dst, &zs})
    check_input(*t, device, "gat_project_backward", "input");
  const std::int64_t d = head_width(zs, heads, "gat_project_backward");
  check_dims(d_zs, zs.rows(), zs.cols(), "gat_project_backward", "d_zs");
  check_dims(d_s_dst, zs.rows(), heads, "gat_project_backward", "d_s_dst");
  check_dims(d_z, zs.rows(), heads * d, "gat_project_backward", "d_z");
  check_count(att.size(), 2 * heads * d, "gat_project_backward", "att");
  check_count(d_att.size(), 2 * heads * d, "gat_project_backward", "d_att");
  check_no_alias(d_z, d_zs, "gat_project_backward", "d_z", "d_zs");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().gat_project_backward(d_z.f32(), d_att.data(), d_zs.f32(),
                                                 d_s_dst.f32(), zs.f32(), att.data(), zs.rows(),
                                                 heads, d);
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<float> a(att);
        cuda::DeviceOutput<float> da(d_att);
        cuda::gat_project_backward(d_z.f32(), da.get(), d_zs.f32(), d_s_dst.f32(), zs.f32(),
                                   a.get(), zs.rows(), heads, d);
        da.finish();
        return;
      });
  }
  no_kernel("gat_project_backward", device);
}

void gat_attention_forward(Tensor& out, Tensor& alpha, const CsrView& a, const Tensor& zs,
                           const Tensor& s_dst, int heads, float slope,
                           const AttentionDropout& dropout, std::span<const NodeId> rows) {
  const char* kernel = "gat_attention_forward";
  const std::int64_t d = check_attention(a, zs, s_dst, alpha, out, heads, dropout, rows, kernel);
  check_no_alias(out, zs, kernel, "out", "zs");
  switch (out.device().kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().gat_attention_forward(out.f32(), alpha.f32(), a, zs.f32(),
                                                  s_dst.f32(), heads, d, slope,
                                                  cpu_dropout(dropout), rows);
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        const CudaAttentionArgs args(a, rows, dropout);
        return cuda::gat_attention_forward(out.f32(), alpha.f32(), args.pattern(), zs.f32(),
                                           s_dst.f32(), heads, d, slope, args.drop,
                                           args.rows.get(),
                                           static_cast<std::int64_t>(rows.size()));
      });
  }
  no_kernel(kernel, out.device());
}

void gat_attention_backward(Tensor& d_score, Tensor& d_s_dst, Tensor& alpha, const CsrView& a,
                            const Tensor& d_out, const Tensor& zs, const Tensor& s_dst, int heads,
                            float slope, const AttentionDropout& dropout,
                            std::span<const NodeId> rows) {
  const char* kernel = "gat_attention_backward";
  const std::int64_t d = check_attention(a, zs, s_dst, alpha, d_out, heads, dropout, rows, kernel);
  check_dims(d_score, a.nnz(), heads, kernel, "d_score");
  check_dims(d_s_dst, a.num_rows, heads, kernel, "d_s_dst");
  check_no_alias(d_score, alpha, kernel, "d_score", "alpha");
  switch (d_out.device().kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().gat_attention_backward(d_score.f32(), d_s_dst.f32(), alpha.f32(), a,
                                                   d_out.f32(), zs.f32(), s_dst.f32(), heads, d,
                                                   slope, cpu_dropout(dropout), rows);
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        const CudaAttentionArgs args(a, rows, dropout);
        return cuda::gat_attention_backward(d_score.f32(), d_s_dst.f32(), alpha.f32(),
                                            args.pattern(), d_out.f32(), zs.f32(), s_dst.f32(),
                                            heads, d, slope, args.drop, args.rows.get(),
                                            static_cast<std::int64_t>(rows.size()));
      });
  }
  no_kernel(kernel, d_out.device());
}

void gat_attention_transpose(Tensor& d_zs, const CsrView& at, std::span<const EdgeOffset> edge_of,
                             const Tensor& alpha, const Tensor& d_score, const Tensor& d_out,
                             int heads, std::span<const NodeId> rows) {
  const char* kernel = "gat_attention_transpose";
  const Device device = d_zs.device();
  for (const Tensor* t : {&alpha, &d_score, &d_out}) check_input(*t, device, kernel, "input");
  check_csr_view(at, kernel);
  const std::int64_t d = head_width(d_zs, heads, kernel);
  check_dims(d_zs, at.num_rows, d_zs.cols(), kernel, "d_zs");
  check_count(edge_of.size(), at.nnz(), kernel, "edge_of");
  check_dims(alpha, at.nnz(), heads, kernel, "alpha");
  check_dims(d_score, at.nnz(), heads, kernel, "d_score");
  check_dims(d_out, at.num_cols, heads * d, kernel, "d_out");
  check_rows(rows, at.num_rows, /*distinct=*/true, kernel, device);
  for (std::size_t k = 0; k < edge_of.size(); ++k)
    TESSERA_CHECK(edge_of[k] >= 0 && edge_of[k] < at.nnz(), InvalidArgument, kernel, ": edge_of[",
                  k, "] = ", edge_of[k], " is outside [0, ", at.nnz(), ")");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().gat_attention_transpose(d_zs.f32(), at, edge_of.data(), alpha.f32(),
                                                    d_score.f32(), d_out.f32(), heads, d, rows);
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        const CudaAttentionArgs args(at, rows, {});
        const cuda::DeviceInput<EdgeOffset> edges(edge_of);
        return cuda::gat_attention_transpose(d_zs.f32(), args.pattern(), edges.get(), alpha.f32(),
                                             d_score.f32(), d_out.f32(), heads, d, args.rows.get(),
                                             static_cast<std::int64_t>(rows.size()));
      });
  }
  no_kernel(kernel, device);
}

// ---- row movement ----

void gather_rows(Tensor& out, const Tensor& x, std::span<const NodeId> rows) {
  const Device device = out.device();
  check_input(out, device, "gather_rows", "out");
  check_input_or_bf16(x, device, "gather_rows", "x");
  check_dims(out, static_cast<std::int64_t>(rows.size()), x.cols(), "gather_rows", "out");
  check_no_alias(out, x, "gather_rows", "out", "x");
  check_rows(rows, x.rows(), /*distinct=*/false, "gather_rows", device);
  switch (device.kind) {
    case DeviceKind::Cpu:
      if (x.dtype() == DType::BF16)
        return cpu::kernels().gather_rows_bf16(out.f32(), bf16_bits(x), rows, x.cols());
      return cpu::kernels().gather_rows(out.f32(), x.f32(), rows, x.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<NodeId> r(rows);
        return cuda::gather_rows(out.f32(), x.f32(), r.get(),
                                 static_cast<std::int64_t>(rows.size()), x.cols());
      });
  }
  no_kernel("gather_rows", device);
}

void scatter_rows(Tensor& out, const Tensor& x, std::span<const NodeId> rows) {
  const Device device = out.device();
  check_input(out, device, "scatter_rows", "out");
  check_input(x, device, "scatter_rows", "x");
  check_dims(x, static_cast<std::int64_t>(rows.size()), out.cols(), "scatter_rows", "x");
  check_no_alias(out, x, "scatter_rows", "out", "x");
  check_rows(rows, out.rows(), /*distinct=*/true, "scatter_rows", device);
  switch (device.kind) {
    case DeviceKind::Cpu: return cpu::kernels().scatter_rows(out.f32(), x.f32(), rows, out.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<NodeId> r(rows);
        return cuda::scatter_rows(out.f32(), x.f32(), r.get(),
                                  static_cast<std::int64_t>(rows.size()), out.cols());
      });
  }
  no_kernel("scatter_rows", device);
}

void scatter_add_rows(Tensor& out, const Tensor& x, std::span<const NodeId> rows) {
  const Device device = out.device();
  check_input(out, device, "scatter_add_rows", "out");
  check_input(x, device, "scatter_add_rows", "x");
  check_dims(x, static_cast<std::int64_t>(rows.size()), out.cols(), "scatter_add_rows", "x");
  check_no_alias(out, x, "scatter_add_rows", "out", "x");
  check_rows(rows, out.rows(), /*distinct=*/false, "scatter_add_rows", device);
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().scatter_add_rows(out.f32(), x.f32(), rows, out.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<NodeId> r(rows);
        return cuda::scatter_add_rows(out.f32(), x.f32(), r.get(),
                                      static_cast<std::int64_t>(rows.size()), out.cols());
      });
  }
  no_kernel("scatter_add_rows", device);
}

// ---- losses ----

void log_softmax_forward(Tensor& logp, const Tensor& logits) {
  const Device device = logp.device();
  check_input(logp, device, "log_softmax_forward", "logp");
  check_input(logits, device, "log_softmax_forward", "logits");
  check_dims(logp, logits.rows(), logits.cols(), "log_softmax_forward", "logp");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().log_softmax_forward(logp.f32(), logits.f32(), logits.rows(),
                                                logits.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL(return cuda::log_softmax_forward(logp.f32(), logits.f32(), logits.rows(),
                                                           logits.cols()));
  }
  no_kernel("log_softmax_forward", device);
}

double nll_loss_sum(const Tensor& logp, std::span<const std::int64_t> labels,
                    std::span<const NodeId> rows) {
  const Device device = logp.device();
  check_input(logp, device, "nll_loss_sum", "logp");
  check_rows(rows, logp.rows(), /*distinct=*/false, "nll_loss_sum", device);
  check_labels(labels, rows, logp.rows(), logp.cols(), "nll_loss_sum", device);
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().nll_loss_sum(logp.f32(), labels.data(), rows, logp.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<std::int64_t> l(labels);
        cuda::DeviceInput<NodeId> r(rows);
        return cuda::nll_loss_sum(logp.f32(), l.get(), r.get(),
                                  static_cast<std::int64_t>(rows.size()), logp.cols());
      });
  }
  no_kernel("nll_loss_sum", device);
}

void log_softmax_nll_backward(Tensor& d_logits, const Tensor& logp,
                              std::span<const std::int64_t> labels, std::span<const NodeId> rows,
                              float scale) {
  const Device device = d_logits.device();
  const char* kernel = "log_softmax_nll_backward";
  check_input(d_logits, device, kernel, "d_logits");
  check_input(logp, device, kernel, "logp");
  check_dims(d_logits, logp.rows(), logp.cols(), kernel, "d_logits");
  check_no_alias(d_logits, logp, kernel, "d_logits", "logp");
  check_rows(rows, logp.rows(), /*distinct=*/true, kernel, device);
  check_labels(labels, rows, logp.rows(), logp.cols(), kernel, device);
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().log_softmax_nll_backward(d_logits.f32(), logp.f32(), labels.data(),
                                                     rows, scale, logp.rows(), logp.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<std::int64_t> l(labels);
        cuda::DeviceInput<NodeId> r(rows);
        return cuda::log_softmax_nll_backward(d_logits.f32(), logp.f32(), l.get(), r.get(),
                                              static_cast<std::int64_t>(rows.size()), scale,
                                              logp.rows(), logp.cols());
      });
  }
  no_kernel(kernel, device);
}

double sigmoid_bce_loss_sum(const Tensor& logits, const Tensor& targets,
                            std::span<const NodeId> rows, std::int64_t* count) {
  const Device device = logits.device();
  check_input(logits, device, "sigmoid_bce_loss_sum", "logits");
  check_input(targets, device, "sigmoid_bce_loss_sum", "targets");
  check_dims(targets, logits.rows(), logits.cols(), "sigmoid_bce_loss_sum", "targets");
  TESSERA_CHECK(count != nullptr, InvalidArgument, "sigmoid_bce_loss_sum: count is null");
  check_rows(rows, logits.rows(), /*distinct=*/false, "sigmoid_bce_loss_sum", device);
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().sigmoid_bce_loss_sum(count, logits.f32(), targets.f32(), rows,
                                                 logits.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<NodeId> r(rows);
        return cuda::sigmoid_bce_loss_sum(count, logits.f32(), targets.f32(), r.get(),
                                          static_cast<std::int64_t>(rows.size()), logits.cols());
      });
  }
  no_kernel("sigmoid_bce_loss_sum", device);
}

void sigmoid_bce_backward(Tensor& d_logits, const Tensor& logits, const Tensor& targets,
                          std::span<const NodeId> rows, float scale) {
  const Device device = d_logits.device();
  const char* kernel = "sigmoid_bce_backward";
  check_input(d_logits, device, kernel, "d_logits");
  check_input(logits, device, kernel, "logits");
  check_input(targets, device, kernel, "targets");
  check_dims(d_logits, logits.rows(), logits.cols(), kernel, "d_logits");
  check_dims(targets, logits.rows(), logits.cols(), kernel, "targets");
  check_no_alias(d_logits, logits, kernel, "d_logits", "logits");
  check_no_alias(d_logits, targets, kernel, "d_logits", "targets");
  check_rows(rows, logits.rows(), /*distinct=*/true, kernel, device);
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().sigmoid_bce_backward(d_logits.f32(), logits.f32(), targets.f32(), rows,
                                                 scale, logits.rows(), logits.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<NodeId> r(rows);
        return cuda::sigmoid_bce_backward(d_logits.f32(), logits.f32(), targets.f32(), r.get(),
                                          static_cast<std::int64_t>(rows.size()), scale,
                                          logits.rows(), logits.cols());
      });
  }
  no_kernel(kernel, device);
}

// ---- batch normalisation ----

void batch_norm_stats(std::span<double> sum, std::span<double> sum_sq, const Tensor& x) {
  const Device device = x.device();
  check_input(x, device, "batch_norm_stats", "x");
  check_count(sum.size(), x.cols(), "batch_norm_stats", "sum");
  check_count(sum_sq.size(), x.cols(), "batch_norm_stats", "sum_sq");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().batch_norm_stats(sum.data(), sum_sq.data(), x.f32(), x.rows(),
                                             x.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceOutput<double> s(sum), s2(sum_sq);
        cuda::batch_norm_stats(s.get(), s2.get(), x.f32(), x.rows(), x.cols());
        s.finish();
        s2.finish();
        return;
      });
  }
  no_kernel("batch_norm_stats", device);
}

void batch_norm_forward(Tensor& y, Tensor& x_hat, const Tensor& x, std::span<const float> mean,
                        std::span<const float> inv_std, std::span<const float> gamma,
                        std::span<const float> beta) {
  const Device device = y.device();
  const char* kernel = "batch_norm_forward";
  check_input(y, device, kernel, "y");
  check_input(x_hat, device, kernel, "x_hat");
  check_input(x, device, kernel, "x");
  check_dims(y, x.rows(), x.cols(), kernel, "y");
  check_dims(x_hat, x.rows(), x.cols(), kernel, "x_hat");
  check_no_alias(y, x_hat, kernel, "y", "x_hat");
  check_count(mean.size(), x.cols(), kernel, "mean");
  check_count(inv_std.size(), x.cols(), kernel, "inv_std");
  check_count(gamma.size(), x.cols(), kernel, "gamma");
  check_count(beta.size(), x.cols(), kernel, "beta");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().batch_norm_forward(y.f32(), x_hat.f32(), x.f32(), mean.data(),
                                               inv_std.data(), gamma.data(), beta.data(), x.rows(),
                                               x.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<float> m(mean), is(inv_std), g(gamma), b(beta);
        return cuda::batch_norm_forward(y.f32(), x_hat.f32(), x.f32(), m.get(), is.get(), g.get(),
                                        b.get(), x.rows(), x.cols());
      });
  }
  no_kernel(kernel, device);
}

void batch_norm_backward_stats(std::span<double> sum_dy, std::span<double> sum_dy_xhat,
                               const Tensor& d_y, const Tensor& x_hat) {
  const Device device = d_y.device();
  const char* kernel = "batch_norm_backward_stats";
  check_input(d_y, device, kernel, "d_y");
  check_input(x_hat, device, kernel, "x_hat");
  check_dims(x_hat, d_y.rows(), d_y.cols(), kernel, "x_hat");
  check_count(sum_dy.size(), d_y.cols(), kernel, "sum_dy");
  check_count(sum_dy_xhat.size(), d_y.cols(), kernel, "sum_dy_xhat");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().batch_norm_backward_stats(sum_dy.data(), sum_dy_xhat.data(), d_y.f32(),
                                                      x_hat.f32(), d_y.rows(), d_y.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceOutput<double> s(sum_dy), s2(sum_dy_xhat);
        cuda::batch_norm_backward_stats(s.get(), s2.get(), d_y.f32(), x_hat.f32(), d_y.rows(),
                                        d_y.cols());
        s.finish();
        s2.finish();
        return;
      });
  }
  no_kernel(kernel, device);
}

void batch_norm_backward(Tensor& d_x, const Tensor& d_y, const Tensor& x_hat,
                         std::span<const float> gamma, std::span<const float> inv_std,
                         std::span<const double> sum_dy, std::span<const double> sum_dy_xhat,
                         double count) {
  const Device device = d_x.device();
  const char* kernel = "batch_norm_backward";
  check_input(d_x, device, kernel, "d_x");
  check_input(d_y, device, kernel, "d_y");
  check_input(x_hat, device, kernel, "x_hat");
  check_dims(d_x, d_y.rows(), d_y.cols(), kernel, "d_x");
  check_dims(x_hat, d_y.rows(), d_y.cols(), kernel, "x_hat");
  check_count(gamma.size(), d_y.cols(), kernel, "gamma");
  check_count(inv_std.size(), d_y.cols(), kernel, "inv_std");
  check_count(sum_dy.size(), d_y.cols(), kernel, "sum_dy");
  check_count(sum_dy_xhat.size(), d_y.cols(), kernel, "sum_dy_xhat");
  TESSERA_CHECK(d_y.rows() == 0 || count > 0.0, InvalidArgument, kernel,
                ": count (rows over all ranks) must be > 0, found ", count);
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().batch_norm_backward(d_x.f32(), d_y.f32(), x_hat.f32(), gamma.data(),
                                                inv_std.data(), sum_dy.data(), sum_dy_xhat.data(),
                                                count, d_y.rows(), d_y.cols());
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceInput<float> g(gamma), is(inv_std);
        cuda::DeviceInput<double> s(sum_dy), s2(sum_dy_xhat);
        return cuda::batch_norm_backward(d_x.f32(), d_y.f32(), x_hat.f32(), g.get(), is.get(),
                                         s.get(), s2.get(), count, d_y.rows(), d_y.cols());
      });
  }
  no_kernel(kernel, device);
}

// ---- parameters and optimizer ----

void add_doubles(std::span<float> out, std::span<const double> values, Device device) {
  check_count(values.size(), static_cast<std::int64_t>(out.size()), "add_doubles", "values");
  const auto n = static_cast<std::int64_t>(out.size());
  switch (device.kind) {
    case DeviceKind::Cpu: return cpu::kernels().add_doubles(out.data(), values.data(), n);
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceOutput<float> o(out);
        cuda::DeviceInput<double> in(values);
        cuda::add_doubles(o.get(), in.get(), n);
        o.finish();
        return;
      });
  }
  no_kernel("add_doubles", device);
}

void adam_update(std::span<float> params, std::span<float> m, std::span<float> v,
                 std::span<const float> grads, std::span<const float> decay, const AdamStep& step,
                 Device device) {
  const auto n = static_cast<std::int64_t>(params.size());
  check_count(m.size(), n, "adam_update", "m");
  check_count(v.size(), n, "adam_update", "v");
  check_count(grads.size(), n, "adam_update", "grads");
  check_count(decay.size(), n, "adam_update", "decay");
  switch (device.kind) {
    case DeviceKind::Cpu:
      return cpu::kernels().adam_update(params.data(), m.data(), v.data(), grads.data(),
                                        decay.data(), step, n);
    case DeviceKind::Cuda:
      TESSERA_CUDA_KERNEL({
        cuda::DeviceOutput<float> p(params), mo(m), vo(v);
        cuda::DeviceInput<float> g(grads), d(decay);
        cuda::adam_update(p.get(), mo.get(), vo.get(), g.get(), d.get(), step, n);
        p.finish();
        mo.finish();
        vo.finish();
        return;
      });
  }
  no_kernel("adam_update", device);
}

// ---- threads ----

void set_num_threads(int threads) { cpu::set_num_threads(threads); }
int num_threads() { return cpu::num_threads(); }

}  // namespace tessera
