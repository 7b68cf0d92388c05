// SPDX-License-Identifier: Apache-2.0
// The three ways to a rank's part (store, in process, single process) behind load_part, each
// phase agreed across ranks. In-process parts travel as size (8 bytes) then the HDF5 image.
#include "engine/part_loader.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <vector>

#include "comm/agreement.h"
#include "comm/message_tags.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/host_memory.h"
#include "core/rng.h"
#include "datasets/loaders.h"
#include "engine/sliced_part.h"
#include "engine/system.h"
#include "partition/partition_store.h"
#include "partition/plan_file.h"

namespace tessera {
namespace {

void check_parts_flag(const PartSource& source, const Communicator& comm) {
  TESSERA_CHECK(source.plan_file.empty() || source.partitions_dir.empty(), InvalidArgument,
                "--partition-file ", source.plan_file, " and --partitions ", source.partitions_dir,
                ": a store has its parts already; give one of them");
  TESSERA_CHECK(source.parts == 0 || source.parts == comm.size(), InvalidArgument, "--parts ",
                source.parts, " does not match the number of ranks (", comm.size(),
                "): start one rank per part, e.g. mpiexec -n ", source.parts, " train_gcn ...");
  TESSERA_CHECK(source.parts == 0 || source.launcher_tasks == 0 ||
                    source.parts == source.launcher_tasks,
                InvalidArgument, "--parts ", source.parts, " disagrees with the Slurm job's ",
                source.launcher_tasks, " tasks (SLURM_NTASKS): ask for one task per part, e.g. "
                "sbatch --ntasks ", source.parts);
}

std::string canonical_spec(const std::string& spec) {
  if (spec.rfind("synth:", 0) == 0) return spec;
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::weakly_canonical(spec, ec);
  return ec ? spec : path.string();
}

// 64-bit values summed over ranks exactly (mod 2^64) through the double all-reduce: each as its
// two 32-bit halves, whose sums stay exact below 2^21 ranks.
void push_u64(std::vector<double>& sums, std::uint64_t x) {
  sums.push_back(static_cast<double>(x & 0xFFFFFFFFu));
  sums.push_back(static_cast<double>(x >> 32));
}
std::uint64_t summed_u64(const std::vector<double>& sums, std::size_t at) {
  return static_cast<std::uint64_t>(sums[at]) + (static_cast<std::uint64_t>(sums[at + 1]) << 32);
}

// The hash of one halo block (a count and the global ids, in the order they travel) between
// `from` and `to`, so that the blocks of different pairs never cancel.
std::uint64_t block_hash(int from, int to, std::span<const GlobalId> ids) {
  Hasher hasher;
  hasher.add_word(static_cast<std::uint64_t>(from) << 32 | static_cast<std::uint32_t>(to));
  hasher.add_section(1, ids);
  return hasher.finish();
}

LoadedPart from_store(const PartSource& source, Communicator& comm) {
  LoadedPart out;
  Stopwatch watch;
  const StoreMeta meta = run_agreed(comm, "reading the partition store", [&] {
    StoreMeta m = read_store_meta(source.partitions_dir);
    TESSERA_CHECK(m.num_parts == comm.size(), InvalidArgument, "--partitions ",
                  source.partitions_dir, " holds ", m.num_parts, " parts but the job has ",
                  comm.size(), " ranks (run with mpiexec -n ", m.num_parts, ")");
    TESSERA_CHECK(!source.dataset_given ||
                      canonical_spec(source.dataset) == canonical_spec(m.dataset_spec),
                  InvalidArgument, "--dataset ", source.dataset, " does not match --partitions ",
                  source.partitions_dir, ", which was made from ", m.dataset_spec, " ('",
                  m.dataset.name, "')");
    return m;
  });
  out.part = run_agreed(comm, "reading the part files", [&] {
    GraphPart part = read_part(source.partitions_dir, meta, comm.rank());
    TESSERA_CHECK(!part.train_rows.empty(), InvalidInput, source.partitions_dir, "/",
                  part_file_name(comm.rank()), ": part has no training node");
    return part;
  });
  check_part_set(
      comm, out.part,
      (std::filesystem::path(source.partitions_dir) / part_file_name(comm.rank())).string());
  out.method = to_string(meta.method);
  out.node_order = meta.node_order;
  out.stats = meta.stats;
  out.dataset_spec = meta.dataset_spec;
  out.load_s = watch.seconds();
  return out;
}

Dataset load_source(const PartSource& source) {
  if (source.make_dataset) return source.make_dataset();
  return load_dataset(source.dataset, LoadOptions{.progress = source.progress});
}

LoadedPart single_process(const PartSource& source) {
  LoadedPart out;
  Stopwatch watch;
  Dataset dataset = load_source(source);
  out.load_s = watch.seconds();
  const DatasetInfo info = dataset_info(dataset);
  Stopwatch order_watch;
  // RCM symmetrises the directed graph as training_graph does.
  std::vector<GlobalId> order;
  if (source.node_order == NodeOrder::Rcm) {
    order = reverse_cuthill_mckee(dataset.graph);
    renumber_dataset(dataset, order);
  }
  out.order_s = order.empty() ? 0.0 : order_watch.seconds();
  out.node_order = source.node_order;
  out.part = whole_graph_part(std::move(dataset), info);
  if (!order.empty()) record_input_ids(out.part, order);
  return out;
}

// A Tessera HDF5 file is partitioned without its features: rank 0 reads the rest (the features
// only streamed through the fingerprint check), the parts travel without features, and every
// rank reads its own feature rows from the file (read_hdf5_feature_rows).
bool owners_read_features(const PartSource& source) {
  return !source.make_dataset && is_hdf5_spec(source.dataset);
}

// Every rank's own feature rows from the file, once its part (without them) has arrived. The
// file's fingerprint, checked against rank 0's, fixes their width too.
void read_own_features(const PartSource& source, Communicator& comm, GraphPart& part) {
  run_agreed(comm, "reading this rank's feature rows", [&] {
    part.features =
        read_hdf5_feature_rows(source.dataset, part.graph.dataset_ids(), part.dataset.fingerprint);
    part.dataset.num_features = part.features.cols();
    validate(part, "part " + std::to_string(part.graph.part) + " of " + source.dataset);
  });
}

// What the partitioner and the renumbering freed (blocks the block cache keeps for reuse, glibc's
// free heap) goes back to the system, so that rank 0's next phase starts from what it holds.
void hand_back_free_memory() {
  host_block_cache().trim();
  release_free_heap();
}

// Rank 0's dataset to partition into k parts, and `info` of the whole: from a Tessera HDF5 file
// whose ranks read their own feature rows, without its features.
Dataset load_to_partition(const PartSource& source, int k, DatasetInfo& info) {
  Dataset dataset;
  if (owners_read_features(source)) {
    dataset = load_for_partitioning(source.dataset, LoadOptions{.progress = source.progress}, info);
    info.num_features = 0;  // the parts travel without features
  } else {
    dataset = load_source(source);
    info = dataset_info(dataset);
  }
  TESSERA_CHECK(dataset.num_nodes() >= k, InvalidArgument, "--parts ", k, ": more parts than ",
                "the ", dataset.num_nodes(), " nodes of ", source.dataset);
  return dataset;
}

// The partitioning's name in summaries: the partitioner's, or "plan file".
std::string method_name(const PartSource& source) {
  return source.plan_file.empty() ? to_string(source.method) : "plan file";
}

// The plan of --partition-file, checked against the dataset and the job.
PartitionPlan plan_from_file(const PartSource& source, std::int64_t num_nodes,
                             std::uint64_t fingerprint, int parts) {
  PlanFile file = read_plan_file(source.plan_file);
  check_plan_matches(file, "--partition-file " + source.plan_file, num_nodes, fingerprint, parts);
  return std::move(file.plan);
}

LoadedPart in_process(const PartSource& source, Communicator& comm) {
  LoadedPart out;
  const int k = comm.size();
  const bool root = comm.rank() == 0;
  Stopwatch watch;
  // Only rank 0 ever holds the whole graph; it is released when this scope ends.
  Dataset dataset;
  Csr graph;
  PartitionPlan plan;
  DatasetInfo info;
  run_agreed(comm, "loading the dataset", [&] {
    if (root) dataset = load_to_partition(source, k, info);
  });
  out.load_s = watch.seconds();
  run_agreed(comm, "partitioning", [&] {
    if (!root) return;
    graph = training_graph(dataset);
    Stopwatch partition_watch;
    plan = source.plan_file.empty()
               ? make_partition(source.method, graph, dataset.train_idx, k, source.seed)
               : plan_from_file(source, dataset.num_nodes(), info.fingerprint, k);
    PartitionStats stats = partition_stats(graph, plan, dataset.train_idx);
    stats.seconds = partition_watch.seconds();
    check_parts_usable(stats, method_name(source));
    out.stats = std::move(stats);
    hand_back_free_memory();
  });
  out.method = method_name(source);
  // Renumbered after partitioning, so that the parts (and their statistics) are those of the
  // dataset's ids whatever the order.
  std::vector<GlobalId> order;
  run_agreed(comm, "renumbering the nodes", [&] {
    if (!root) return;
    Stopwatch order_watch;
    order = renumber_partitioned(source.node_order, dataset, graph, plan);
    out.order_s = order.empty() ? 0.0 : order_watch.seconds();
    hand_back_free_memory();
  });
  out.node_order = source.node_order;
  std::optional<PartBuilder> builder;
  if (root) builder.emplace(dataset, graph, plan, info, order);
  for (int r = 1; r < k; ++r) {
    std::vector<std::byte> image;
    std::uint64_t size = 0;
    run_agreed(comm, "building part " + std::to_string(r), [&] {
      if (!root) return;
      GraphPart part = builder->build(r);
      validate(part, "part " + std::to_string(r));
      image = part_image(part);
      size = image.size();
    });
    if (root) {
      comm.isend({reinterpret_cast<const std::byte*>(&size), sizeof size}, r, tags::kPartSize,
                 TrafficCategory::Setup)
          ->wait();
      comm.isend(image, r, tags::kPartImage, TrafficCategory::Setup)->wait();
    } else if (comm.rank() == r) {
      comm.irecv({reinterpret_cast<std::byte*>(&size), sizeof size}, 0, tags::kPartSize)->wait();
      image.resize(static_cast<std::size_t>(size));
      comm.irecv(image, 0, tags::kPartImage)->wait();
    }
    run_agreed(comm, "receiving part " + std::to_string(r), [&] {
      if (comm.rank() != r) return;
      out.part = part_from_image(image, "part " + std::to_string(r) + " from rank 0");
    });
  }
  run_agreed(comm, "building part 0", [&] {
    if (root) out.part = builder->build(0);
  });
  out.features_by_owner = owners_read_features(source);
  if (out.features_by_owner) read_own_features(source, comm, out.part);
  check_part_set(comm, out.part, "part " + std::to_string(comm.rank()));
  return out;
}

}  // namespace

void check_part_set(Communicator& comm, const GraphPart& part, const std::string& label) {
  const LocalGraph& g = part.graph;
  const int k = comm.size(), me = comm.rank();
  std::uint64_t plan = g.plan_fingerprint;
  comm.broadcast({reinterpret_cast<std::byte*>(&plan), sizeof plan}, 0, TrafficCategory::Setup);
  run_agreed(comm, "checking the parts against each other", [&] {
    TESSERA_CHECK(g.plan_fingerprint == plan, InvalidInput, label,
                  ": from another partitioning than rank 0's part (plan fingerprint ",
                  fingerprint_hex(g.plan_fingerprint), ", rank 0's ", fingerprint_hex(plan),
                  "): every part of a job must come from one partitioning");
  });
  const std::int64_t n = part.dataset.num_nodes;
  constexpr std::uint64_t kSalt = 0x7e55e7a0f00dull;
  std::uint64_t owned = 0, expected = 0, sent = 0, expects = 0;
  for (const GlobalId v : g.owned_ids) owned += splitmix64(static_cast<std::uint64_t>(v) ^ kSalt);
  // Every rank hashes its slice of [0, N): the sum over ranks is that of every node once.
  for (std::int64_t v = me * n / k; v < (me + 1) * n / k; ++v)
    expected += splitmix64(static_cast<std::uint64_t>(v) ^ kSalt);
  std::vector<GlobalId> ids;
  for (int peer = 0; peer < k; ++peer) {
    ids.clear();
    for (std::int64_t i = g.halo.send_offsets[peer]; i < g.halo.send_offsets[peer + 1]; ++i)
      ids.push_back(g.owned_ids[static_cast<std::size_t>(g.halo.send_rows[i])]);
    sent += block_hash(me, peer, ids);
    const std::span<const GlobalId> halo(g.halo_ids);
    expects += block_hash(peer, me,
                          halo.subspan(static_cast<std::size_t>(g.halo.recv_offsets[peer]),
                                       static_cast<std::size_t>(g.halo.recv_count(peer))));
  }
  std::vector<double> sums = {static_cast<double>(g.num_owned())};
  for (const std::uint64_t x : {owned, expected, sent, expects}) push_u64(sums, x);
  comm.all_reduce_sum(std::span<double>(sums), TrafficCategory::Setup);
  run_agreed(comm, "checking the parts against each other", [&] {
    TESSERA_CHECK(
        static_cast<std::int64_t>(sums[0]) == n && summed_u64(sums, 1) == summed_u64(sums, 3),
        InvalidInput, "the ", k, " parts do not own the ", n,
        " nodes of the graph exactly once (they own ", static_cast<std::int64_t>(sums[0]),
        (static_cast<std::int64_t>(sums[0]) == n ? ", but not each once" : ""),
        "): they come from different partitionings");
    TESSERA_CHECK(summed_u64(sums, 5) == summed_u64(sums, 7), InvalidInput,
                  "the halo plans of the ", k,
                  " parts disagree: what some rank sends is not "
                  "what its peer expects (parts of different partitionings?)");
  });
}

namespace {

// --partition block or --partition-file on a Tessera HDF5 file: every rank reads only its own
// rows and builds its part with the others (block_part_from_slice, planned_part_from_slice); no
// rank holds the whole graph or feature matrix (a plan's N owners are on every rank).
LoadedPart from_slices(const PartSource& source, Communicator& comm) {
  LoadedPart out;
  out.method = method_name(source);
  out.sliced = true;
  Stopwatch watch;
  DatasetSlice slice = run_agreed(comm, "reading this rank's rows of the dataset", [&] {
    return read_block_slice(source.dataset, comm.rank(), comm.size());
  });
  check_same_dataset(slice, source.dataset, comm);
  PartitionPlan plan;
  if (!source.plan_file.empty()) {
    plan = run_agreed(comm, "reading the plan file", [&] {
      return plan_from_file(source, slice.num_nodes, slice.fingerprint, comm.size());
    });
  }
  out.load_s = watch.seconds();
  const std::string label = "part " + std::to_string(comm.rank()) + " of " + source.dataset;
  // The exchanges run between agreed phases; the part is checked in one.
  Stopwatch build_watch;
  out.part = source.plan_file.empty() ? block_part_from_slice(std::move(slice), comm)
                                      : planned_part_from_slice(std::move(slice), plan, comm);
  plan = PartitionPlan();
  run_agreed(comm, "building the parts from the slices", [&] { validate(out.part, label); });
  PartitionStats stats = gathered_stats(out.part, comm);
  stats.seconds = build_watch.seconds();
  run_agreed(comm, "partitioning", [&] { check_parts_usable(stats, out.method); });
  if (comm.rank() == 0) out.stats = std::move(stats);
  check_part_set(comm, out.part, label);
  return out;
}

}  // namespace

LoadedPart load_part(const PartSource& source, Communicator& comm) {
  run_agreed(comm, "checking flags", [&] { check_parts_flag(source, comm); });
  if (!source.partitions_dir.empty()) return from_store(source, comm);
  if (comm.size() == 1 && source.plan_file.empty()) {
    return run_agreed(comm, "loading the dataset", [&] { return single_process(source); });
  }
  if ((source.method == PartitionMethod::Block || !source.plan_file.empty()) &&
      !source.make_dataset && is_hdf5_spec(source.dataset)) {
    return from_slices(source, comm);
  }
  LoadedPart loaded = in_process(source, comm);
  // Rank 0 held the whole dataset, its training graph and the partitioner's arrays: hand their
  // memory back (the features' block would stay in the block cache, the rest in the heap) so
  // that training starts from the part alone (docs/planner.md).
  hand_back_free_memory();
  return loaded;
}

}  // namespace tessera
