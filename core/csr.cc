// SPDX-License-Identifier: Apache-2.0
// Csr validation and the graph constructions of csr.h. from_edges and transpose rest on one
// parallel *stable* counting sort (per-chunk histograms over contiguous input chunks), O(E + T*N)
// with T*N kept below E: columns come out sorted without a comparison sort, and every result
// is independent of the thread count. Row-wise passes (dedupe, merge, self loops) count first,
// then fill, both in parallel.
#include "core/csr.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"
#ifdef TESSERA_HAVE_CUDA
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/runtime.h"
#endif

namespace tessera {
namespace {

constexpr std::int64_t kMaxNodes = std::int64_t{1} << 31;     // NodeId is 32-bit signed
constexpr std::int64_t kSerialItems = std::int64_t{1} << 16;  // below this, one thread

// Number of input chunks for a counting sort of n items into k keys: one per thread, but never
// so many that the chunk histograms (chunks * k) outgrow the input.
int sort_chunks(std::int64_t n, std::int64_t k) {
  if (n < kSerialItems) return 1;
  const std::int64_t by_memory = n / std::max<std::int64_t>(k, 1);
  return static_cast<int>(std::clamp<std::int64_t>(by_memory, 1, omp_get_max_threads()));
}

// Stable counting sort. for_each(c, visit) calls visit(key, payload...) for every item of input
// chunk c in input order (chunks are consecutive pieces of the input). Then place(pos,
// payload...) receives each item's sorted position; equal keys keep input order. Returns the
// key offsets (num_keys + 1).
template <class ForEach, class Place>
std::vector<EdgeOffset> stable_counting_sort(int chunks, std::int64_t num_keys, ForEach for_each,
                                             Place place) {
  const auto k_count = static_cast<std::size_t>(num_keys);
  std::vector<EdgeOffset> cursor(static_cast<std::size_t>(chunks) * k_count, 0);  // (chunks, K)
#pragma omp parallel for schedule(static, 1) num_threads(chunks) if (chunks > 1)
  for (int c = 0; c < chunks; ++c) {
    EdgeOffset* count = cursor.data() + static_cast<std::size_t>(c) * k_count;
    for_each(c, [count](std::int64_t key, auto&&...) { ++count[key]; });
  }
  std::vector<EdgeOffset> offsets(k_count + 1, 0);
  const bool parallel_keys = num_keys * chunks >= kSerialItems;
#pragma omp parallel for schedule(static) if (parallel_keys)
  for (std::int64_t k = 0; k < num_keys; ++k) {
    EdgeOffset total = 0;
    for (int c = 0; c < chunks; ++c) total += cursor[static_cast<std::size_t>(c) * k_count + k];
    offsets[k + 1] = total;
  }
  for (std::size_t k = 0; k < k_count; ++k) offsets[k + 1] += offsets[k];
#pragma omp parallel for schedule(static) if (parallel_keys)
  for (std::int64_t k = 0; k < num_keys; ++k) {
    EdgeOffset next = offsets[k];
    for (int c = 0; c < chunks; ++c) {
      EdgeOffset& slot = cursor[static_cast<std::size_t>(c) * k_count + k];
      const EdgeOffset count = slot;
      slot = next;
      next += count;
    }
  }
#pragma omp parallel for schedule(static, 1) num_threads(chunks) if (chunks > 1)
  for (int c = 0; c < chunks; ++c) {
    EdgeOffset* next = cursor.data() + static_cast<std::size_t>(c) * k_count;
    for_each(
        c, [next, &place](std::int64_t key, auto&&... payload) { place(next[key]++, payload...); });
  }
  return offsets;
}

// Row boundaries cutting [0, rows) into `chunks` pieces of about equal edge counts.
std::vector<std::int64_t> split_rows_by_edges(const EdgeOffset* indptr, std::int64_t rows,
                                              int chunks) {
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(chunks) + 1, rows);
  bounds[0] = 0;
  const EdgeOffset nnz = indptr[rows];
  for (int c = 1; c < chunks; ++c) {
    const EdgeOffset target = nnz * c / chunks;
    bounds[static_cast<std::size_t>(c)] =
        std::lower_bound(indptr, indptr + rows + 1, target) - indptr;
    bounds[static_cast<std::size_t>(c)] = std::min(bounds[static_cast<std::size_t>(c)], rows);
  }
  return bounds;
}

struct CsrArrays {
  std::vector<EdgeOffset> indptr;
  std::vector<NodeId> indices;
  std::vector<float> values;
};

// The transpose of a (rows, cols) CSR: rows of the result are the columns, each listing the
// original rows in increasing order (stable sort keeps row order). values may be null.
CsrArrays transpose_arrays(std::int64_t rows, std::int64_t cols, const EdgeOffset* indptr,
                           const NodeId* indices, const float* values) {
  const EdgeOffset nnz = indptr[rows];
  CsrArrays out;
  out.indices.resize(static_cast<std::size_t>(nnz));
  if (values) out.values.resize(static_cast<std::size_t>(nnz));
  const int chunks = sort_chunks(nnz, cols);
  const std::vector<std::int64_t> bounds = split_rows_by_edges(indptr, rows, chunks);
  NodeId* out_indices = out.indices.data();
  float* out_values = out.values.data();
  out.indptr = stable_counting_sort(
      chunks, cols,
      [&](int c, auto&& visit) {
        for (std::int64_t r = bounds[static_cast<std::size_t>(c)];
             r < bounds[static_cast<std::size_t>(c) + 1]; ++r) {
          for (EdgeOffset j = indptr[r]; j < indptr[r + 1]; ++j) visit(indices[j], r, j);
        }
      },
      [&](EdgeOffset pos, std::int64_t r, EdgeOffset j) {
        out_indices[pos] = static_cast<NodeId>(r);
        if (values) out_values[pos] = values[j];
      });
  return out;
}

// Exclusive prefix sum in place: counts (n + 1 entries, counts in [1, n]) -> offsets.
void counts_to_offsets(std::vector<EdgeOffset>& indptr) {
  indptr[0] = 0;
  for (std::size_t i = 1; i < indptr.size(); ++i) indptr[i] += indptr[i - 1];
}

// Row-wise rebuild: count(r) gives the new length of row r, fill(r, out_indices, out_values)
// writes it (out_values null when the result has no values).
template <class Count, class Fill>
CsrArrays rebuild_rows(std::int64_t rows, bool with_values, Count count, Fill fill) {
  CsrArrays out;
  out.indptr.assign(static_cast<std::size_t>(rows) + 1, 0);
#pragma omp parallel for schedule(dynamic, 4096) if (rows >= kSerialItems / 8)
  for (std::int64_t r = 0; r < rows; ++r) out.indptr[r + 1] = count(r);
  counts_to_offsets(out.indptr);
  const auto nnz = static_cast<std::size_t>(out.indptr.back());
  out.indices.resize(nnz);
  if (with_values) out.values.resize(nnz);
#pragma omp parallel for schedule(dynamic, 4096) if (rows >= kSerialItems / 8)
  for (std::int64_t r = 0; r < rows; ++r) {
    const EdgeOffset at = out.indptr[r];
    fill(r, out.indices.data() + at, with_values ? out.values.data() + at : nullptr);
  }
  return out;
}

bool rows_sorted(const Csr& a) {
  const auto& indptr = a.indptr();
  const auto& indices = a.indices();
  bool sorted = true;
#pragma omp parallel for schedule(dynamic, 4096) reduction(&& : sorted) \
    if (a.nnz() >= kSerialItems)
  for (std::int64_t r = 0; r < a.num_rows(); ++r) {
    for (EdgeOffset j = indptr[r] + 1; j < indptr[r + 1]; ++j) {
      if (indices[j] < indices[j - 1]) sorted = false;
    }
  }
  return sorted;
}

void check_square(const Csr& a, const char* what) {
  TESSERA_CHECK(a.num_rows() == a.num_cols(), InvalidArgument, what,
                " needs a square matrix, found (", a.num_rows(), ", ", a.num_cols(), ")");
}

// 1 / sqrt(degree) per node, 0 for degree 0; degrees must be finite and >= 0.
std::vector<double> inv_sqrt_degrees(std::span<const float> degree, const char* name) {
  std::vector<double> out(degree.size());
  for (std::size_t i = 0; i < degree.size(); ++i) {
    const float d = degree[i];
    TESSERA_CHECK(std::isfinite(d) && d >= 0.0f, InvalidArgument, "gcn_normalized: ", name, "[", i,
                  "] = ", d, " is not a finite degree >= 0");
    out[i] = d > 0.0f ? 1.0 / std::sqrt(static_cast<double>(d)) : 0.0;
  }
  return out;
}

}  // namespace

