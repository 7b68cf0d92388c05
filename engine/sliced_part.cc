// SPDX-License-Identifier: Apache-2.0
// sliced_block_part: a rank's block part from its slice of an HDF5 dataset and three exchanges
// with the other ranks (reverse entries, halo requests, halo degrees), each a count agreement
// (one all-reduce of the K x K counts) and point-to-point messages.
#include "engine/sliced_part.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "datasets/loaders.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

constexpr int kReverseTag = 0x5c11;
constexpr int kRequestTag = 0x5c12;
constexpr int kDegreeTag = 0x5c13;
constexpr int kRowTag = 0x5c20;  // .. 0x5c25: per-node data moved to its owner

// Sends out[q] to every peer q and returns what each peer sent here (in[q]; in[self] is
// out[self]). The K x K counts are agreed first through one all-reduce.
template <class T>
std::vector<std::vector<T>> exchange(Communicator& comm, std::vector<std::vector<T>> out, int tag) {
  const int k = comm.size(), me = comm.rank();
  std::vector<std::int64_t> counts(static_cast<std::size_t>(k) * static_cast<std::size_t>(k), 0);
  for (int q = 0; q < k; ++q) {
    counts[static_cast<std::size_t>(me * k + q)] =
        static_cast<std::int64_t>(out[static_cast<std::size_t>(q)].size());
  }
  comm.all_reduce_max(counts);
  std::vector<std::vector<T>> in(static_cast<std::size_t>(k));
  in[static_cast<std::size_t>(me)] = std::move(out[static_cast<std::size_t>(me)]);
  std::vector<std::unique_ptr<Request>> requests;
  for (int q = 0; q < k; ++q) {
    if (q == me) continue;
    auto& from = in[static_cast<std::size_t>(q)];
    from.resize(static_cast<std::size_t>(counts[static_cast<std::size_t>(q * k + me)]));
    if (!from.empty())
      requests.push_back(comm.irecv(std::as_writable_bytes(std::span(from)), q, tag));
  }
  for (int q = 0; q < k; ++q) {
    const auto& to = out[static_cast<std::size_t>(q)];
    if (q != me && !to.empty()) {
      requests.push_back(comm.isend(std::as_bytes(std::span(to)), q, tag, TrafficCategory::Setup));
    }
  }
  for (auto& request : requests) request->wait();
  return in;
}

// Who owns each node: the block partition (boundaries only: part q owns [first(q), first(q + 1)),
// no array of N owners), or a plan's owners. owned() are this rank's nodes, increasing; local(v)
// is the index among them of a node owned here.
class Owners {
 public:
  Owners(std::int64_t n, int k, int me) : n_(n), k_(k), me_(me) {
    for (GlobalId v = first(me); v < first(me + 1); ++v) owned_.push_back(v);
  }
  Owners(const PartitionPlan& plan, int me)
      : n_(static_cast<std::int64_t>(plan.owner.size())),
        k_(plan.num_parts),
        me_(me),
        plan_(&plan),
        local_(plan.owner.size(), -1) {
    for (std::int64_t v = 0; v < n_; ++v) {
      if (plan.owner[static_cast<std::size_t>(v)] != me) continue;
      local_[static_cast<std::size_t>(v)] = static_cast<NodeId>(owned_.size());
      owned_.push_back(v);
    }
  }
  int k() const { return k_; }
  int me() const { return me_; }
  bool block() const { return plan_ == nullptr; }
  std::int64_t first(int q) const { return block_first(n_, k_, q); }
  int of(GlobalId v) const {
    return plan_ ? plan_->owner[static_cast<std::size_t>(v)] : block_part_of(n_, k_, v);
  }
  bool owns(GlobalId v) const { return v >= 0 && v < n_ && of(v) == me_; }
  const std::vector<GlobalId>& owned() const { return owned_; }
  NodeId local(GlobalId v) const {
    return plan_ ? local_[static_cast<std::size_t>(v)] : static_cast<NodeId>(v - first(me_));
  }
  // Halo order: by owner, then by id (PartBuilder's).
  bool before(GlobalId a, GlobalId b) const { return std::pair(of(a), a) < std::pair(of(b), b); }

