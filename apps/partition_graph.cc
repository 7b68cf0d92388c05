// SPDX-License-Identifier: Apache-2.0
// partition_graph: partitions a dataset once (METIS, random or block) and writes a partition
// store — one HDF5 file per part plus meta.json — that `train_gcn --partitions DIR` reads with
// one rank per part, each rank opening only its own file. Prints the partition statistics.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <functional>
#include <vector>

#include "apps/cli_errors.h"
#include "core/build_info.h"
#include "core/error.h"
#include "datasets/loaders.h"
#include "engine/system.h"
#include "partition/graph_part.h"
#include "partition/partition_store.h"

namespace {

using namespace tessera;

struct Flags {
  std::string dataset = "synth:default";
  int parts = 2;
  std::string method = "metis";
  std::uint64_t seed = 0;
  std::string node_order = "rcm";
  std::string out;
  bool quiet = false;
};

int run(const Flags& f) {
  const PartitionMethod method = parse_partition_method(f.method);
  const NodeOrder node_order = parse_node_order(f.node_order);
  Stopwatch load;
  // A Tessera HDF5 file's features stay in it: each part reads its rows when it is written.
  DatasetInfo info;
  Dataset dataset = load_for_partitioning(f.dataset, LoadOptions{.progress = !f.quiet}, info);
  std::fprintf(stderr, "Loaded %s: %lld nodes, %lld edges (%.2f s)\n", dataset.name.c_str(),
               static_cast<long long>(dataset.num_nodes()),
               static_cast<long long>(dataset.graph.nnz()), load.seconds());
  TESSERA_CHECK(f.parts <= dataset.num_nodes(), InvalidArgument, "--parts ", f.parts,
                ": more parts than the ", dataset.num_nodes(), " nodes of ", f.dataset);
  Csr graph = training_graph(dataset);
  Stopwatch watch;
  PartitionPlan plan = make_partition(method, graph, dataset.train_idx, f.parts, f.seed);
  StoreMeta meta;
  meta.stats = partition_stats(graph, plan, dataset.train_idx);
  meta.stats.seconds = watch.seconds();
  check_parts_usable(meta.stats, f.method);
  meta.dataset_spec = f.dataset;
  meta.dataset = info;
  meta.num_parts = f.parts;
  meta.method = method;
  meta.seed = f.seed;
  meta.node_order = node_order;
  const PartitionStats& s = meta.stats;
  std::printf("%s: %d parts (%s, %.2f s), edge cut %lld of %lld (%.1f%%), replication %.3f, "
              "imbalance %.3f, train imbalance %.3f\n",
              dataset.name.c_str(), f.parts, f.method.c_str(), s.seconds,
              static_cast<long long>(s.edge_cut), static_cast<long long>(graph.nnz()),
              graph.nnz() ? 100.0 * static_cast<double>(s.edge_cut) / graph.nnz() : 0.0,
              s.replication_factor, s.node_imbalance, s.train_imbalance);
  std::printf("%6s %12s %12s %12s\n", "part", "nodes", "halo", "train");
  for (int p = 0; p < f.parts; ++p) {
    std::printf("%6d %12lld %12lld %12lld\n", p, static_cast<long long>(s.owned_nodes[p]),
                static_cast<long long>(s.halo_nodes[p]), static_cast<long long>(s.train_nodes[p]));
  }
  Stopwatch renumber;
  const std::vector<GlobalId> order = renumber_partitioned(node_order, dataset, graph, plan);
  if (!order.empty())
    std::printf("Renumbered the nodes (%s, %.2f s)\n", f.node_order.c_str(), renumber.seconds());
  Stopwatch write;
  std::function<void(GraphPart&)> read_features;
  if (is_hdf5_spec(f.dataset)) {
    read_features = [&](GraphPart& part) {
      part.features = read_hdf5_feature_rows(f.dataset, part.graph.dataset_ids(), info.fingerprint);
    };
  }
  write_partition_store(f.out, PartBuilder(dataset, graph, plan, meta.dataset, order), meta,
                        !f.quiet, read_features);
  std::printf("Wrote %s (%.2f s)\n", f.out.c_str(), write.seconds());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"partition_graph: partition a dataset into a store for train_gcn --partitions"};
  app.set_version_flag("--version", "partition_graph, " + build_text());
  Flags f;
  app.add_option("--dataset", f.dataset,
                 "OGB raw-layout directory, Tessera .h5 file, or synth:PRESET[:SEED]")
      ->capture_default_str();
  app.add_option("--parts", f.parts, "number of parts (one MPI rank each)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--partition", f.method,
                 "partitioner: " + tessera::detail::join_names(tessera::partition_method_names()))
      ->check(CLI::IsMember(tessera::partition_method_names()))
      ->capture_default_str();
  app.add_option("--seed", f.seed, "partitioner seed")->capture_default_str();
  app.add_option("--node-order", f.node_order,
                 "renumbering of the nodes for locality after the cut: rcm (reverse "
                 "Cuthill-McKee) or none; outputs of training keep the dataset's ids")
      ->check(CLI::IsMember(tessera::node_order_names()))
      ->capture_default_str();
  app.add_option("--out", f.out, "output directory (must not exist, or be empty)")->required();
  app.add_flag("--quiet", f.quiet, "no progress bars");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return tessera_apps::report_parse_error(app, e, "partition_graph", true);
  }
  try {
    return run(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "partition_graph: error: %s\n", e.what());
  }
  return 1;
}
