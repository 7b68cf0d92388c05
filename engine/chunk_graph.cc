// SPDX-License-Identifier: Apache-2.0
// Chunk layout (METIS on the owned subgraph), the operator renumbered into chunk order and cut
// into row blocks, the historical buffers and the chunk propagator over them.
#include "engine/chunk_graph.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/kernels.h"
#include "partition/metis_partition.h"

namespace tessera {

ChunkLayout make_chunks(const Csr& adjacency, std::span<const NodeId> train_rows, int chunks,
                        std::uint64_t seed) {
  const std::int64_t n = adjacency.num_rows();
  TESSERA_CHECK(chunks >= 1 && chunks <= n, InvalidArgument, "--chunks ", chunks,
                ": a part of ", n, " nodes can be cut into 1 to ", n, " chunks");
  std::vector<std::int32_t> owner(static_cast<std::size_t>(n), 0);
  if (chunks > 1) {
    // The owned block's pattern (N, N): METIS sees the edges inside the part only.
    std::vector<EdgeOffset> indptr(static_cast<std::size_t>(n) + 1, 0);
    std::vector<NodeId> indices;
    for (std::int64_t v = 0; v < n; ++v) {
      for (EdgeOffset e = adjacency.indptr()[v]; e < adjacency.indptr()[v + 1]; ++e) {
        const NodeId u = adjacency.indices()[e];
        if (u < n) indices.push_back(u);
      }
      indptr[static_cast<std::size_t>(v) + 1] = static_cast<EdgeOffset>(indices.size());
    }
    const Csr owned(n, n, std::move(indptr), std::move(indices));
    const std::vector<GlobalId> train(train_rows.begin(), train_rows.end());
    owner = partition_metis(owned, train, chunks, seed).owner;
  }
  ChunkLayout layout;
  layout.offsets.assign(static_cast<std::size_t>(chunks) + 1, 0);
  for (std::int32_t c : owner) ++layout.offsets[static_cast<std::size_t>(c) + 1];
  std::partial_sum(layout.offsets.begin(), layout.offsets.end(), layout.offsets.begin());
  layout.order.resize(static_cast<std::size_t>(n));
  layout.position.resize(static_cast<std::size_t>(n));
  std::vector<std::int64_t> next(layout.offsets.begin(), layout.offsets.end() - 1);
  for (std::int64_t v = 0; v < n; ++v) {
    const std::int64_t at = next[static_cast<std::size_t>(owner[static_cast<std::size_t>(v)])]++;
    layout.order[static_cast<std::size_t>(at)] = static_cast<NodeId>(v);
    layout.position[static_cast<std::size_t>(v)] = static_cast<NodeId>(at);
  }
  return layout;
}

namespace {

// Rows [first, last) of `a`, keeping the columns in [col_begin, col_end) shifted by -col_begin.
Csr row_block(const Csr& a, std::int64_t first, std::int64_t last, std::int64_t col_begin,
              std::int64_t col_end) {
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(last - first) + 1, 0);
  std::vector<NodeId> indices;
  std::vector<float> values;
  for (std::int64_t r = first; r < last; ++r) {
    for (EdgeOffset e = a.indptr()[r]; e < a.indptr()[r + 1]; ++e) {
      const NodeId c = a.indices()[e];
      if (c < col_begin || c >= col_end) continue;
      indices.push_back(static_cast<NodeId>(c - col_begin));
      if (a.has_values()) values.push_back(a.values()[e]);
    }
    indptr[static_cast<std::size_t>(r - first) + 1] = static_cast<EdgeOffset>(indices.size());
  }
  return Csr(last - first, col_end - col_begin, std::move(indptr), std::move(indices),
             std::move(values));
}

// `a` (N, N + H) with owned rows and columns permuted into chunk order (columns sorted again).
Csr in_chunk_order(const Csr& a, const ChunkLayout& layout) {
  const std::int64_t n = a.num_rows();
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(n) + 1, 0);
  std::vector<NodeId> indices(static_cast<std::size_t>(a.nnz()));
  std::vector<float> values(a.has_values() ? static_cast<std::size_t>(a.nnz()) : 0);
  std::vector<std::pair<NodeId, float>> row;
  EdgeOffset at = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const NodeId old = layout.order[static_cast<std::size_t>(r)];
    row.clear();
    for (EdgeOffset e = a.indptr()[old]; e < a.indptr()[old + 1]; ++e) {
      const NodeId c = a.indices()[e];
      row.emplace_back(c < n ? layout.position[static_cast<std::size_t>(c)] : c,
                       a.has_values() ? a.values()[e] : 1.0f);
    }
    std::sort(row.begin(), row.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [c, w] : row) {
      indices[static_cast<std::size_t>(at)] = c;
      if (a.has_values()) values[static_cast<std::size_t>(at)] = w;
      ++at;
    }
    indptr[static_cast<std::size_t>(r) + 1] = at;
  }
  return Csr(n, a.num_cols(), std::move(indptr), std::move(indices), std::move(values));
}

}  // namespace