 private:
  std::int64_t n_ = 0;
  int k_ = 1;
  int me_ = 0;
  const PartitionPlan* plan_ = nullptr;
  std::vector<GlobalId> owned_;
  std::vector<NodeId> local_;  // (N) with a plan: local(v) of owned nodes, -1 elsewhere
};

// Whether each entry's reverse is an entry of the slice too (its row is in the slice and lists
// the entry's row; read_csr_rows checked that rows are sorted).
std::vector<bool> mirrored_entries(const DatasetSlice& s) {
  const EdgeOffset* indptr = s.rows.indptr().data();
  const NodeId* indices = s.rows.indices().data();
  std::vector<bool> mirrored(static_cast<std::size_t>(s.rows.nnz()));
  for (std::int64_t r = 0; r < s.row_end - s.row_begin; ++r) {
    for (EdgeOffset e = indptr[r]; e < indptr[r + 1]; ++e) {
      const std::int64_t u = indices[e] - s.row_begin;
      if (u < 0 || u >= s.row_end - s.row_begin) continue;
      mirrored[static_cast<std::size_t>(e)] = std::binary_search(
          indices + indptr[u], indices + indptr[u + 1], static_cast<NodeId>(s.row_begin + r));
    }
  }
  return mirrored;
}

// Rows of the symmetrised training graph (no self loops) for the owned nodes, as a CSR of global
// columns, sorted and unique: every entry (v, u) of every slice and its reverse (u, v), each sent
// to the owner of its row (kept when that is this rank). A reverse that the slice holds itself
// is not added again, so that a file storing both directions costs one entry an edge here; the
// rows are counted first and filled in place (4 bytes an entry, as the slice).
Csr training_rows(const DatasetSlice& s, const Owners& owners, Communicator& comm) {
  const EdgeOffset* indptr = s.rows.indptr().data();
  const NodeId* indices = s.rows.indices().data();
  const std::vector<bool> mirrored = mirrored_entries(s);
  const auto each_pair = [&](auto&& pair) {  // pair(row, column), each kept entry
    for (std::int64_t r = 0; r < s.row_end - s.row_begin; ++r) {
      const GlobalId v = s.row_begin + r;
      for (EdgeOffset e = indptr[r]; e < indptr[r + 1]; ++e) {
        const GlobalId u = indices[e];
        if (u == v) continue;
        pair(v, u);
        if (!mirrored[static_cast<std::size_t>(e)]) pair(u, v);
      }
    }
  };
  const int k = owners.k(), me = owners.me();
  const std::size_t n = owners.owned().size();
  std::vector<EdgeOffset> row_ptr(n + 1, 0);
  std::vector<std::size_t> sent(static_cast<std::size_t>(k), 0);
  each_pair([&](GlobalId row, GlobalId) {
    const int q = owners.of(row);
    if (q == me) {
      ++row_ptr[static_cast<std::size_t>(owners.local(row)) + 1];
    } else {
      sent[static_cast<std::size_t>(q)] += 2;
    }
  });
  std::vector<std::vector<GlobalId>> out(static_cast<std::size_t>(k));  // (row, column) pairs
  for (int q = 0; q < k; ++q)
    out[static_cast<std::size_t>(q)].reserve(sent[static_cast<std::size_t>(q)]);
  each_pair([&](GlobalId row, GlobalId col) {
    const int q = owners.of(row);
    if (q == me) return;
    out[static_cast<std::size_t>(q)].push_back(row);
    out[static_cast<std::size_t>(q)].push_back(col);
  });
  const std::vector<std::vector<GlobalId>> in = exchange(comm, std::move(out), kReverseTag);
  for (const auto& from : in) {
    for (std::size_t i = 0; i + 1 < from.size(); i += 2)
      ++row_ptr[static_cast<std::size_t>(owners.local(from[i])) + 1];
  }
  for (std::size_t r = 0; r < n; ++r) row_ptr[r + 1] += row_ptr[r];
  std::vector<NodeId> columns(static_cast<std::size_t>(row_ptr[n]));
  std::vector<EdgeOffset> next(row_ptr.begin(), row_ptr.end() - 1);
  const auto put = [&](GlobalId row, GlobalId col) {
    columns[static_cast<std::size_t>(next[static_cast<std::size_t>(owners.local(row))]++)] =
        static_cast<NodeId>(col);
  };
  each_pair([&](GlobalId row, GlobalId col) {
    if (owners.of(row) == me) put(row, col);
  });
  for (const auto& from : in) {
    for (std::size_t i = 0; i + 1 < from.size(); i += 2) put(from[i], from[i + 1]);
  }
  return csr_from_unsorted_rows(static_cast<std::int64_t>(n), s.num_nodes, std::move(row_ptr),
                                std::move(columns));
}

