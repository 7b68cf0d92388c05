// SPDX-License-Identifier: Apache-2.0
// Propagator: the aggregation step A·X of a layer, behind an interface so that the same layer
// code runs on one process (LocalPropagator: a CSR and its transpose) and on many ranks (a halo
// exchanging propagator in engine/, which fetches halo rows before aggregating boundary rows
// and sends halo gradients back to their owners in backward).
#pragma once

#include <span>
#include <vector>

#include "core/csr.h"
#include "core/tensor.h"

namespace tessera {

// What a layer that weights the edges itself (attention: layers/gat.cc) needs of a propagator:
// the pattern of the part's operator, the global ids of its columns and the halo exchange of the
// layer's own rows. The layer works on one tensor of N + H rows: the owned rows [0, N), then
// the halo rows [N, N + H) in the pattern's column order.
class HaloAccess {
 public:
  virtual ~HaloAccess() = default;
  // (N, N + H) in local ids, columns sorted within a row (the owned ones first); values are the
  // operator's and may be ignored.
  virtual const Csr& pattern() const = 0;
  // (N + H) global ids of the pattern's columns (the first N: the owned rows).
  virtual std::span<const GlobalId> column_ids() const = 0;
  virtual std::span<const NodeId> inner_rows() const = 0;     // rows with owned columns only
  virtual std::span<const NodeId> boundary_rows() const = 0;  // rows with a halo column
  // Forward: rows [0, N) of `rows` (N + H, F) go to the peers that need them; finish_forward
  // fills rows [N, N + H). Keep `rows` alive and its owned rows unchanged until then.
  virtual void start_forward(Tensor& rows, int layer) = 0;
  virtual void finish_forward(Tensor& rows) = 0;
  // Backward: rows [N, N + H) of `d_rows` go back to their owners; finish_backward adds what the
  // peers sent into rows [0, N) (keep rows [N, N + H) unchanged until then).
  virtual void start_backward(Tensor& d_rows, int layer) = 0;
  virtual void finish_backward(Tensor& d_rows) = 0;
  // Progresses the messages in flight (between chunks of overlapped work).
  virtual void poll() = 0;
};

class Propagator {
 public:
  virtual ~Propagator() = default;
  // out (N, F) = A x, x (N, F): the owned rows (halo rows, if any, are the propagator's business).
  // `layer` tags the call for traffic accounting and message keys.
  virtual void forward(Tensor& out, const Tensor& x, int layer) = 0;
  // d_x (N, F) = A^T d_out: overwritten, including contributions that come back from halos.
  virtual void backward(Tensor& d_x, const Tensor& d_out, int layer) = 0;
  virtual std::int64_t num_rows() const = 0;
  // The attention path (HaloAccess), or null where this propagator has none.
  virtual HaloAccess* halo_access() { return nullptr; }
  // Copies the matrices it owns to `device` once, for the kernels that run there (nothing on the
  // CPU, nor for a propagator over matrices that another object owns and uploads).
  virtual void upload(Device /*device*/) {}

  // What forward and backward aggregate: the rows as they are (F32, the default), or BF16 —
  // every row the SpMM reads (owned and halo, embeddings and gradients) rounded to the nearest
  // bf16 into a workspace and summed in f32, so that the gather moves half the bytes. CPU only.
  // The attention path is not affected. Whatever this says, forward's x may itself be bf16 on
  // the CPU (features stored in bf16, --feature-dtype): it is read as it is, never rounded.
  void set_operand_dtype(DType dtype);
  DType operand_dtype() const { return operand_dtype_; }

 protected:
  // x as the SpMM reads it: x itself with F32 or when x is bf16, else x rounded into `scratch`
  // (a workspace that keeps its memory across widths).
  const Tensor& operand(const Tensor& x, Tensor& scratch) const;

 private:
  DType operand_dtype_ = DType::F32;
};

// Single process: A (N, N) weighted CSR; A^T is built once at construction, unless the caller
// states that A is symmetric (values included, as the GCN operator D^-1/2 (A+I) D^-1/2 of a
// symmetric graph is), in which case backward reuses A and no second copy is held.
enum class MatrixSymmetry { General, Symmetric };

// Its HaloAccess has no halo: the columns are the rows, with global ids 0..N-1 (the whole graph).
class LocalPropagator final : public Propagator, private HaloAccess {
 public:
  explicit LocalPropagator(Csr a, MatrixSymmetry symmetry = MatrixSymmetry::General);
  void forward(Tensor& out, const Tensor& x, int layer) override;
  void backward(Tensor& d_x, const Tensor& d_out, int layer) override;
  std::int64_t num_rows() const override { return a_.num_rows(); }
  const Csr& matrix() const { return a_; }
  HaloAccess* halo_access() override { return this; }
  void upload(Device device) override;

 private:
  const Csr& pattern() const override { return a_; }
  std::span<const GlobalId> column_ids() const override;
  std::span<const NodeId> inner_rows() const override;
  std::span<const NodeId> boundary_rows() const override { return {}; }
  void start_forward(Tensor&, int) override {}
  void finish_forward(Tensor&) override {}
  void start_backward(Tensor&, int) override {}
  void finish_backward(Tensor&) override {}
  void poll() override {}

  Csr a_;
  Csr a_t_;  // empty when A is symmetric
  bool symmetric_ = false;
  Tensor operand_;                     // the bf16 rows of x or d_out (set_operand_dtype)
  mutable std::vector<GlobalId> ids_;  // 0..N-1, built on first use
  mutable std::vector<NodeId> rows_;   // 0..N-1, built on first use
};

}  // namespace tessera