ChunkedOperator::ChunkedOperator(const Csr& a, MatrixSymmetry owned_symmetry,
                                 const ChunkLayout& layout)
    : whole_(in_chunk_order(a, layout)), symmetric_(owned_symmetry == MatrixSymmetry::Symmetric) {
  const std::int64_t n = whole_.num_rows(), cols = whole_.num_cols();
  TESSERA_CHECK(static_cast<std::int64_t>(layout.order.size()) == n, InvalidArgument,
                "chunk layout of ", layout.order.size(), " rows for an operator of ", n);
  Csr owned_t;
  if (!symmetric_) owned_t = row_block(whole_, 0, n, 0, n).transpose();
  for (int c = 0; c < layout.num_chunks(); ++c) {
    const std::int64_t first = layout.begin(c), last = first + layout.size(c);
    owned_.push_back(row_block(whole_, first, last, 0, n));
    halo_.push_back(row_block(whole_, first, last, n, cols));
    if (!symmetric_) owned_t_.push_back(row_block(owned_t, first, last, 0, n));
  }
  halo_t_ = row_block(whole_, 0, n, n, cols).transpose();
}

void ChunkedOperator::upload(Device device) {
  // A block without rows is never multiplied on a GPU, nor is a chunk's halo block without
  // entries (every block of pipeline mode, which has no halo): neither gets a GPU copy.
  for (std::vector<Csr>* list : {&owned_, &owned_t_})
    for (Csr& a : *list)
      if (a.num_rows() > 0) a.upload(device);
  for (Csr& a : halo_)
    if (a.nnz() > 0) a.upload(device);
  if (halo_t_.num_rows() > 0) halo_t_.upload(device);
}

History::History(std::int64_t num_owned, std::int64_t num_halo, int first_layer, int num_layers,
                 Device device)
    : num_owned_(num_owned),
      num_halo_(num_halo),
      first_layer_(first_layer),
      device_(device),
      layers_(static_cast<std::size_t>(num_layers)) {}

History::Layer& History::layer(int l) {
  TESSERA_CHECK(has(l), Internal, "history of layer ", l, ": this stage keeps layers ",
                first_layer_, " to ", first_layer_ + static_cast<int>(layers_.size()) - 1);
  return layers_[static_cast<std::size_t>(l - first_layer_)];
}

History::Layer& History::sized(int l, std::int64_t f) {
  Layer& h = layer(l);
  if (h.inputs.cols() != f || h.inputs.rows() != num_owned_) {
    for (Tensor* t : {&h.inputs, &h.grads}) {
      t->resize(num_owned_, f, device_);
      t->zero();
    }
    // What other parts send back to this part's rows: only a part with halo rows has any (the
    // training graph is symmetric: no halo rows, no rows in other parts' halos either), so a
    // pipeline stage, whose part is the whole graph, keeps no (N, F) buffer for it.
    h.remote_grads.resize(num_halo_ > 0 ? num_owned_ : 0, f, device_);
    h.remote_grads.zero();
    for (Tensor* t : {&h.halo_inputs, &h.halo_grads}) {
      t->resize(num_halo_, f, device_);
      t->zero();
    }
  }
  return h;
}

void History::clear() {
  for (Layer& h : layers_)
    for (Tensor* t : {&h.inputs, &h.halo_inputs, &h.grads, &h.remote_grads, &h.halo_grads})
      t->zero();
}

