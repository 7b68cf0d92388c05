// SPDX-License-Identifier: Apache-2.0
// HaloPropagator: column split of the local operator at construction, then the overlapped
// forward and backward described in the header. Relies on the spmm/gather/scatter kernels.
#include "engine/halo_propagator.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/kernels.h"

namespace tessera {
namespace {

// Chunks of the overlapped SpMM: the exchange is polled this many times per aggregation.
constexpr std::int64_t kPollChunks = 16;

// The operator's halo columns (renumbered from 0) as a block of the rows that have any, with the
// rows' entries in their order; those rows, in order. The owned block is what is left of the
// operator: Csr::columns_below(N).
struct HaloBlock {
  Csr halo;
  std::vector<NodeId> boundary_rows;
};

// The block gets its exact size (a first pass counts it), so that no array grows by doubling
// beside the whole operator.
HaloBlock halo_columns(const Csr& a) {
  const std::int64_t n = a.num_rows(), h = a.num_cols() - n;
  const EdgeOffset* indptr = a.indptr().data();
  const NodeId* indices = a.indices().data();
  const float* values = a.has_values() ? a.values().data() : nullptr;
  const auto is_halo = [n](NodeId c) { return static_cast<std::int64_t>(c) >= n; };
  EdgeOffset halo_entries = 0;
  std::int64_t boundary = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const auto in_halo = static_cast<EdgeOffset>(
        std::count_if(indices + indptr[r], indices + indptr[r + 1], is_halo));
    halo_entries += in_halo;
    boundary += in_halo > 0;
  }
  const auto halo_size = static_cast<std::size_t>(halo_entries);
  std::vector<NodeId> halo_idx(halo_size);
  std::vector<float> halo_val(values ? halo_size : 0);
  std::vector<EdgeOffset> halo_ptr(1, 0);
  halo_ptr.reserve(static_cast<std::size_t>(boundary) + 1);
  HaloBlock out;
  out.boundary_rows.reserve(static_cast<std::size_t>(boundary));
  std::size_t next = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    for (EdgeOffset j = indptr[r]; j < indptr[r + 1]; ++j) {
      if (!is_halo(indices[j])) continue;
      halo_idx[next] = static_cast<NodeId>(indices[j] - n);
      if (values) halo_val[next] = values[j];
      ++next;
    }
    if (static_cast<EdgeOffset>(next) == halo_ptr.back()) continue;
    out.boundary_rows.push_back(static_cast<NodeId>(r));
    halo_ptr.push_back(static_cast<EdgeOffset>(next));
  }
  const auto b = static_cast<std::int64_t>(out.boundary_rows.size());
  out.halo = Csr(b, h, std::move(halo_ptr), std::move(halo_idx), std::move(halo_val));
  return out;
}

}  // namespace

HaloPropagator::HaloPropagator(Csr a, MatrixSymmetry owned_symmetry, HaloExchange& exchange,
                               std::span<const GlobalId> column_ids)
    : symmetric_(owned_symmetry == MatrixSymmetry::Symmetric), exchange_(exchange) {
  const std::int64_t n = a.num_rows();
  const std::int64_t h = a.num_cols() - n;
  TESSERA_CHECK(h >= 0, InvalidArgument, "HaloPropagator: operator is (", n, ", ", a.num_cols(),
                "), expected (N, N + H)");
  TESSERA_CHECK(column_ids.empty() || static_cast<std::int64_t>(column_ids.size()) == a.num_cols(),
                InvalidArgument, "HaloPropagator: ", column_ids.size(),
                " column ids for an operator of ", a.num_cols(), " columns");
  HaloBlock split = halo_columns(a);
  halo_ = std::move(split.halo);
  boundary_rows_ = std::move(split.boundary_rows);
  // The owned block is the operator less its halo columns, compacted in the operator's own
  // arrays; the attention path keeps the whole operator and compacts a copy.
  owned_ = column_ids.empty() ? std::move(a).columns_below(n) : Csr(a).columns_below(n);
  if (!symmetric_) owned_t_ = owned_.transpose();
  halo_t_ = halo_.transpose();
  boundary_list_ = DeviceIndexList(boundary_rows_);
  all_rows_.resize(static_cast<std::size_t>(n));
  std::iota(all_rows_.begin(), all_rows_.end(), NodeId{0});
  // How strongly each halo row enters this rank's output: Σ over its column of A[u][v]².
  halo_weight_.assign(static_cast<std::size_t>(h), 0.0);
  for (EdgeOffset j = 0; j < static_cast<EdgeOffset>(halo_.nnz()); ++j) {
    const double v = halo_.has_values() ? static_cast<double>(halo_.values()[j]) : 1.0;
    halo_weight_[static_cast<std::size_t>(halo_.indices()[j])] += v * v;
  }
  if (column_ids.empty()) return;
  pattern_ = std::move(a);
  column_ids_.assign(column_ids.begin(), column_ids.end());
  std::size_t next = 0;  // boundary_rows_ is sorted
  for (NodeId r = 0; r < static_cast<NodeId>(n); ++r) {
    if (next < boundary_rows_.size() && boundary_rows_[next] == r) {
      ++next;
    } else {
      inner_rows_.push_back(r);
    }
  }
}

