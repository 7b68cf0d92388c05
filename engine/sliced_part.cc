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

namespace tessera {
namespace {

constexpr int kReverseTag = 0x5c11;
constexpr int kRequestTag = 0x5c12;
constexpr int kDegreeTag = 0x5c13;

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

// The block partition's boundaries: part q owns [first(q), first(q + 1)).
struct Blocks {
  std::int64_t n = 0;
  int k = 1;
  std::int64_t first(int q) const { return n * q / k; }
  int owner(std::int64_t v) const {
    int q = static_cast<int>(v * k / n);
    while (q + 1 < k && first(q + 1) <= v) ++q;
    while (first(q) > v) --q;
    return q;
  }
};

// Rows of the symmetrised training graph (no self loops) for the owned nodes: each slice row's
// columns, and the reverse of every entry the other ranks (and this one) hold whose column is
// owned here. Returns sorted unique global columns per owned row.
std::vector<std::vector<GlobalId>> training_rows(const DatasetSlice& s, const Blocks& blocks,
                                                 Communicator& comm) {
  const std::int64_t n = s.row_end - s.row_begin;
  std::vector<std::vector<GlobalId>> reverse(static_cast<std::size_t>(blocks.k));  // (u, v) pairs
  std::vector<std::vector<GlobalId>> rows(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) {
    const GlobalId v = s.row_begin + r;
    for (EdgeOffset e = s.rows.indptr()[r]; e < s.rows.indptr()[r + 1]; ++e) {
      const GlobalId u = s.rows.indices()[e];
      if (u == v) continue;
      rows[static_cast<std::size_t>(r)].push_back(u);
      auto& to = reverse[static_cast<std::size_t>(blocks.owner(u))];
      to.push_back(u);
      to.push_back(v);
    }
  }
  for (const auto& from : exchange(comm, std::move(reverse), kReverseTag)) {
    for (std::size_t i = 0; i + 1 < from.size(); i += 2) {
      rows[static_cast<std::size_t>(from[i] - s.row_begin)].push_back(from[i + 1]);
    }
  }
  for (auto& row : rows) {
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
  }
  return rows;
}

// The block plan's fingerprint (plan_fingerprint of partition_block) without its N owners in
// memory: the owner section hashed a block of nodes at a time.
std::uint64_t block_plan_fingerprint(const Blocks& blocks) {
  Hasher hasher;
  hasher.add_word(static_cast<std::uint64_t>(blocks.k));
  hasher.begin_section(1, static_cast<std::uint64_t>(blocks.n));
  std::vector<std::int32_t> owners;
  for (int q = 0; q < blocks.k; ++q) {
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

// The halo (columns owned elsewhere, increasing: grouped by owner, as the block owners
// increase with the id), the local adjacency, and the receive offsets.
void localise(LocalGraph& g, const std::vector<std::vector<GlobalId>>& rows, const Blocks& blocks) {
  const std::int64_t n = g.num_owned();
  const GlobalId begin = g.owned_ids.empty() ? 0 : g.owned_ids.front();
  for (const auto& row : rows) {
    for (const GlobalId u : row) {
      if (u < begin || u >= begin + n) g.halo_ids.push_back(u);
    }
  }
  std::sort(g.halo_ids.begin(), g.halo_ids.end());
  g.halo_ids.erase(std::unique(g.halo_ids.begin(), g.halo_ids.end()), g.halo_ids.end());
  TESSERA_CHECK(n + g.num_halo() < (std::int64_t{1} << 31), InvalidInput, "part ", g.part, " has ",
                n + g.num_halo(), " local nodes; local ids are 32-bit");
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(n) + 1, 0);
  std::vector<NodeId> indices;
  for (std::int64_t r = 0; r < n; ++r) {
    for (const GlobalId u : rows[static_cast<std::size_t>(r)]) {
      const bool owned = u >= begin && u < begin + n;
      indices.push_back(static_cast<NodeId>(
          owned ? u - begin
                : n + (std::lower_bound(g.halo_ids.begin(), g.halo_ids.end(), u) -
                       g.halo_ids.begin())));
    }
    indptr[static_cast<std::size_t>(r) + 1] = static_cast<EdgeOffset>(indices.size());
    std::sort(indices.begin() + indptr[static_cast<std::size_t>(r)], indices.end());
  }
  g.adjacency = Csr(n, n + g.num_halo(), std::move(indptr), std::move(indices));
  g.halo.recv_offsets.assign(static_cast<std::size_t>(blocks.k) + 1, 0);
  for (const GlobalId u : g.halo_ids)
    ++g.halo.recv_offsets[static_cast<std::size_t>(blocks.owner(u)) + 1];
  for (int q = 0; q < blocks.k; ++q) {
    g.halo.recv_offsets[static_cast<std::size_t>(q) + 1] +=
        g.halo.recv_offsets[static_cast<std::size_t>(q)];
  }
}

// The send lists (what each peer holds of this rank's rows as halo) and every local node's
// degree in the whole training graph plus its self loop (the halo's from their owners).
void plan_halo(LocalGraph& g, Communicator& comm) {
  const int k = g.num_parts;
  const std::int64_t n = g.num_owned();
  const GlobalId begin = g.owned_ids.empty() ? 0 : g.owned_ids.front();
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
      TESSERA_CHECK(v >= begin && v < begin + n, InvalidInput, "part ", g.part, ": rank ", q,
                    " asked for node ", v, ", which this part does not own");
      g.halo.send_rows.push_back(static_cast<NodeId>(v - begin));
      degrees[static_cast<std::size_t>(q)].push_back(
          g.degrees[static_cast<std::size_t>(v - begin)]);
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

std::vector<NodeId> local_rows(const std::vector<GlobalId>& ids, GlobalId begin) {
  std::vector<NodeId> rows;
  rows.reserve(ids.size());
  for (const GlobalId v : ids) rows.push_back(static_cast<NodeId>(v - begin));
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace

DatasetSlice read_block_slice(const std::filesystem::path& file, int rank, int ranks) {
  Blocks blocks;
  blocks.k = ranks;
  blocks.n = read_hdf5_rows(file, 0, 0).num_nodes;
  check_num_parts(blocks.n, blocks.k);
  return read_hdf5_rows(file, blocks.first(rank), blocks.first(rank + 1));
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
  Blocks blocks;
  blocks.k = comm.size();
  blocks.n = s.num_nodes;
  const int me = comm.rank();
  GraphPart part;
  LocalGraph& g = part.graph;
  g.part = me;
  g.num_parts = blocks.k;
  g.plan_fingerprint = block_plan_fingerprint(blocks);
  g.owned_ids.resize(static_cast<std::size_t>(s.row_end - s.row_begin));
  for (std::size_t i = 0; i < g.owned_ids.size(); ++i)
    g.owned_ids[i] = s.row_begin + static_cast<GlobalId>(i);
  localise(g, training_rows(s, blocks, comm), blocks);
  plan_halo(g, comm);

  DatasetInfo& info = part.dataset;
  info.name = s.name;
  info.task = s.task;
  info.eval_metric = s.eval_metric;
  info.num_classes = s.num_classes;
  info.num_tasks = s.num_tasks;
  info.num_nodes = s.num_nodes;
  info.num_features = s.features.cols();
  info.fingerprint = s.fingerprint;
  std::vector<std::int64_t> entries(static_cast<std::size_t>(blocks.k), 0);
  entries[static_cast<std::size_t>(me)] = s.rows.nnz();
  comm.all_reduce_max(entries);
  for (const std::int64_t e : entries) info.num_edges += e;

  part.features = std::move(s.features);
  part.labels = std::move(s.labels);
  part.targets = std::move(s.targets);
  part.train_rows = local_rows(s.train_idx, s.row_begin);
  part.valid_rows = local_rows(s.valid_idx, s.row_begin);
  part.test_rows = local_rows(s.test_idx, s.row_begin);
  return part;
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