// The block plan's fingerprint (plan_fingerprint of partition_block) without its N owners in
// memory: the owner section hashed a block of nodes at a time.
std::uint64_t block_plan_fingerprint(const Owners& blocks) {
  Hasher hasher;
  hasher.add_word(static_cast<std::uint64_t>(blocks.k()));
  hasher.begin_section(1, static_cast<std::uint64_t>(blocks.first(blocks.k())));
  std::vector<std::int32_t> owners;
  for (int q = 0; q < blocks.k(); ++q) {
    for (std::int64_t v = blocks.first(q); v < blocks.first(q + 1);) {
      const std::int64_t count = std::min<std::int64_t>(1 << 20, blocks.first(q + 1) - v);
      owners.assign(static_cast<std::size_t>(count), q);
      hasher.add_piece(std::span<const std::int32_t>(owners));
      v += count;
    }
  }
  hasher.end_section();
  return hasher.finish();
}

// The halo (columns owned elsewhere, grouped by owner, increasing within), the local adjacency
// (the rows' own arrays, renumbered in place), and the receive offsets.
void localise(LocalGraph& g, Csr rows, const Owners& owners) {
  const std::int64_t n = g.num_owned();
  const auto here = [&](GlobalId u) { return owners.of(u) == owners.me(); };
  for (const NodeId u : rows.indices()) {
    if (!here(u)) g.halo_ids.push_back(u);
  }
  const auto before = [&](GlobalId a, GlobalId b) { return owners.before(a, b); };
  std::sort(g.halo_ids.begin(), g.halo_ids.end(), before);
  g.halo_ids.erase(std::unique(g.halo_ids.begin(), g.halo_ids.end()), g.halo_ids.end());
  TESSERA_CHECK(n + g.num_halo() < (std::int64_t{1} << 31), InvalidInput, "part ", g.part, " has ",
                n + g.num_halo(), " local nodes; local ids are 32-bit");
  Csr::Arrays a = std::move(rows).release();
  for (std::int64_t r = 0; r < n; ++r) {
    const auto first = a.indices.begin() + a.indptr[static_cast<std::size_t>(r)];
    const auto last = a.indices.begin() + a.indptr[static_cast<std::size_t>(r) + 1];
    for (auto it = first; it != last; ++it) {
      const GlobalId u = *it;
      *it = here(u) ? owners.local(u)
                    : static_cast<NodeId>(
                          n + (std::lower_bound(g.halo_ids.begin(), g.halo_ids.end(), u, before) -
                               g.halo_ids.begin()));
    }
    std::sort(first, last);
  }
  g.adjacency = Csr(n, n + g.num_halo(), std::move(a.indptr), std::move(a.indices));
  g.halo.recv_offsets.assign(static_cast<std::size_t>(owners.k()) + 1, 0);
  for (const GlobalId u : g.halo_ids)
    ++g.halo.recv_offsets[static_cast<std::size_t>(owners.of(u)) + 1];
  for (int q = 0; q < owners.k(); ++q) {
    g.halo.recv_offsets[static_cast<std::size_t>(q) + 1] +=
        g.halo.recv_offsets[static_cast<std::size_t>(q)];
  }
}

