// SPDX-License-Identifier: Apache-2.0
// Compressed sparse rows: an owning Csr that validates itself on construction, and a cheap
// CsrView that kernels take. Row offsets and nnz are 64-bit; column indices are 32-bit NodeId
// (graphs past 2^31 nodes per part are refused). Also the graph constructions every layer
// needs: from an edge list, symmetrise, self loops, GCN and mean normalisation, transpose.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/device.h"

namespace tessera {

using NodeId = std::int32_t;      // node id inside one CSR (local, or global when it fits)
using GlobalId = std::int64_t;    // node id in the whole graph
using EdgeOffset = std::int64_t;  // position in indices/values; nnz

struct CsrView {
  std::int64_t num_rows = 0;
  std::int64_t num_cols = 0;
  const EdgeOffset* indptr = nullptr;  // (num_rows + 1)
  const NodeId* indices = nullptr;     // (nnz)
  const float* values = nullptr;       // (nnz), or null: every weight is 1
  // The matrix's copy on a GPU (Csr::upload), which the CUDA kernels multiply with; null when
  // it has none. Type-erased: a tessera::cuda::CudaCsr.
  const void* device_matrix = nullptr;
  EdgeOffset nnz() const { return num_rows ? indptr[num_rows] : 0; }
};

class Csr {
 public:
  Csr() : indptr_(1, 0) {}
  // Validates: indptr starts at 0, is non-decreasing, ends at indices.size(); every index in
  // [0, num_cols); values empty or the same length as indices. Throws InvalidInput otherwise.
  Csr(std::int64_t num_rows, std::int64_t num_cols, std::vector<EdgeOffset> indptr,
      std::vector<NodeId> indices, std::vector<float> values = {});

  // Rows = destinations, columns = sources: row v lists the u with an edge u -> v, so that
  // SpMM with this matrix aggregates messages from in-neighbours. Duplicates are merged (their
  // weights summed when weights are given, else kept once); columns sorted within each row.
  static Csr from_edges(std::int64_t num_nodes, std::span<const GlobalId> src,
                        std::span<const GlobalId> dst);

  std::int64_t num_rows() const { return num_rows_; }
  std::int64_t num_cols() const { return num_cols_; }
  EdgeOffset nnz() const { return static_cast<EdgeOffset>(indices_.size()); }
  bool has_values() const { return !values_.empty(); }
  const std::vector<EdgeOffset>& indptr() const { return indptr_; }
  const std::vector<NodeId>& indices() const { return indices_; }
  const std::vector<float>& values() const { return values_; }
  std::int64_t degree(std::int64_t row) const { return indptr_[row + 1] - indptr_[row]; }
  // Host arrays, plus the GPU copy when one was uploaded.
  CsrView view() const;
  // Uploads the matrix to `device` once (its descriptor and work buffers are reused by every
  // later multiply); the CPU needs nothing (drops a GPU copy). Copies of this Csr share it.
  // Throws Cuda when the device is not usable, InvalidArgument in a build without CUDA.
  void upload(Device device);

  // A^T (rows and columns swapped), values carried along; columns sorted within each row.
  Csr transpose() const;
  // A + A^T pattern (square only), duplicates merged, no values.
  Csr symmetrize() const;
  // Same pattern with the diagonal entries (r, r) present (added where missing, with weight 1
  // when there are values); needs num_rows <= num_cols. The rvalue form inserts them in this
  // matrix's own arrays, from the last row back, so that the result costs no second copy; the
  // const form copies, then does the same.
  Csr with_self_loops() const&;
  Csr with_self_loops() &&;
  // This pattern with `values` (one a stored entry) as its weights, in its own arrays.
  Csr with_values(std::vector<float> values) &&;
  // The arrays, handed over to be reworked in place; the matrix is left empty.
  struct Arrays {
    std::vector<EdgeOffset> indptr;
    std::vector<NodeId> indices;
    std::vector<float> values;
  };
  Arrays release() &&;
  // The entries in columns [0, num_cols) only, as a (num_rows, num_cols) matrix, compacted in
  // this matrix's own arrays; their spare capacity is given back when the dropped entries were
  // more than an eighth of them. Needs 0 <= num_cols <= this->num_cols().
  Csr columns_below(std::int64_t num_cols) &&;
  // Pattern without diagonal entries.
  Csr without_self_loops() const;

 private:
  std::int64_t num_rows_ = 0;
  std::int64_t num_cols_ = 0;
  std::vector<EdgeOffset> indptr_;
  std::vector<NodeId> indices_;
  std::vector<float> values_;
  std::shared_ptr<const void> device_matrix_;  // the CudaCsr of upload(); null on the CPU
  Device device_ = Device::cpu();  // where device_matrix_ lives
};

// Finishes a pattern built by bucketing (indptr final, each row's indices in any order, possibly
// repeated): sorts every row, drops repeats, compacts in place (giving the room back past an
// eighth of repeats) and validates. No values.
// Parallel over rows; the result does not depend on the thread count.
Csr csr_from_unsorted_rows(std::int64_t num_rows, std::int64_t num_cols,
                           std::vector<EdgeOffset> indptr, std::vector<NodeId> indices);

// In-neighbour CSR of a directed edge list (source, destination): row v lists the sources of the
// edges into v, columns sorted, repeated edges merged; with add_inverse_edge the reverse of every
// edge too. Ids must be in [0, num_nodes) (not checked). `edges` is released before the sort.
Csr csr_from_edges(std::int64_t num_nodes, std::vector<std::array<NodeId, 2>> edges,
                   bool add_inverse_edge);

// GCN weights on a pattern that already holds its self loops:
// w(v, u) = 1 / sqrt(deg(v) * deg(u)), deg taken from `row_degree` / `col_degree` (the global
// degrees of A + I, so that a part of the graph is weighted exactly as in the whole graph).
// Degrees of 0 give weight 0.
// Takes the pattern by value: pass an rvalue to weight it in its own arrays.
Csr gcn_normalized(Csr pattern, std::span<const float> row_degree,
                   std::span<const float> col_degree);
// Same, with degrees taken from the pattern itself (square, single-process case).
Csr gcn_normalized(const Csr& pattern_with_self_loops);
// Mean aggregation: w(v, u) = 1 / deg(v) over the row's entries (rows of degree 0 stay empty);
// by value, as gcn_normalized.
Csr mean_normalized(Csr pattern);

}  // namespace tessera