void copy_rows_into(Tensor& dst, std::int64_t first, const Tensor& src) {
  TESSERA_CHECK(src.cols() == dst.cols() && first >= 0 && first + src.rows() <= dst.rows(),
                Internal, "copy_rows_into: ", src.shape_string(), " at row ", first, " of ",
                dst.shape_string());
  Tensor rows = borrow_rows(dst, first, src.rows());
  rows.copy_from(src);
}

void add_rows_from(Tensor& dst, const Tensor& src, std::int64_t first) {
  TESSERA_CHECK(src.cols() == dst.cols() && first >= 0 && first + dst.rows() <= src.rows(),
                Internal, "add_rows_from: rows ", first, " of ", src.shape_string(), " into ",
                dst.shape_string());
  axpy(dst, 1.0f, borrow_rows(src, first, dst.rows()));
}

ChunkPropagator::ChunkPropagator(const ChunkedOperator& op, History& history,
                                 const ChunkLayout& layout, int chunk,
                                 std::span<const GlobalId> owned_ids,
                                 std::span<const GlobalId> halo_ids)
    : op_(op),
      history_(history),
      layout_(layout),
      chunk_(chunk),
      owned_ids_(owned_ids),
      halo_ids_(halo_ids) {
  TESSERA_CHECK(static_cast<std::int64_t>(owned_ids.size()) == op.num_owned() &&
                    static_cast<std::int64_t>(halo_ids.size()) == op.num_halo(),
                InvalidArgument, "chunk propagator: ", owned_ids.size(), " owned and ",
                halo_ids.size(), " halo ids for an operator of ", op.num_owned(), " + ",
                op.num_halo(), " columns");
}

void ChunkPropagator::forward(Tensor& out, const Tensor& x, int layer) {
  const std::int64_t n = num_rows(), f = x.cols();
  check_shape(x, n, f, "ChunkPropagator::forward x");
  History::Layer& h = history_.sized(layer, f);
  copy_rows_into(h.inputs, layout_.begin(chunk_), x);  // this chunk's rows are fresh now
  out.resize(n, f, x.device());
  spmm(out, op_.owned(chunk_).view(), h.inputs);
  if (op_.halo(chunk_).nnz() > 0) {
    halo_part_.resize(n, f, x.device());
    spmm(halo_part_, op_.halo(chunk_).view(), h.halo_inputs);
    axpy(out, 1.0f, halo_part_);
  }
}

void ChunkPropagator::backward(Tensor& d_x, const Tensor& d_out, int layer) {
  const std::int64_t n = num_rows(), f = d_out.cols();
  check_shape(d_out, n, f, "ChunkPropagator::backward d_out");
  History::Layer& h = history_.sized(layer, f);
  copy_rows_into(h.grads, layout_.begin(chunk_), d_out);
  h.backward_used = true;
  d_x.resize(n, f, d_out.device());
  spmm(d_x, op_.owned_t(chunk_).view(), h.grads);
  if (op_.num_halo() > 0) add_rows_from(d_x, h.remote_grads, layout_.begin(chunk_));
}

