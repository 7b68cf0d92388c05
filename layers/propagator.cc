// SPDX-License-Identifier: Apache-2.0
// LocalPropagator: the single-process aggregation A·X and its adjoint A^T·dY. A^T is built once
// at construction (Csr::transpose; A itself when the caller says A is symmetric) so that
// backward is a plain row-parallel SpMM, not a scatter. Relies on the spmm and to_bf16 kernels. The
// layers pass out and d_x already sized (N, F); they are resized here too (a no-op then), so other
// callers may pass empty tensors.
#include "layers/propagator.h"

#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/kernels.h"

namespace tessera {

void Propagator::set_operand_dtype(DType dtype) {
  TESSERA_CHECK(dtype == DType::F32 || dtype == DType::BF16, InvalidArgument,
                "aggregation operands are f32 or bf16, not ", to_string(dtype));
  operand_dtype_ = dtype;
}

const Tensor& Propagator::operand(const Tensor& x, Tensor& scratch) const {
  // F32, or rows already stored in bf16 (features at rest), which the SpMM reads as they are.
  if (operand_dtype_ == DType::F32 || x.dtype() == DType::BF16) return x;
  if (scratch.dtype() != operand_dtype_) scratch = Tensor(0, 0, operand_dtype_, x.device());
  scratch.resize_within(x.rows(), x.cols(), x.device());
  to_bf16(scratch, x);
  return scratch;
}

LocalPropagator::LocalPropagator(Csr a, MatrixSymmetry symmetry)
    : a_(std::move(a)), symmetric_(symmetry == MatrixSymmetry::Symmetric) {
  TESSERA_CHECK(a_.num_rows() == a_.num_cols(), InvalidArgument,
                "LocalPropagator needs a square matrix, got (", a_.num_rows(), ", ",
                a_.num_cols(), ")");
  if (!symmetric_) a_t_ = a_.transpose();
}

void LocalPropagator::forward(Tensor& out, const Tensor& x, int /*layer*/) {
  check_shape(x, a_.num_cols(), x.cols(), "LocalPropagator::forward x");
  out.resize(a_.num_rows(), x.cols(), x.device());  // (N, F)
  spmm(out, a_.view(), operand(x, operand_));
}

void LocalPropagator::backward(Tensor& d_x, const Tensor& d_out, int /*layer*/) {
  check_shape(d_out, a_.num_rows(), d_out.cols(), "LocalPropagator::backward d_out");
  const Csr& adjoint = symmetric_ ? a_ : a_t_;
  d_x.resize(adjoint.num_rows(), d_out.cols(), d_out.device());  // (N, F)
  spmm(d_x, adjoint.view(), operand(d_out, operand_));
}

void LocalPropagator::upload(Device device) {
  if (a_.num_rows() == 0) return;  // an empty matrix is never multiplied on a GPU
  a_.upload(device);
  if (!symmetric_) a_t_.upload(device);
}

std::span<const GlobalId> LocalPropagator::column_ids() const {
  if (ids_.empty()) {
    ids_.resize(static_cast<std::size_t>(a_.num_rows()));
    std::iota(ids_.begin(), ids_.end(), GlobalId{0});
  }
  return ids_;
}

std::span<const NodeId> LocalPropagator::inner_rows() const {
  if (rows_.empty()) {
    rows_.resize(static_cast<std::size_t>(a_.num_rows()));
    std::iota(rows_.begin(), rows_.end(), NodeId{0});
  }
  return rows_;
}

}  // namespace tessera