Csr::Csr(std::int64_t num_rows, std::int64_t num_cols, std::vector<EdgeOffset> indptr,
         std::vector<NodeId> indices, std::vector<float> values)
    : num_rows_(num_rows),
      num_cols_(num_cols),
      indptr_(std::move(indptr)),
      indices_(std::move(indices)),
      values_(std::move(values)) {
  TESSERA_CHECK(num_rows >= 0 && num_cols >= 0, InvalidInput, "Csr: negative shape (", num_rows,
                ", ", num_cols, ")");
  TESSERA_CHECK(num_rows < kMaxNodes && num_cols < kMaxNodes, InvalidInput, "Csr: shape (",
                num_rows, ", ", num_cols, ") exceeds the 32-bit NodeId limit of 2^31 - 1 ",
                "rows and columns per part");
  TESSERA_CHECK(static_cast<std::int64_t>(indptr_.size()) == num_rows + 1, InvalidInput,
                "Csr: indptr must have num_rows + 1 = ", num_rows + 1, " entries, found ",
                indptr_.size());
  TESSERA_CHECK(indptr_[0] == 0, InvalidInput, "Csr: indptr[0] must be 0, found ", indptr_[0]);
  for (std::int64_t r = 0; r < num_rows; ++r) {
    TESSERA_CHECK(indptr_[r + 1] >= indptr_[r], InvalidInput,
                  "Csr: indptr must be non-decreasing, but indptr[", r + 1, "] = ", indptr_[r + 1],
                  " < indptr[", r, "] = ", indptr_[r]);
  }
  const auto nnz = static_cast<EdgeOffset>(indices_.size());
  TESSERA_CHECK(indptr_[num_rows] == nnz, InvalidInput,
                "Csr: indptr[num_rows] = ", indptr_[num_rows],
                " must equal the number of indices, ", nnz);
  EdgeOffset first_bad = nnz;
  const NodeId* idx = indices_.data();
#pragma omp parallel for schedule(static) reduction(min : first_bad) \
    if (nnz >= kSerialItems)
  for (EdgeOffset j = 0; j < nnz; ++j) {
    if ((idx[j] < 0 || idx[j] >= num_cols) && j < first_bad) first_bad = j;
  }
  if (first_bad < nnz) {
    const std::int64_t row =
        std::upper_bound(indptr_.begin(), indptr_.end(), first_bad) - indptr_.begin() - 1;
    TESSERA_FAIL(InvalidInput, "Csr: indices[", first_bad, "] = ", idx[first_bad], " (row ", row,
                 ") is outside [0, ", num_cols, ")");
  }
  TESSERA_CHECK(values_.empty() || values_.size() == indices_.size(), InvalidInput,
                "Csr: values must be empty or have nnz = ", nnz, " entries, found ",
                values_.size());
}

