// SPDX-License-Identifier: Apache-2.0
// HaloPropagator: the aggregation A·X of one rank's part, with the halo exchange overlapped.
// A (N, N + H) is split by columns into the owned block A_own (N, N) and the halo block of the
// boundary rows A_halo (B, H). Forward: start sending owned rows, aggregate A_own·X for all
// rows in chunks while polling the exchange, then add A_halo·halo into the boundary rows.
// Backward: d_halo = A_halo^T·d_out[boundary] goes back to the owners first, then
// d_x = A_own^T·d_out in chunks while polling, then the owners' contributions are added.
// With one part there is no halo and this is exactly the single-process SpMM.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/halo_exchange.h"
#include "core/csr.h"
#include "layers/propagator.h"

namespace tessera {

// With column ids it also offers the attention path (HaloAccess): the whole pattern, kept, and
// the exchange of a layer's own (N + H)-row tensors.
class HaloPropagator final : public Propagator, private HaloAccess {
 public:
  // `a`: (N, N + H) weighted operator in local ids. owned_symmetry: whether A_own equals its
  // transpose (true for GCN weights on a symmetric graph), so backward reuses it. column_ids
  // (N + H global ids: the owned rows', then the halo rows'), when given, keeps `a` for
  // halo_access(); otherwise `a` is freed once split into its blocks (pass it by std::move to
  // hold it only once).
  HaloPropagator(Csr a, MatrixSymmetry owned_symmetry, HaloExchange& exchange,
                 std::span<const GlobalId> column_ids = {});
  void forward(Tensor& out, const Tensor& x, int layer) override;
  void backward(Tensor& d_x, const Tensor& d_out, int layer) override;
  std::int64_t num_rows() const override { return owned_.num_rows(); }
  HaloAccess* halo_access() override { return column_ids_.empty() ? nullptr : this; }

  std::int64_t nnz() const { return owned_.nnz() + halo_.nnz(); }

  // Puts the operator on `device` (once): a GPU run aggregates there, while its exchange moves
  // the halo rows between the GPUs (an NCCL communicator).
  void upload(Device device) override;
  // Sizes the halo buffers (received rows or halo gradients, gathered send rows) on `device` for
  // the widest exchange of the model, which every narrower layer then reuses; with a bf16
  // operand dtype (set it first) also the halo's bf16 rows the SpMMs read. The owned rows' bf16
  // workspace grows to the widest rows it rounds: the layers that keep their sums in bf16 hand
  // over rows already rounded (layers/conv_common.h, bf16_operand). The boundary rows' sums
  // (B, F) (A_halo·halo forward, d_out of the boundary rows backward) live in the exchange's
  // send rows between its exchanges (HaloExchange::idle_rows): the two are never needed at once.
  void reserve(std::int64_t width, Device device);
  // Sends each halo row's weight in this rank's aggregation (Σ of its column's squared
  // entries) to the row's owner and receives those of its own rows: the adaptive codec plans
  // bits with them (a no-op for the other codecs). Point-to-point with every peer: call it
  // outside agreed phases, once every rank has built its propagator.
  void share_receiver_weights();

 private:
  // spmm of `a` over all its rows in chunks, polling the exchange between chunks; on a GPU one
  // SpMM on the compute stream while the exchange runs on the communication stream.
  void overlapped_spmm(Tensor& out, const Csr& a, const Tensor& x);

  // HaloAccess (see layers/propagator.h).
  const Csr& pattern() const override { return pattern_; }
  std::span<const GlobalId> column_ids() const override { return column_ids_; }
  std::span<const NodeId> inner_rows() const override { return inner_rows_; }
  std::span<const NodeId> boundary_rows() const override { return boundary_rows_; }
  void start_forward(Tensor& rows, int layer) override;
  void finish_forward(Tensor& rows) override;
  void start_backward(Tensor& d_rows, int layer) override;
  void finish_backward(Tensor& d_rows) override;
  void poll() override { exchange_.poll(); }
  // owned_view_ and halo_view_ over rows [0, N) and [N, N + H) of t.
  void view_rows(Tensor& t);

  Csr owned_;    // (N, N)
  Csr owned_t_;  // (N, N) transpose; empty when owned_ is symmetric
  Csr halo_;     // (B, H) halo columns of the boundary rows
  Csr halo_t_;   // (H, B)
  bool symmetric_ = false;
  std::vector<NodeId> boundary_rows_;  // (B) local rows with a halo column
  DeviceIndexList boundary_list_;      // boundary_rows_ where a tensor's device reads them
  std::vector<NodeId> all_rows_;       // (N) 0..N-1, sliced into chunks
  HaloExchange& exchange_;
  // (H, F) the received halo rows (forward), or the gradients for their owners (backward): one
  // tensor for both, since the exchange has one message set in flight at a time and the
  // forward is done with its rows when it returns.
  Tensor halo_rows_;
  // The bf16 rows the SpMMs read under set_operand_dtype(BF16): the owned rows of x or d_out
  // (N, F) when they come in f32 (grown to the widest), the received halo rows or the boundary
  // rows' gradients (H or B, F).
  Tensor owned_operand_, halo_operand_;
  std::vector<double> halo_weight_;  // (H) for share_receiver_weights
  // The attention path: empty without column ids.
  Csr pattern_;                       // (N, N + H) the whole operator
  std::vector<GlobalId> column_ids_;  // (N + H)
  std::vector<NodeId> inner_rows_;    // rows with no halo column
  Tensor owned_view_, halo_view_;     // borrowed rows of the layer's tensor in flight
};

}  // namespace tessera