HaloAccess* ChunkPropagator::halo_access() {
  if (!column_ids_.empty() || num_rows() == 0) return this;
  const Csr& a = op_.whole();
  const std::int64_t first = layout_.begin(chunk_), n = num_rows(), last = first + n;
  const auto own = [&](NodeId c) { return c >= first && c < last; };
  for (std::int64_t r = first; r < last; ++r)
    for (EdgeOffset e = a.indptr()[r]; e < a.indptr()[r + 1]; ++e)
      if (!own(a.indices()[e])) columns_.push_back(a.indices()[e]);
  std::sort(columns_.begin(), columns_.end());
  columns_.erase(std::unique(columns_.begin(), columns_.end()), columns_.end());
  // Each row: its own columns, then the others (both ascending, as in the operator's row).
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(n) + 1, 0);
  std::vector<NodeId> indices;
  std::vector<float> values;
  indices.reserve(static_cast<std::size_t>(a.indptr()[last] - a.indptr()[first]));
  for (std::int64_t r = first; r < last; ++r) {
    bool boundary = false;
    for (const bool owned_pass : {true, false}) {
      for (EdgeOffset e = a.indptr()[r]; e < a.indptr()[r + 1]; ++e) {
        const NodeId c = a.indices()[e];
        if (own(c) != owned_pass) continue;
        const auto other = std::lower_bound(columns_.begin(), columns_.end(), c);
        indices.push_back(static_cast<NodeId>(
            owned_pass ? c - first : n + (other - columns_.begin())));
        if (a.has_values()) values.push_back(a.values()[e]);
        boundary = boundary || !owned_pass;
      }
    }
    indptr[static_cast<std::size_t>(r - first) + 1] = static_cast<EdgeOffset>(indices.size());
    (boundary ? boundary_ : inner_).push_back(static_cast<NodeId>(r - first));
  }
  pattern_ = Csr(n, n + static_cast<std::int64_t>(columns_.size()), std::move(indptr),
                 std::move(indices), std::move(values));
  const std::int64_t owned = op_.num_owned();
  column_ids_.assign(owned_ids_.begin() + first, owned_ids_.begin() + last);
  for (const std::int64_t c : columns_) {
    column_ids_.push_back(c < owned ? owned_ids_[static_cast<std::size_t>(c)]
                                    : halo_ids_[static_cast<std::size_t>(c - owned)]);
    if (c < owned) {
      owned_columns_.push_back(static_cast<NodeId>(c));
    } else {
      halo_columns_.push_back(static_cast<NodeId>(c - owned));
    }
  }
  owned_list_ = DeviceIndexList(owned_columns_);
  halo_list_ = DeviceIndexList(halo_columns_);
  return this;
}

History::Layer& ChunkPropagator::pushed_layer(int layer, std::int64_t f) {
  History::Layer& h = history_.sized(layer, f);
  TESSERA_CHECK(h.pushed, Internal, "layer ", layer,
                " weights its edges itself but its history does not take pushed gradients");
  return h;
}

void ChunkPropagator::start_forward(Tensor& rows, int layer) {
  const std::int64_t n = num_rows(), f = rows.cols();
  check_shape(rows, pattern_.num_cols(), f, "ChunkPropagator::start_forward rows");
  layer_ = layer;
  History::Layer& h = pushed_layer(layer, f);
  copy_rows_into(h.inputs, layout_.begin(chunk_), borrow_rows(std::as_const(rows), 0, n));
}

// The columns' rows [n_c, n_c + X) of the chunk's tensor: the owned columns' then the halo ones'.
void ChunkPropagator::finish_forward(Tensor& rows) {
  History::Layer& h = history_.layer(layer_);
  const std::int64_t n = num_rows();
  const auto owned = std::ssize(owned_columns_), halo = std::ssize(halo_columns_);
  const Device device = rows.device();
  Tensor from_owned = borrow_rows(rows, n, owned);
  if (owned > 0) gather_rows(from_owned, h.inputs, owned_list_.on(device));
  Tensor from_halo = borrow_rows(rows, n + owned, halo);
  if (halo > 0) gather_rows(from_halo, h.halo_inputs, halo_list_.on(device));
}

void ChunkPropagator::start_backward(Tensor& d_rows, int layer) {
  const std::int64_t n = num_rows(), f = d_rows.cols();
  check_shape(d_rows, pattern_.num_cols(), f, "ChunkPropagator::start_backward d_rows");
  layer_ = layer;
  History::Layer& h = pushed_layer(layer, f);
  h.backward_used = true;
  const auto owned = std::ssize(owned_columns_), halo = std::ssize(halo_columns_);
  const Device device = d_rows.device();
  // The columns are distinct: every row adds into a row of its own.
  if (owned > 0)
    scatter_add_rows(h.grads, borrow_rows(std::as_const(d_rows), n, owned), owned_list_.on(device));
  if (halo > 0)
    scatter_add_rows(h.halo_grads, borrow_rows(std::as_const(d_rows), n + owned, halo),
                     halo_list_.on(device));
}

void ChunkPropagator::finish_backward(Tensor& d_rows) {
  History::Layer& h = history_.layer(layer_);
  const std::int64_t n = num_rows(), first = layout_.begin(chunk_);
  Tensor own = borrow_rows(d_rows, 0, n);
  Tensor pushed = borrow_rows(h.grads, first, n);
  axpy(own, 1.0f, pushed);
  if (op_.num_halo() > 0) add_rows_from(own, h.remote_grads, first);  // the other parts'
  pushed.zero();                                                      // taken
}

}  // namespace tessera