void HaloPropagator::view_rows(Tensor& t) {
  const std::int64_t n = owned_.num_rows(), h = halo_.num_cols();
  check_shape(t, n + h, t.cols(), "HaloPropagator: the attention rows");
  owned_view_ = Tensor::borrow(t.f32(), n, t.cols(), DType::F32, t.device());
  halo_view_ = Tensor::borrow(t.f32() + n * t.cols(), h, t.cols(), DType::F32, t.device());
}

void HaloPropagator::start_forward(Tensor& rows, int layer) {
  if (!exchange_.has_traffic()) return;
  view_rows(rows);
  exchange_.start_forward(owned_view_, halo_view_, layer);
}

void HaloPropagator::finish_forward(Tensor& rows) {
  if (!exchange_.has_traffic()) return;
  view_rows(rows);
  exchange_.finish_forward(halo_view_);
}

void HaloPropagator::start_backward(Tensor& d_rows, int layer) {
  if (!exchange_.has_traffic()) return;
  view_rows(d_rows);
  exchange_.start_backward(halo_view_, layer);
}

void HaloPropagator::finish_backward(Tensor& d_rows) {
  if (!exchange_.has_traffic()) return;
  view_rows(d_rows);
  exchange_.finish_backward(owned_view_);
}

void HaloPropagator::share_receiver_weights() { exchange_.set_receiver_weights(halo_weight_); }

void HaloPropagator::upload(Device device) {
  for (Csr* a : {&owned_, &owned_t_, &halo_, &halo_t_})
    if (a->num_rows() > 0) a->upload(device);  // an empty one is never multiplied on a GPU
}

void HaloPropagator::reserve(std::int64_t width, Device device) {
  if (!exchange_.has_traffic()) return;  // nothing crosses
  if (operand_dtype() != DType::F32) {
    halo_operand_ =
        Tensor(std::max(halo_.num_rows(), halo_.num_cols()), width, operand_dtype(), device);
  }
  halo_rows_ = Tensor(halo_.num_cols(), width, DType::F32, device);
  exchange_.reserve(width, device, halo_.num_rows());
}

void HaloPropagator::overlapped_spmm(Tensor& out, const Csr& a, const Tensor& x) {
  if (!exchange_.active()) {
    spmm(out, a.view(), x);
    return;
  }
  if (x.device().kind != DeviceKind::Cpu) {
    exchange_.poll();  // issues the posted messages before the SpMM is queued
    spmm(out, a.view(), x);
    return;
  }
  const auto n = static_cast<std::int64_t>(all_rows_.size());
  const std::int64_t chunk = std::max<std::int64_t>(1, (n + kPollChunks - 1) / kPollChunks);
  for (std::int64_t begin = 0; begin < n; begin += chunk) {
    const std::int64_t count = std::min(chunk, n - begin);
    spmm_rows(out, a.view(), x,
              std::span<const NodeId>(all_rows_).subspan(static_cast<std::size_t>(begin),
                                                         static_cast<std::size_t>(count)));
    exchange_.poll();
  }
}

void HaloPropagator::forward(Tensor& out, const Tensor& x, int layer) {
  check_shape(x, owned_.num_rows(), x.cols(), "HaloPropagator::forward x");
  out.resize(owned_.num_rows(), x.cols(), x.device());  // (N, F)
  const bool exchanging = exchange_.has_traffic();
  if (exchanging) exchange_.start_forward(x, halo_rows_, layer);
  overlapped_spmm(out, owned_, operand(x, owned_operand_));
  if (!exchanging) return;
  exchange_.finish_forward(halo_rows_);
  if (boundary_rows_.empty()) return;
  Tensor boundary = exchange_.idle_rows(halo_.num_rows(), x.cols(), x.device());  // (B, F)
  spmm(boundary, halo_.view(), operand(halo_rows_, halo_operand_));
  scatter_add_rows(out, boundary, boundary_list_.on(out.device()));
}

void HaloPropagator::backward(Tensor& d_x, const Tensor& d_out, int layer) {
  check_shape(d_out, owned_.num_rows(), d_out.cols(), "HaloPropagator::backward d_out");
  const std::int64_t f = d_out.cols();
  d_x.resize(owned_.num_rows(), f, d_out.device());  // (N, F)
  const bool exchanging = exchange_.has_traffic();
  if (exchanging) {
    Tensor boundary = exchange_.idle_rows(halo_.num_rows(), f, d_out.device());  // (B, F)
    gather_rows(boundary, d_out, boundary_list_.on(d_out.device()));
    halo_rows_.resize_within(halo_.num_cols(), f, d_out.device());  // (H, F)
    spmm(halo_rows_, halo_t_.view(), operand(boundary, halo_operand_));
    exchange_.start_backward(halo_rows_, layer);
  }
  overlapped_spmm(d_x, symmetric_ ? owned_ : owned_t_, operand(d_out, owned_operand_));
  if (exchanging) exchange_.finish_backward(d_x);
}

}  // namespace tessera