// The send lists (what each peer holds of this rank's rows as halo) and every local node's
// degree in the whole training graph plus its self loop (the halo's from their owners).
void plan_halo(LocalGraph& g, const Owners& owners, Communicator& comm) {
  const int k = g.num_parts;
  const std::int64_t n = g.num_owned();
  std::vector<std::vector<GlobalId>> wanted(static_cast<std::size_t>(k));
  for (int q = 0; q < k; ++q) {
    wanted[static_cast<std::size_t>(q)].assign(
        g.halo_ids.begin() + g.halo.recv_offsets[static_cast<std::size_t>(q)],
        g.halo_ids.begin() + g.halo.recv_offsets[static_cast<std::size_t>(q) + 1]);
  }
  const std::vector<std::vector<GlobalId>> requested = exchange(comm, wanted, kRequestTag);
  g.degrees.resize(static_cast<std::size_t>(n + g.num_halo()));
  for (std::int64_t r = 0; r < n; ++r)
    g.degrees[static_cast<std::size_t>(r)] = static_cast<float>(g.adjacency.degree(r) + 1);
  g.halo.send_offsets.assign(static_cast<std::size_t>(k) + 1, 0);
  g.halo.send_rows.clear();
  std::vector<std::vector<float>> degrees(static_cast<std::size_t>(k));
  for (int q = 0; q < k; ++q) {
    for (const GlobalId v : requested[static_cast<std::size_t>(q)]) {
      TESSERA_CHECK(owners.owns(v), InvalidInput, "part ", g.part, ": rank ", q, " asked for node ",
                    v, ", which this part does not own");
      const NodeId local = owners.local(v);
      g.halo.send_rows.push_back(local);
      degrees[static_cast<std::size_t>(q)].push_back(g.degrees[static_cast<std::size_t>(local)]);
    }
    g.halo.send_offsets[static_cast<std::size_t>(q) + 1] =
        static_cast<std::int64_t>(g.halo.send_rows.size());
  }
  // send_rows for peer q came in q's halo order: increasing global id, so increasing local id.
  const std::vector<std::vector<float>> halo_degrees =
      exchange(comm, std::move(degrees), kDegreeTag);
  for (int q = 0; q < k; ++q) {
    const auto& from = halo_degrees[static_cast<std::size_t>(q)];
    TESSERA_CHECK(static_cast<std::int64_t>(from.size()) == g.halo.recv_count(q), InvalidInput,
                  "part ", g.part, ": rank ", q, " sent ", from.size(), " degrees for ",
                  g.halo.recv_count(q), " halo nodes");
    std::copy(from.begin(), from.end(),
              g.degrees.begin() + n + g.halo.recv_offsets[static_cast<std::size_t>(q)]);
  }
}

// The local rows of split nodes (global ids owned here), increasing.
std::vector<NodeId> local_rows(const std::vector<GlobalId>& ids, const Owners& owners) {
  std::vector<NodeId> rows;
  rows.reserve(ids.size());
  for (const GlobalId v : ids) rows.push_back(owners.local(v));
  std::sort(rows.begin(), rows.end());
  return rows;
}

// Rows [0, rows) of `values` (width `width` per row) sent to the owners of the slice's nodes;
// returns this rank's owned rows, in increasing id: peer q's come from q's slice, and the slices
// increase with q.
template <class T>
std::vector<T> rows_to_owners(const DatasetSlice& s, const T* values, std::int64_t width,
                              const Owners& owners, Communicator& comm, int tag) {
  std::vector<std::vector<T>> out(static_cast<std::size_t>(owners.k()));
  for (std::int64_t r = 0; r < s.row_end - s.row_begin; ++r) {
    auto& to = out[static_cast<std::size_t>(owners.of(s.row_begin + r))];
    to.insert(to.end(), values + r * width, values + (r + 1) * width);
  }
  std::vector<T> in_order;
  for (auto& from : exchange(comm, std::move(out), tag))
    in_order.insert(in_order.end(), from.begin(), from.end());
  return in_order;
}

// Split ids sent to their owners.
std::vector<GlobalId> ids_to_owners(const std::vector<GlobalId>& ids, const Owners& owners,
                                    Communicator& comm, int tag) {
  std::vector<std::vector<GlobalId>> out(static_cast<std::size_t>(owners.k()));
  for (const GlobalId v : ids) out[static_cast<std::size_t>(owners.of(v))].push_back(v);
  std::vector<GlobalId> mine;
  for (auto& from : exchange(comm, std::move(out), tag))
    mine.insert(mine.end(), from.begin(), from.end());
  return mine;
}