Csr Csr::from_edges(std::int64_t num_nodes, std::span<const GlobalId> src,
                    std::span<const GlobalId> dst) {
  TESSERA_CHECK(num_nodes >= 0 && num_nodes < kMaxNodes, InvalidInput, "from_edges: ", num_nodes,
                " nodes do not fit the 32-bit NodeId of a Csr (limit 2^31 - 1); partition the "
                "graph first");
  TESSERA_CHECK(src.size() == dst.size(), InvalidInput, "from_edges: ", src.size(), " sources but ",
                dst.size(), " destinations");
  const auto num_edges = static_cast<std::int64_t>(src.size());
  std::int64_t first_bad = num_edges;
#pragma omp parallel for schedule(static) reduction(min : first_bad) \
    if (num_edges >= kSerialItems)
  for (std::int64_t e = 0; e < num_edges; ++e) {
    const bool bad = src[e] < 0 || src[e] >= num_nodes || dst[e] < 0 || dst[e] >= num_nodes;
    if (bad && e < first_bad) first_bad = e;
  }
  TESSERA_CHECK(first_bad == num_edges, InvalidInput, "from_edges: edge ", first_bad, " (",
                src[first_bad], " -> ", dst[first_bad], ") has a node id outside [0, ", num_nodes,
                ")");

  // Pass 1: group edges by source (order inside a group does not matter).
  std::vector<NodeId> dst_by_src(static_cast<std::size_t>(num_edges));
  const int chunks = sort_chunks(num_edges, num_nodes);
  const std::vector<EdgeOffset> src_offsets = stable_counting_sort(
      chunks, num_nodes,
      [&](int c, auto&& visit) {
        const std::int64_t end = num_edges * (c + 1) / chunks;
        for (std::int64_t e = num_edges * c / chunks; e < end; ++e) visit(src[e], dst[e]);
      },
      [&](EdgeOffset pos, GlobalId v) { dst_by_src[pos] = static_cast<NodeId>(v); });
  // Pass 2: stable sort by destination, i.e. transpose: rows come out with sorted sources.
  CsrArrays sorted =
      transpose_arrays(num_nodes, num_nodes, src_offsets.data(), dst_by_src.data(), nullptr);
  dst_by_src = {};
  // Merge duplicates (adjacent after sorting); clean edge lists skip the copy.
  const EdgeOffset* indptr = sorted.indptr.data();
  const NodeId* cols = sorted.indices.data();
  auto is_first = [&](std::int64_t r, EdgeOffset j) {
    return j == indptr[r] || cols[j] != cols[j - 1];
  };
  EdgeOffset duplicates = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : duplicates) \
    if (num_edges >= kSerialItems)
  for (std::int64_t r = 0; r < num_nodes; ++r) {
    for (EdgeOffset j = indptr[r]; j < indptr[r + 1]; ++j) duplicates += !is_first(r, j);
  }
  if (duplicates == 0) {
    return Csr(num_nodes, num_nodes, std::move(sorted.indptr), std::move(sorted.indices));
  }
  CsrArrays merged = rebuild_rows(
      num_nodes, false,
      [&](std::int64_t r) {
        EdgeOffset n = 0;
        for (EdgeOffset j = indptr[r]; j < indptr[r + 1]; ++j) n += is_first(r, j);
        return n;
      },
      [&](std::int64_t r, NodeId* out, float*) {
        for (EdgeOffset j = indptr[r]; j < indptr[r + 1]; ++j) {
          if (is_first(r, j)) *out++ = cols[j];
        }
      });
  return Csr(num_nodes, num_nodes, std::move(merged.indptr), std::move(merged.indices));
}

