// SPDX-License-Identifier: Apache-2.0
// Propagator: the aggregation step A·X of a layer, behind an interface so that the same layer
// code runs on one process (LocalPropagator: a CSR and its transpose) and on many ranks (a halo
// exchanging propagator in engine/, which fetches halo rows before aggregating boundary rows
// and sends halo gradients back to their owners in backward).
#pragma once

#include "core/csr.h"
#include "core/tensor.h"

namespace tessera {

class Propagator {
 public:
  virtual ~Propagator() = default;
  // out (N, F) = A x, x (N, F): the owned rows (halo rows, if any, are the propagator's business).
  // `layer` tags the call for traffic accounting and message keys.
  virtual void forward(Tensor& out, const Tensor& x, int layer) = 0;
  // d_x (N, F) = A^T d_out: overwritten, including contributions that come back from halos.
  virtual void backward(Tensor& d_x, const Tensor& d_out, int layer) = 0;
  virtual std::int64_t num_rows() const = 0;
};

// Single process: A (N, N) weighted CSR; A^T is built once at construction, unless the caller
// states that A is symmetric (values included, as the GCN operator D^-1/2 (A+I) D^-1/2 of a
// symmetric graph is), in which case backward reuses A and no second copy is held.
enum class MatrixSymmetry { General, Symmetric };

class LocalPropagator final : public Propagator {
 public:
  explicit LocalPropagator(Csr a, MatrixSymmetry symmetry = MatrixSymmetry::General);
  void forward(Tensor& out, const Tensor& x, int layer) override;
  void backward(Tensor& d_x, const Tensor& d_out, int layer) override;
  std::int64_t num_rows() const override { return a_.num_rows(); }
  const Csr& matrix() const { return a_; }

 private:
  Csr a_;
  Csr a_t_;  // empty when A is symmetric
  bool symmetric_ = false;
};

}  // namespace tessera