Tensor matrix_to_owners(const DatasetSlice& s, const Tensor& m, const Owners& owners,
                        Communicator& comm, int tag) {
  TESSERA_CHECK(m.dtype() == DType::F32, InvalidInput, "sliced parts move float32 rows only");
  const std::vector<float> rows = rows_to_owners(s, m.f32(), m.cols(), owners, comm, tag);
  const auto n = static_cast<std::int64_t>(owners.owned().size());
  Tensor mine(m.rows() == 0 && m.cols() == 0 ? 0 : n, m.cols());
  std::copy(rows.begin(), rows.end(), mine.f32());
  return mine;
}

// The slice's per-node data (features, labels or targets, splits) moved to the part that owns
// each node, when the plan is not the blocks the slices were read in.
void move_node_data(GraphPart& part, DatasetSlice& s, const Owners& owners, Communicator& comm) {
  if (owners.block()) {
    part.features = std::move(s.features);
    part.labels = std::move(s.labels);
    part.targets = std::move(s.targets);
  } else {
    part.features = matrix_to_owners(s, s.features, owners, comm, kRowTag);
    part.targets = matrix_to_owners(s, s.targets, owners, comm, kRowTag + 1);
    if (s.task == TaskType::MultiClass)
      part.labels = rows_to_owners(s, s.labels.data(), 1, owners, comm, kRowTag + 2);
    s.train_idx = ids_to_owners(s.train_idx, owners, comm, kRowTag + 3);
    s.valid_idx = ids_to_owners(s.valid_idx, owners, comm, kRowTag + 4);
    s.test_idx = ids_to_owners(s.test_idx, owners, comm, kRowTag + 5);
  }
  part.train_rows = local_rows(s.train_idx, owners);
  part.valid_rows = local_rows(s.valid_idx, owners);
  part.test_rows = local_rows(s.test_idx, owners);
}

// A rank's part from its slice under `owners`: the graph, the halo plan, the node data.
GraphPart part_from_slice(DatasetSlice s, const Owners& owners, std::uint64_t fingerprint,
                          Communicator& comm) {
  GraphPart part;
  LocalGraph& g = part.graph;
  g.part = owners.me();
  g.num_parts = owners.k();
  g.plan_fingerprint = fingerprint;
  g.owned_ids = owners.owned();
  std::vector<std::int64_t> entries(static_cast<std::size_t>(owners.k()), 0);
  entries[static_cast<std::size_t>(owners.me())] = s.rows.nnz();
  comm.all_reduce_max(entries);
  Csr rows = training_rows(s, owners, comm);
  s.rows = Csr();  // the slice's graph is in the rows now
  localise(g, std::move(rows), owners);
  plan_halo(g, owners, comm);

  DatasetInfo& info = part.dataset;
  info.name = s.name;
  info.task = s.task;
  info.eval_metric = s.eval_metric;
  info.num_classes = s.num_classes;
  info.num_tasks = s.num_tasks;
  info.num_nodes = s.num_nodes;
  info.num_features = s.features.cols();
  info.fingerprint = s.fingerprint;
  for (const std::int64_t e : entries) info.num_edges += e;
  move_node_data(part, s, owners, comm);
  return part;
}

}  // namespace

DatasetSlice read_block_slice(const std::filesystem::path& file, int rank, int ranks) {
  const std::int64_t n = read_hdf5_rows(file, 0, 0).num_nodes;
  check_num_parts(n, ranks);
  return read_hdf5_rows(file, block_first(n, ranks, rank), block_first(n, ranks, rank + 1));
}