CsrView Csr::view() const {
  return CsrView{num_rows_, num_cols_, indptr_.data(), indices_.data(),
                 values_.empty() ? nullptr : values_.data(), device_matrix_.get()};
}

void Csr::upload(Device device) {
  if (device.kind == DeviceKind::Cpu) {
    device_matrix_.reset();
    device_ = device;
    return;
  }
  if (device == device_ && device_matrix_) return;
#ifdef TESSERA_HAVE_CUDA
  cuda::require_device(device.index, "uploading a sparse matrix");
  device_matrix_ = std::make_shared<const cuda::CudaCsr>(view());
  device_ = device;
#else
  TESSERA_FAIL(InvalidArgument, "cannot upload a sparse matrix to ", to_string(device),
               ": this build has no CUDA backend");
#endif
}

Csr Csr::transpose() const {
  CsrArrays t = transpose_arrays(num_rows_, num_cols_, indptr_.data(), indices_.data(),
                                 has_values() ? values_.data() : nullptr);
  return Csr(num_cols_, num_rows_, std::move(t.indptr), std::move(t.indices), std::move(t.values));
}

Csr Csr::symmetrize() const {
  check_square(*this, "symmetrize");
  // Rows of A^T come out sorted; A's rows are sorted too unless the caller built them unsorted.
  const CsrArrays at =
      transpose_arrays(num_rows_, num_cols_, indptr_.data(), indices_.data(), nullptr);
  CsrArrays a_sorted;
  const bool sorted = rows_sorted(*this);
  if (!sorted) {
    a_sorted = transpose_arrays(num_cols_, num_rows_, at.indptr.data(), at.indices.data(), nullptr);
  }
  const EdgeOffset* a_ptr = sorted ? indptr_.data() : a_sorted.indptr.data();
  const NodeId* a_idx = sorted ? indices_.data() : a_sorted.indices.data();
  // Sorted union of row r of A and row r of A^T, each value once; emit(col) per output.
  auto merge_row = [&](std::int64_t r, auto&& emit) {
    EdgeOffset i = a_ptr[r], j = at.indptr[r];
    const EdgeOffset i_end = a_ptr[r + 1], j_end = at.indptr[r + 1];
    bool any = false;
    NodeId last = 0;
    while (i < i_end || j < j_end) {
      NodeId next;
      if (j >= j_end || (i < i_end && a_idx[i] <= at.indices[j])) {
        next = a_idx[i++];
      } else {
        next = at.indices[j++];
      }
      if (!any || next != last) emit(next);
      any = true;
      last = next;
    }
  };
  CsrArrays out = rebuild_rows(
      num_rows_, false,
      [&](std::int64_t r) {
        EdgeOffset n = 0;
        merge_row(r, [&](NodeId) { ++n; });
        return n;
      },
      [&](std::int64_t r, NodeId* dst, float*) { merge_row(r, [&](NodeId c) { *dst++ = c; }); });
  return Csr(num_rows_, num_cols_, std::move(out.indptr), std::move(out.indices));
}

