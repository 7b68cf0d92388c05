// SPDX-License-Identifier: Apache-2.0
// GraphPart: everything one rank trains on — its LocalGraph (owned rows, halo columns grouped by
// owner, the halo plan, global degrees for GCN weights) and the owned rows of the features,
// labels and split lists — plus PartBuilder, which cuts parts out of a whole Dataset.
// Local ids: owned nodes [0, N) in increasing global id; halo nodes [N, N + H) grouped by owning
// part, increasing global id within a group, so each peer's rows land in one contiguous block.
// Global ids are the dataset's, or, when the job renumbered the nodes for locality
// (--node-order, partition/node_order.h), the renumbered ones: then input_ids maps each owned
// row back to the dataset's id, which is what every output names a node by.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/csr.h"
#include "core/halo_plan.h"
#include "core/tensor.h"
#include "datasets/dataset.h"
#include "datasets/loaders.h"
#include "partition/partition_plan.h"

namespace tessera {

// What every rank knows of the whole dataset without holding it.
struct DatasetInfo {
  std::string name;
  TaskType task = TaskType::MultiClass;
  std::string eval_metric = "acc";
  std::int64_t num_classes = 0;
  std::int64_t num_tasks = 1;
  std::int64_t num_nodes = 0;     // global N
  std::int64_t num_edges = 0;     // entries of the graph as read (before symmetrisation)
  std::int64_t num_features = 0;  // F
  std::uint64_t fingerprint = 0;  // of the Dataset (datasets/dataset.h)
  std::int64_t num_outputs() const {
    return task == TaskType::MultiClass ? num_classes : num_tasks;
  }
};
DatasetInfo dataset_info(const Dataset& dataset);  // computes the fingerprint (one pass)
// The same with the fingerprint given (a dataset whose features are not held: num_features is
// then that of dataset.features).
DatasetInfo dataset_info(const Dataset& dataset, std::uint64_t fingerprint);
// What a partitioner needs of dataset `spec`: load_dataset(spec), except that a Tessera HDF5
// file's features stay in the file (dataset.features is left (N, 0); read_hdf5_feature_rows
// reads a part's rows). `info` describes the whole dataset, features included.
Dataset load_for_partitioning(const std::string& spec, const LoadOptions& options,
                              DatasetInfo& info);

struct LocalGraph {
  int part = 0;
  int num_parts = 1;
  std::vector<GlobalId> owned_ids;  // (N) increasing
  std::vector<GlobalId> halo_ids;   // (H) grouped by owner (see above)
  // (N) the dataset's id of each owned node when the nodes were renumbered; empty when the
  // global ids are the dataset's.
  std::vector<GlobalId> input_ids;
  // (N, N + H) the symmetrised training graph without self loops: row v lists the local ids of
  // v's neighbours, sorted (owned columns first).
  Csr adjacency;
  // (N + H) degree of every local column in the graph plus self loops (global degrees, so that
  // a part is weighted exactly as the whole graph is).
  std::vector<float> degrees;
  HaloPlan halo;
  // plan_fingerprint() of the partitioning the part was cut from (0: the whole graph, no plan):
  // every part of one job must carry the same.
  std::uint64_t plan_fingerprint = 0;

  std::int64_t num_owned() const { return static_cast<std::int64_t>(owned_ids.size()); }
  // The dataset's id of every owned row: what outputs (predictions, embeddings) are keyed by.
  std::span<const GlobalId> dataset_ids() const {
    return input_ids.empty() ? owned_ids : input_ids;
  }
  std::int64_t num_halo() const { return static_cast<std::int64_t>(halo_ids.size()); }
};

struct GraphPart {
  DatasetInfo dataset;
  LocalGraph graph;
  Tensor features;                   // (N, F) owned rows
  std::vector<std::int64_t> labels;  // (N) multi-class, -1 = none; empty for multi-label
  Tensor targets;                    // (N, T) multi-label; empty for multi-class
  std::vector<NodeId> train_rows;    // local ids of this part's split nodes, increasing
  std::vector<NodeId> valid_rows;
  std::vector<NodeId> test_rows;
};

// Checks every cross-array invariant of a part (sizes, id ranges, halo plan, degrees > 0,
// labels in range); throws InvalidInput prefixed with `where` (a file name, or "part r").
void validate(const GraphPart& part, const std::string& where);

// Refuses (InvalidInput, naming the method) a partition with a part that owns no node or no
// training node: that rank's loss would be empty and its part pure overhead. METIS's repair
// pass guarantees both whenever there are at least K training nodes.
void check_parts_usable(const PartitionStats& stats, const std::string& method);

// The symmetrised training graph of a dataset (self loops dropped): what every mode trains on,
// as OGB's examples do (adj_t.to_symmetric()).
Csr training_graph(const Dataset& dataset);

// Cuts parts out of a dataset held in memory. Keeps references to all three arguments.
class PartBuilder {
 public:
  // `graph` is training_graph(dataset) (symmetric, no self loops). `order`, when given, is the
  // order the dataset was renumbered by (node_order.h): each part records the dataset's ids of
  // its nodes (LocalGraph::input_ids). Keeps a reference to it too.
  PartBuilder(const Dataset& dataset, const Csr& graph, const PartitionPlan& plan,
              const DatasetInfo& info, std::span<const GlobalId> order = {});
  GraphPart build(int part) const;
  std::uint64_t plan_fingerprint() const { return plan_fingerprint_; }

 private:
  const Dataset& dataset_;
  const Csr& graph_;
  const PartitionPlan& plan_;
  const DatasetInfo& info_;
  std::span<const GlobalId> order_;
  std::uint64_t plan_fingerprint_;
};

// The whole dataset as part 0 of 1 (single process): features, labels and targets are moved
// out of `dataset`, the graph is symmetrised; no halo. `info` is dataset_info(dataset) when
// not given.
GraphPart whole_graph_part(Dataset&& dataset);
GraphPart whole_graph_part(Dataset&& dataset, const DatasetInfo& info);

// Records in part.graph.input_ids the dataset's id of each owned node, for a part cut from a
// dataset renumbered by `order` (node_order.h: renumbered id i was the dataset's order[i]).
void record_input_ids(GraphPart& part, std::span<const GlobalId> order);

}  // namespace tessera