void check_same_dataset(const DatasetSlice& slice, const std::string& file, Communicator& comm) {
  // Every rank must read the same file (a path can name other data on another node): the node
  // counts and fingerprints, as maxima of them and of their negatives.
  const auto half = static_cast<std::int64_t>(slice.fingerprint >> 1);
  std::vector<std::int64_t> seen = {slice.num_nodes, -slice.num_nodes, half, -half};
  comm.all_reduce_max(seen);
  TESSERA_CHECK(seen[0] == -seen[1] && seen[2] == -seen[3], InvalidInput, file,
                ": the ranks read different datasets under this path (node counts or "
                "fingerprints differ)");
}

GraphPart block_part_from_slice(DatasetSlice s, Communicator& comm) {
  const Owners blocks(s.num_nodes, comm.size(), comm.rank());
  TESSERA_CHECK(
      s.row_begin == blocks.first(comm.rank()) && s.row_end == blocks.first(comm.rank() + 1),
      InvalidArgument, "rank ", comm.rank(), " read rows [", s.row_begin, ", ", s.row_end,
      "), not its block");
  return part_from_slice(std::move(s), blocks, block_plan_fingerprint(blocks), comm);
}

GraphPart planned_part_from_slice(DatasetSlice s, const PartitionPlan& plan, Communicator& comm) {
  TESSERA_CHECK(
      plan.num_parts == comm.size() && static_cast<std::int64_t>(plan.owner.size()) == s.num_nodes,
      InvalidArgument, "a plan of ", plan.num_parts, " parts of ", plan.owner.size(), " nodes for ",
      comm.size(), " ranks and ", s.num_nodes, " nodes");
  const Owners owners(plan, comm.rank());
  return part_from_slice(std::move(s), owners, plan_fingerprint(plan), comm);
}

GraphPart sliced_block_part(const std::filesystem::path& file, Communicator& comm) {
  DatasetSlice slice = read_block_slice(file, comm.rank(), comm.size());
  check_same_dataset(slice, file.string(), comm);
  GraphPart part = block_part_from_slice(std::move(slice), comm);
  validate(part, file.string() + " (part " + std::to_string(comm.rank()) + ")");
  return part;
}

PartitionStats gathered_stats(const GraphPart& part, Communicator& comm) {
  const auto k = static_cast<std::size_t>(comm.size());
  const auto me = static_cast<std::size_t>(comm.rank());
  const LocalGraph& g = part.graph;
  const std::int64_t n = g.num_owned();
  std::int64_t cut = 0;  // entries of owned rows whose column is a halo node
  for (const NodeId c : g.adjacency.indices()) cut += c >= n;
  std::vector<std::int64_t> rows(4 * k, 0);  // owned, halo, train, cut per part
  rows[me] = n;
  rows[k + me] = g.num_halo();
  rows[2 * k + me] = static_cast<std::int64_t>(part.train_rows.size());
  rows[3 * k + me] = cut;
  comm.all_reduce_max(rows);
  PartitionStats stats;
  stats.owned_nodes.assign(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(k));
  stats.halo_nodes.assign(rows.begin() + static_cast<std::ptrdiff_t>(k),
                          rows.begin() + static_cast<std::ptrdiff_t>(2 * k));
  stats.train_nodes.assign(rows.begin() + static_cast<std::ptrdiff_t>(2 * k),
                           rows.begin() + static_cast<std::ptrdiff_t>(3 * k));
  std::int64_t owned = 0, max_owned = 0, train = 0, max_train = 0;
  for (std::size_t q = 0; q < k; ++q) {
    stats.halo_nodes_total += stats.halo_nodes[q];
    stats.edge_cut += rows[3 * k + q];
    owned += stats.owned_nodes[q];
    max_owned = std::max(max_owned, stats.owned_nodes[q]);
    train += stats.train_nodes[q];
    max_train = std::max(max_train, stats.train_nodes[q]);
  }
  const auto parts = static_cast<double>(k);
  stats.replication_factor =
      owned > 0 ? static_cast<double>(owned + stats.halo_nodes_total) / static_cast<double>(owned)
                : 1.0;
  stats.node_imbalance =
      owned > 0 ? static_cast<double>(max_owned) * parts / static_cast<double>(owned) : 1.0;
  stats.train_imbalance =
      train > 0 ? static_cast<double>(max_train) * parts / static_cast<double>(train) : 1.0;
  return stats;
}

}  // namespace tessera