Csr Csr::with_self_loops() const& { return Csr(*this).with_self_loops(); }

Csr Csr::with_self_loops() && {
  // Rows may be fewer than columns (a part's owned rows over owned + halo columns): the
  // diagonal is then (r, r) for every row r. A missing loop goes before the row's first larger
  // column, with weight 1 when the matrix carries values.
  TESSERA_CHECK(num_rows_ <= num_cols_, InvalidArgument, "with_self_loops: matrix is (", num_rows_,
                ", ", num_cols_, "), needs at least as many columns as rows");
  const bool weighted = has_values();
  const auto row_begin = [&](std::int64_t r) { return indices_.begin() + indptr_[r]; };
  const auto has_loop = [&](std::int64_t r) {
    return std::find(row_begin(r), row_begin(r + 1), static_cast<NodeId>(r)) != row_begin(r + 1);
  };
  EdgeOffset shift = 0;  // the loops still to insert, one a row without one
  for (std::int64_t r = 0; r < num_rows_; ++r) shift += has_loop(r) ? 0 : 1;
  indices_.resize(indices_.size() + static_cast<std::size_t>(shift));
  if (weighted) values_.resize(indices_.size());
  const auto move = [&](EdgeOffset from, EdgeOffset to, EdgeOffset by) {  // [from, to) right
    for (EdgeOffset j = to; j > from; --j) {
      indices_[j - 1 + by] = indices_[j - 1];
      if (weighted) values_[j - 1 + by] = values_[j - 1];
    }
  };
  // From the last row back, each row moves right by the loops inserted before it (and its own),
  // so that no entry is overwritten before it has moved. A loop goes where the copy above puts
  // it: before the row's first larger column.
  for (std::int64_t r = num_rows_ - 1; r >= 0 && shift > 0; --r) {
    const EdgeOffset begin = indptr_[r], end = indptr_[r + 1];
    const bool looped = has_loop(r);
    const EdgeOffset at =
        std::find_if(row_begin(r), row_begin(r + 1), [r](NodeId c) { return c > r; }) -
        indices_.begin();
    indptr_[r + 1] = end + shift;
    if (looped) {
      move(begin, end, shift);
      continue;
    }
    move(at, end, shift);
    indices_[at + shift - 1] = static_cast<NodeId>(r);
    if (weighted) values_[at + shift - 1] = 1.0f;
    --shift;
    move(begin, at, shift);
  }
  device_matrix_.reset();
  device_ = Device::cpu();
  return std::move(*this);
}

