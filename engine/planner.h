// SPDX-License-Identifier: Apache-2.0
// The pre-flight planner (train_gcn --plan): every rank's peak memory and the bytes of a
// training epoch, predicted before any training for a configuration and its alternatives, from
// the part shapes, a training step measured on small synthetic graphs of the same widths, the
// sizes of what a rank holds beside it and the traffic model. docs/planner.md has the model.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/csr.h"
#include "core/tensor.h"
#include "datasets/loaders.h"
#include "engine/pipeline.h"
#include "engine/train_config.h"
#include "partition/graph_part.h"
#include "partition/partition_plan.h"

namespace tessera {

// One part as a rank would hold it.
struct PartShape {
  std::int64_t owned = 0;         // rows
  std::int64_t halo = 0;          // in-neighbours owned elsewhere
  std::int64_t entries = 0;       // adjacency entries of the owned rows (no self loops)
  std::int64_t halo_entries = 0;  // of those, the ones in halo columns
  std::int64_t send = 0;          // rows sent to peers, summed over the peers
  std::int64_t boundary = 0;      // owned rows with a halo column
  std::int64_t train = 0;         // training rows
};
// The parts of `plan` on `graph` (symmetric, rows = destinations). O(E).
std::vector<PartShape> part_shapes(const Csr& graph, const PartitionPlan& plan,
                                   std::span<const GlobalId> train_idx);

// The shapes of the `parts` block parts (partition_block) of a Tessera HDF5 file, without
// loading it: one pass over its graph a stretch of rows at a time. Owned, halo, boundary, sent and
// training rows are exact. The adjacency entries of the training graph (symmetrised, no self
// loops) count an entry whose reverse is stored too once: exact where a part stores at most
// `sample` entries (each looked up in the file), else estimated from `sample` entries of the part
// drawn at random (seeded by `seed`) and looked up. Memory: one bit a node for every part and for
// the boundary, and one stretch of rows.
struct StreamedShapes {
  std::vector<PartShape> parts;
  std::int64_t sampled = 0;  // entries looked up, over the parts
  bool exact = true;         // every part's entries were all looked up
};
StreamedShapes block_shapes_from_file(Hdf5GraphReader& file, int parts, std::int64_t sample,
                                      std::uint64_t seed);

// The tensor memory of training and evaluating on one process: `per_row` bytes for every owned
// row plus `fixed` bytes (parameters, their gradients, the optimizer's moments).
struct StepMemory {
  double per_row = 0.0;
  double fixed = 0.0;
  std::int64_t parameters = 0;  // of the whole model
};
// Measured: trains three epochs (each evaluated) on two synthetic graphs of `rows_small` and
// twice as many rows, with the dataset's features, outputs and task and `mean_degree` adjacency
// entries a row, and counts the host memory of CPU tensors (core/host_memory.h) at its highest.
StepMemory measure_step_memory(const TrainConfig& config, const DatasetInfo& data,
                               double mean_degree, std::int64_t rows_small = 16384);

// The same for one stage of a pipeline (`layout`: its layers and chunks), measured as a
// one-stage pipeline of the stage's layers and widths: what a stage keeps for all of its chunks
// (activations, historical buffers, the evaluation pass).
StepMemory measure_stage_memory(const TrainConfig& config, const DatasetInfo& data,
                                double mean_degree, const PipelineLayout& layout,
                                std::int64_t rows_small = 16384);

// What the planner measured of this machine and the dataset.
struct MachineFacts {
  std::uint64_t baseline = 0;        // resident bytes of a started process (libraries, MPI)
  std::uint64_t load_peak = 0;       // loading the whole dataset: highest resident bytes above
                                     // the baseline (0: not loaded, e.g. a partition store)
  std::uint64_t dataset = 0;         // the loaded dataset, resident afterwards
  std::uint64_t partition_peak = 0;  // partitioning: highest resident bytes above the dataset
  bool peaks_measured = true;        // false where /proc/self/clear_refs cannot reset the peak
};

enum class PartSourceKind {
  Single,     // one process: the whole graph is the part
  InProcess,  // rank 0 loads and partitions, then sends each rank its part
  Store,      // every rank reads its part file
  Sliced,     // every rank reads its rows of a Tessera HDF5 file (--partition block) and builds
              // its part with the others
};

struct RankMemory {
  std::uint64_t load = 0;   // highest while loading and partitioning
  std::uint64_t train = 0;  // highest while training
  // What the rank's GPU would hold while training: `train` less the process, plus the layer
  // outputs that a host step keeps as their signs only (Model::keep_signs_only), whole on a GPU.
  std::uint64_t device = 0;
  std::uint64_t peak() const { return load > train ? load : train; }
};

struct PlanEstimate {
  std::string mode;  // "single", "graph", "pipeline", "hybrid"
  int ranks = 1;
  int parts = 1;
  int stages = 1;
  std::string codec = "none";
  std::string backward_codec = "none";
  std::vector<RankMemory> memory;  // (ranks)
  // Bytes of one training epoch summed over ranks, by category.
  double halo_forward = 0.0, halo_backward = 0.0, pipeline = 0.0, all_reduce = 0.0;
  double bytes_per_epoch() const { return halo_forward + halo_backward + pipeline + all_reduce; }
  std::uint64_t max_peak() const;
};

struct PlanInputs {
  TrainConfig config;  // model, mode (--parallel, --stages, --chunks), codecs
  DatasetInfo data;
  std::int64_t entries = 0;      // adjacency entries of the whole training graph
  std::vector<PartShape> parts;  // (graph parts)
  PartSourceKind source = PartSourceKind::InProcess;
  MachineFacts facts;
  StepMemory step;
  // Pipelined modes: the memory of every stage (measure_stage_memory), by stage.
  std::vector<StepMemory> stage_steps;
  int ranks = 1;
};
// The estimate of one configuration.
PlanEstimate estimate_plan(const PlanInputs& in);

// The shape of a part as read (a partition store's part file).
PartShape part_shape(const GraphPart& part);

// The plan of a configuration and its alternatives, as train_gcn --plan prints it.
struct PlanReport {
  std::string dataset;  // as given
  DatasetInfo data;
  std::int64_t entries = 0;
  std::string partition_method;
  bool from_store = false;
  bool streamed = false;      // block parts streamed from the file (block_shapes_from_file)
  std::int64_t sampled = 0;   // then: the entries looked up for the configuration's parts
  bool entries_exact = true;  // and whether they were all of them
  MachineFacts facts;
  StepMemory step;
  std::vector<PlanEstimate> rows;  // the configuration first, then the alternatives
  std::vector<PartShape> parts;    // of the configuration's graph parts
  double seconds = 0.0;            // the planner's own time (loading and partitioning included)
  bool gpu = false;                // planned for --device cuda
};
// Loads the dataset (or reads the partition store's parts one at a time), partitions it for
// every rank count of `ranks` (the first is the configuration's), measures a step and
// estimates: the configuration, then on the first rank count the other codecs (none, bf16,
// int8) and modes (pipeline over the ranks, hybrid over two stages) where they apply, then graph
// mode on the other rank counts. `progress`: a line on stderr per phase. Single process.
// `gpu`: the configuration runs on GPUs (planned with the CPU's step). With a partition store
// `ranks` may be empty (the store's part count) and the plan is of graph mode. Graph mode with
// --partition block on a Tessera HDF5 file on 2 ranks or more, which every rank reads in slices, is
// planned without loading the file (block_shapes_from_file): graph-mode rows on 2 ranks or more
// only.
PlanReport make_plan(const TrainConfig& config, std::span<const int> ranks, bool progress,
                     bool gpu = false);
std::string plan_table(const PlanReport& report);  // the table train_gcn --plan prints
std::string plan_json(const PlanReport& report);   // the same as JSON (--plan-json)

// Bytes a part's data takes on its rank: features, labels, ids, adjacency, degrees, halo plan,
// split rows. The features as loaded (f32), or as --feature-dtype bf16 keeps them once graph
// mode has rounded them (before the first step; both copies are held while it rounds).
double part_data_bytes(const PartShape& part, const DatasetInfo& data,
                       DType features_dtype = DType::F32);

// What a graph-mode rank holding `part` keeps at its height, beside the process itself
// (libraries, MPI): the part while its operator is built, while its features are rounded
// (--feature-dtype bf16), and while it trains with the operator, the halo exchange's buffers and
// the measured step `step` (measure_step_memory). The training memory of estimate_plan's rank
// less the process.
double graph_rank_bytes(const TrainConfig& config, const DatasetInfo& data, const PartShape& part,
                        const StepMemory& step);
// What the GPU of a graph-mode rank holding `part` would hold while training (planned with the
// CPU's step; no GPU has checked it): graph_rank_bytes plus the layer outputs that a host step
// keeps as their signs only (Model::keep_signs_only), whole on a GPU.
double graph_rank_device_bytes(const TrainConfig& config, const DatasetInfo& data,
                               const PartShape& part, const StepMemory& step);

// A floor of graph_rank_bytes that needs no measured step: the part as loaded, its operator's
// weights (4 bytes an entry) and every layer's output once (attention layers': four rows of it).
double graph_rank_floor_bytes(const TrainConfig& config, const DatasetInfo& data,
                              const PartShape& part);

}  // namespace tessera