Csr Csr::with_values(std::vector<float> values) && {
  TESSERA_CHECK(static_cast<EdgeOffset>(values.size()) == nnz(), InvalidArgument,
                "with_values: ", values.size(), " values for ", nnz(), " entries");
  values_ = std::move(values);
  device_matrix_.reset();
  device_ = Device::cpu();
  return std::move(*this);
}

Csr::Arrays Csr::release() && {
  Arrays out{std::move(indptr_), std::move(indices_), std::move(values_)};
  *this = Csr();
  return out;
}

Csr Csr::columns_below(std::int64_t num_cols) && {
  TESSERA_CHECK(num_cols >= 0 && num_cols <= num_cols_, InvalidArgument,
                "columns_below: ", num_cols, " columns of a matrix of ", num_cols_);
  const bool weighted = has_values();
  EdgeOffset kept = 0, begin = 0;
  for (std::int64_t r = 0; r < num_rows_; ++r) {
    const EdgeOffset end = indptr_[r + 1];
    for (EdgeOffset j = begin; j < end; ++j) {
      if (indices_[j] >= num_cols) continue;
      indices_[kept] = indices_[j];
      if (weighted) values_[kept] = values_[j];
      ++kept;
    }
    indptr_[r + 1] = kept;
    begin = end;
  }
  const EdgeOffset dropped = nnz() - kept;
  indices_.resize(static_cast<std::size_t>(kept));
  if (weighted) values_.resize(static_cast<std::size_t>(kept));
  if (dropped > kept / 8) {
    indices_.shrink_to_fit();
    values_.shrink_to_fit();
  }
  num_cols_ = num_cols;
  device_matrix_.reset();
  device_ = Device::cpu();
  return std::move(*this);
}

Csr Csr::without_self_loops() const {
  const EdgeOffset* indptr = indptr_.data();
  const NodeId* idx = indices_.data();
  const float* val = has_values() ? values_.data() : nullptr;
  CsrArrays out = rebuild_rows(
      num_rows_, val != nullptr,
      [&](std::int64_t r) {
        EdgeOffset n = 0;
        for (EdgeOffset j = indptr[r]; j < indptr[r + 1]; ++j) n += idx[j] != r;
        return n;
      },
      [&](std::int64_t r, NodeId* dst_idx, float* dst_val) {
        for (EdgeOffset j = indptr[r]; j < indptr[r + 1]; ++j) {
          if (idx[j] == r) continue;
          *dst_idx++ = idx[j];
          if (dst_val) *dst_val++ = val[j];
        }
      });
  return Csr(num_rows_, num_cols_, std::move(out.indptr), std::move(out.indices),
             std::move(out.values));
}

// The pattern's own values, if any, are replaced. Weights are (1/sqrt(d_v)) * (1/sqrt(d_u)) in
// double, rounded once to float.
Csr csr_from_edges(std::int64_t num_nodes, std::vector<std::array<NodeId, 2>> edges,
                   bool add_inverse_edge) {
  // Counting sort by destination, then csr_from_unsorted_rows sorts each row.
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(num_nodes) + 1, 0);
  for (const auto& edge : edges) {
    ++indptr[edge[1] + 1];
    if (add_inverse_edge) ++indptr[edge[0] + 1];
  }
  for (std::int64_t r = 0; r < num_nodes; ++r) indptr[r + 1] += indptr[r];
  std::vector<EdgeOffset> fill(indptr.begin(), indptr.end() - 1);
  std::vector<NodeId> indices(static_cast<std::size_t>(indptr.back()));
  for (const auto& edge : edges) {
    indices[fill[edge[1]]++] = edge[0];
    if (add_inverse_edge) indices[fill[edge[0]]++] = edge[1];
  }
  std::vector<std::array<NodeId, 2>>().swap(edges);
  return csr_from_unsorted_rows(num_nodes, num_nodes, std::move(indptr), std::move(indices));
}

Csr gcn_normalized(Csr pattern, std::span<const float> row_degree,
                   std::span<const float> col_degree) {
  TESSERA_CHECK(static_cast<std::int64_t>(row_degree.size()) == pattern.num_rows(), InvalidArgument,
                "gcn_normalized: row_degree must have num_rows = ", pattern.num_rows(),
                " entries, found ", row_degree.size());
  TESSERA_CHECK(static_cast<std::int64_t>(col_degree.size()) == pattern.num_cols(), InvalidArgument,
                "gcn_normalized: col_degree must have num_cols = ", pattern.num_cols(),
                " entries, found ", col_degree.size());
  const std::vector<double> row_scale = inv_sqrt_degrees(row_degree, "row_degree");
  const std::vector<double> col_scale = inv_sqrt_degrees(col_degree, "col_degree");
  const EdgeOffset* indptr = pattern.indptr().data();
  const NodeId* idx = pattern.indices().data();
  std::vector<float> values(static_cast<std::size_t>(pattern.nnz()));
#pragma omp parallel for schedule(dynamic, 4096) if (pattern.nnz() >= kSerialItems)
  for (std::int64_t r = 0; r < pattern.num_rows(); ++r) {
    for (EdgeOffset j = indptr[r]; j < indptr[r + 1]; ++j) {
      values[static_cast<std::size_t>(j)] = static_cast<float>(row_scale[r] * col_scale[idx[j]]);
    }
  }
  return std::move(pattern).with_values(std::move(values));
}

// deg(x) = the number of entries of row x (x's in-degree counting its self loop), used for both
// ends of an edge, as PyG's gcn_norm does; on a symmetric pattern that is the plain degree.
Csr gcn_normalized(const Csr& pattern_with_self_loops) {
  const Csr& a = pattern_with_self_loops;
  check_square(a, "gcn_normalized");
  std::vector<float> degree(static_cast<std::size_t>(a.num_rows()));
  for (std::int64_t r = 0; r < a.num_rows(); ++r) {
    degree[static_cast<std::size_t>(r)] = static_cast<float>(a.degree(r));
  }
  return gcn_normalized(a, degree, degree);
}

Csr mean_normalized(Csr pattern) {
  std::vector<float> values(static_cast<std::size_t>(pattern.nnz()));
  const EdgeOffset* indptr = pattern.indptr().data();
#pragma omp parallel for schedule(dynamic, 4096) if (pattern.nnz() >= kSerialItems)
  for (std::int64_t r = 0; r < pattern.num_rows(); ++r) {
    const float w = static_cast<float>(1.0 / static_cast<double>(indptr[r + 1] - indptr[r]));
    std::fill(values.begin() + indptr[r], values.begin() + indptr[r + 1], w);
  }
  return std::move(pattern).with_values(std::move(values));
}

Csr csr_from_unsorted_rows(std::int64_t num_rows, std::int64_t num_cols,
                           std::vector<EdgeOffset> indptr, std::vector<NodeId> indices) {
  TESSERA_CHECK(num_rows >= 0 && static_cast<std::int64_t>(indptr.size()) == num_rows + 1,
                InvalidInput, "CSR: indptr has ", indptr.size(), " entries for ", num_rows,
                " rows");
  std::vector<EdgeOffset> kept(static_cast<std::size_t>(num_rows));  // (R) unique per row
#pragma omp parallel for schedule(dynamic, 1024)
  for (std::int64_t r = 0; r < num_rows; ++r) {
    NodeId* first = indices.data() + indptr[r];
    NodeId* last = indices.data() + indptr[r + 1];
    std::sort(first, last);
    kept[r] = std::unique(first, last) - first;
  }
  // Compact in row order (a row only moves towards the front).
  EdgeOffset out = 0;
  for (std::int64_t r = 0; r < num_rows; ++r) {
    const EdgeOffset begin = indptr[r];
    if (out != begin && kept[r] > 0)
      std::memmove(indices.data() + out, indices.data() + begin,
                   static_cast<std::size_t>(kept[r]) * sizeof(NodeId));
    indptr[r] = out;
    out += kept[r];
  }
  indptr[num_rows] = out;
  // The repeats' room is given back only when it is worth a copy of what is kept (beside it).
  const auto repeats = static_cast<EdgeOffset>(indices.size()) - out;
  indices.resize(static_cast<std::size_t>(out));
  if (repeats > out / 8) indices.shrink_to_fit();
  return Csr(num_rows, num_cols, std::move(indptr), std::move(indices));
}

}  // namespace tessera
