// SPDX-License-Identifier: Apache-2.0
// The pre-flight planner (engine/planner.h).
#include "engine/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/host_memory.h"
#include "datasets/loaders.h"
#include "datasets/synthetic.h"
#include "engine/pipeline.h"
#include "engine/system.h"
#include "engine/traffic_model.h"
#include "engine/trainer.h"
#include "partition/partition_store.h"
#include "partition/plan_file.h"

namespace tessera {

std::vector<PartShape> part_shapes(const Csr& graph, const PartitionPlan& plan,
                                   std::span<const GlobalId> train_idx) {
  const std::int64_t n = graph.num_rows();
  TESSERA_CHECK(static_cast<std::int64_t>(plan.owner.size()) == n, InvalidArgument, "a plan of ",
                plan.owner.size(), " owners for a graph of ", n, " rows");
  const int k = plan.num_parts;
  for (const int p : plan.owner)
    TESSERA_CHECK(p >= 0 && p < k, InvalidArgument, "an owner ", p, " outside [0, ", k, ")");
  std::vector<PartShape> parts(static_cast<std::size_t>(k));
  // halo: distinct (part, column) pairs over the part's rows. A column is a halo row of part p
  // when some row of p lists it and p does not own it: mark it once per part with the last part
  // that counted it. The graph is symmetric, so a row v is sent to every other part that owns a
  // neighbour of v (once per part), and that is the same count seen from v's side.
  std::vector<int> seen_by(static_cast<std::size_t>(n), -1);
  const auto& indptr = graph.indptr();
  const auto& indices = graph.indices();
  std::vector<std::vector<GlobalId>> rows_of(static_cast<std::size_t>(k));
  for (std::int64_t v = 0; v < n; ++v)
    rows_of[static_cast<std::size_t>(plan.owner[v])].push_back(v);
  std::vector<GlobalId> sent_to(static_cast<std::size_t>(k), -1);  // the last row sent to q
  for (int p = 0; p < k; ++p) {
    PartShape& s = parts[static_cast<std::size_t>(p)];
    for (const GlobalId v : rows_of[static_cast<std::size_t>(p)]) {
      ++s.owned;
      bool boundary = false;
      for (EdgeOffset e = indptr[v]; e < indptr[v + 1]; ++e) {
        const NodeId u = indices[static_cast<std::size_t>(e)];
        const int q = plan.owner[static_cast<std::size_t>(u)];
        ++s.entries;
        if (q == p) continue;
        ++s.halo_entries;
        boundary = true;
        if (seen_by[static_cast<std::size_t>(u)] != p) {
          seen_by[static_cast<std::size_t>(u)] = p;
          ++s.halo;
        }
      }
      if (boundary) ++s.boundary;
      // v goes to every other part among its neighbours' owners, once each.
      for (EdgeOffset e = indptr[v]; e < indptr[v + 1]; ++e) {
        const int q = plan.owner[static_cast<std::size_t>(indices[static_cast<std::size_t>(e)])];
        if (q != p && sent_to[static_cast<std::size_t>(q)] != v) {
          sent_to[static_cast<std::size_t>(q)] = v;
          ++s.send;
        }
      }
    }
  }
  for (const GlobalId v : train_idx) ++parts[static_cast<std::size_t>(plan.owner[v])].train;
  return parts;
}

namespace {

// Bytes of one CPU tensor of `values` floats: what the allocator maps (core/device.cc).
double mapped_bytes(double values) {
  const double bytes = 4.0 * values;
  if (bytes >= static_cast<double>(HostBlockCache::kLargeBlock))
    return static_cast<double>(HostBlockCache::block_size(static_cast<std::size_t>(bytes)));
  return std::ceil(bytes / 64.0) * 64.0;
}

// Three epochs, each evaluated, of `config` on a synthetic graph of `rows` rows: the highest
// tensor memory above what the trainer held before its first step, less the part's features.
double step_bytes(const TrainConfig& config, const DatasetInfo& data, double mean_degree,
                  std::int64_t rows, std::int64_t* parameters) {
  SyntheticConfig synth;
  synth.name = "plan-probe";
  synth.num_nodes = rows;
  synth.num_edges = std::max<std::int64_t>(1, static_cast<std::int64_t>(mean_degree * rows / 2.0));
  synth.num_features = data.num_features;
  synth.num_classes = data.task == TaskType::MultiClass ? data.num_classes : 2;
  synth.seed = 1;
  Dataset dataset = generate_synthetic(synth);
  if (data.task == TaskType::MultiLabel) {
    // The same rows as multi-label targets with the dataset's tasks.
    dataset.task = TaskType::MultiLabel;
    dataset.num_tasks = data.num_tasks;
    dataset.eval_metric = data.eval_metric;
    dataset.targets = Tensor(rows, data.num_tasks);
    float* t = dataset.targets.f32();
    for (std::int64_t i = 0; i < rows * data.num_tasks; ++i) t[i] = static_cast<float>(i % 2);
    dataset.labels.clear();
  }
  TrainConfig c = config;  // its mode as given: graph, or a one-stage pipeline
  c.epochs = 3;            // the later epochs reuse what the first one and its evaluation freed
  c.runs = 1;
  c.eval_every = 1;
  c.verbosity = 0;
  c.checkpoint_dir.clear();
  c.checkpoint_every = 0;
  c.handle_signals = false;
  c.metrics.clear();
  c.summary.clear();
  c.save_predictions.clear();
  c.save_embeddings.clear();
  c.save_model.clear();
  c.predict.clear();
  c.restore_best = false;
  c.device = "cpu";
  // No memory check of the probe (a graph-mode check measures its step with this very probe):
  // a budget of an exabyte, which every probe fits.
  c.memory_budget = 1e9;
  // The probe's features stay f32, the dataset's, which `own` takes away: the step is the same
  // with bf16 features but for their widened blocks (a few MiB, not counted).
  c.feature_dtype = "f32";
  host_block_cache().trim();
  const double before = static_cast<double>(host_tensor_bytes().current);
  reset_host_tensor_peak();
  double peak = 0.0;
  {
    Trainer trainer(c, dataset);
    trainer.train_run(0);
    *parameters = static_cast<std::int64_t>(trainer.model().params().size());
    peak = static_cast<double>(host_tensor_bytes().peak);
  }
  host_block_cache().trim();
  const double own =
      mapped_bytes(static_cast<double>(rows * data.num_features)) +
      (data.task == TaskType::MultiLabel ? mapped_bytes(static_cast<double>(rows * data.num_tasks))
                                         : 0.0);
  return peak - before - own;
}

// Bytes per row and fixed bytes from two probes, of rows_small and twice as many rows.
StepMemory fit_step(const TrainConfig& config, const DatasetInfo& data, double mean_degree,
                    std::int64_t rows_small) {
  TESSERA_CHECK(rows_small >= 64, InvalidArgument, "probe rows ", rows_small, " < 64");
  StepMemory m;
  const double small = step_bytes(config, data, mean_degree, rows_small, &m.parameters);
  const double large = step_bytes(config, data, mean_degree, 2 * rows_small, &m.parameters);
  m.per_row = std::max(0.0, (large - small) / static_cast<double>(rows_small));
  m.fixed = std::max(0.0, small - m.per_row * static_cast<double>(rows_small));
  return m;
}

}  // namespace

StepMemory measure_step_memory(const TrainConfig& config, const DatasetInfo& data,
                               double mean_degree, std::int64_t rows_small) {
  TrainConfig c = config;
  c.parallel = "graph";
  c.stages = 0;
  c.chunks = 0;
  return fit_step(c, data, mean_degree, rows_small);
}

StepMemory measure_stage_memory(const TrainConfig& config, const DatasetInfo& data,
                                double mean_degree, const PipelineLayout& layout,
                                std::int64_t rows_small) {
  TrainConfig c = config;
  c.parallel = "pipeline";
  c.stages = 1;
  c.chunks = layout.chunks;
  c.num_layers = layout.num_layers();
  // A later stage's first layer reads the previous layer's output, dropped out.
  if (!layout.first_stage()) c.input_dropout = config.dropout;
  DatasetInfo shape = data;
  if (!layout.first_stage()) shape.num_features = config.hidden_channels;
  if (!layout.last_stage()) {
    shape.task = TaskType::MultiClass;
    shape.num_classes = config.hidden_channels;
  }
  StepMemory m = fit_step(c, shape, mean_degree, rows_small);
  // The probe is its own last stage: a stage before the last keeps neither the loss workspace
  // nor the evaluation's logits (two rows of its output width).
  if (!layout.last_stage())
    m.per_row = std::max(0.0, m.per_row - 2.0 * 4.0 * static_cast<double>(config.hidden_channels));
  return m;
}

double part_data_bytes(const PartShape& p, const DatasetInfo& data, DType features_dtype) {
  const double n = static_cast<double>(p.owned), h = static_cast<double>(p.halo);
  const double feature_bytes = static_cast<double>(dtype_size(features_dtype));
  double bytes = mapped_bytes(n * static_cast<double>(data.num_features) * feature_bytes / 4.0);
  bytes += data.task == TaskType::MultiClass
               ? 8.0 * n
               : mapped_bytes(n * static_cast<double>(data.num_tasks));
  bytes += 8.0 * (n + h);                                           // owned and halo global ids
  bytes += 8.0 * (n + 1.0) + 4.0 * static_cast<double>(p.entries);  // adjacency
  bytes += 4.0 * (n + h);                                           // degrees
  bytes += 4.0 * static_cast<double>(p.send);                       // halo plan
  bytes += 4.0 * n;                                                 // split rows (at most one each)
  return bytes;
}

namespace {

// The self loops a kind's operator adds to the part's adjacency: one a row for GCN and attention.
double self_loops(const PartShape& p, const LayerKind& kind) {
  const bool looped = kind.op == &kGcnOperator || kind.op == &kAttentionOperator;
  return looped ? static_cast<double>(p.owned) : 0.0;
}

// The part's adjacency (graph mode frees it once the operator is built: graph_mode.cc).
double adjacency_bytes(const PartShape& p) {
  return 8.0 * (static_cast<double>(p.owned) + 1.0) + 4.0 * static_cast<double>(p.entries);
}

// What building a graph-mode rank's operator adds to its part at its height, less the part's
// adjacency, whose arrays become the operator's: GCN and attention kinds insert their self loops
// into its index array, which grows once (the old array beside the new one); the weights add 4
// bytes an entry; the propagator copies the halo columns out (8 bytes a halo entry) and compacts
// the owned block in place, copying it into arrays of its size (one array at a time) when the
// halo entries are more than an eighth of the owned ones.
double operator_build_bytes(const PartShape& p, const TrainConfig& config) {
  const double n = static_cast<double>(p.owned), self = self_loops(p, *config.kind());
  const double entries = static_cast<double>(p.entries) + self;
  const double adjacency = adjacency_bytes(p);
  const double grown = self > 0.0 ? adjacency + 4.0 * entries : adjacency;
  const double weighted = 8.0 * (n + 1.0) + 8.0 * entries;
  const double halo_entries = static_cast<double>(p.halo_entries);
  const double own_entries = entries - halo_entries;
  const double halo_block = 8.0 * (static_cast<double>(p.boundary) + 1.0) + 8.0 * halo_entries;
  const double shrink = halo_entries > own_entries / 8.0 ? 4.0 * own_entries : 0.0;
  return std::max(grown, weighted + halo_block + shrink) - adjacency;
}

double codec_row_bytes(CodecKind codec, std::int64_t width) {
  return static_cast<double>(encoded_row_bytes(codec, width));
}

// What a graph-mode rank holds for its operator (HaloPropagator: the owned block, its
// transpose unless symmetric, the halo block and its transpose, row lists; attention kinds the
// whole pattern and its column ids) and its halo exchange (received rows, boundary sums, halo
// gradients and the gathered send rows at the widest exchange, and the encoded messages).
double operator_bytes(const PartShape& p, const TrainConfig& config) {
  const LayerKind& kind = *config.kind();
  const double n = static_cast<double>(p.owned), h = static_cast<double>(p.halo);
  const double self = self_loops(p, kind);
  const double own_entries = static_cast<double>(p.entries - p.halo_entries) + self;
  const double halo_entries = static_cast<double>(p.halo_entries);
  const double b = static_cast<double>(p.boundary);
  double bytes = 8.0 * (n + 1.0) + 8.0 * own_entries;  // owned block
  // compacted in place: it keeps the halo entries' room unless they were more than an eighth
  if (halo_entries <= own_entries / 8.0) bytes += 8.0 * halo_entries;
  if (kind.op->symmetry != MatrixSymmetry::Symmetric) bytes += 8.0 * (n + 1.0) + 8.0 * own_entries;
  bytes += 8.0 * (b + 1.0) + 8.0 * halo_entries + 8.0 * (h + 1.0) + 8.0 * halo_entries;
  bytes += 4.0 * b + 4.0 * n;  // boundary rows, all rows
  if (kind.attention)
    bytes += 8.0 * (n + 1.0) + 8.0 * (own_entries + halo_entries) + 8.0 * (n + h) + 4.0 * n;
  return bytes;
}

// The exchange's tensors (received rows, which the halo gradients reuse; gathered send rows, which
// hold the boundary sums between exchanges) are made once at the widest exchange
// (HaloPropagator::reserve) and reused by every layer; the decoded blocks of a codec grow to the
// widest too; the encoded messages (vectors) keep the widest; without a codec the rows go out of
// the gathered rows and come in in place. (The owned rows' bf16 workspace is in the measured step.)
double exchange_bytes(const PartShape& p, const TrainConfig& config, const ExchangedWidths& w) {
  if (p.halo == 0 && p.send == 0) return 0.0;
  const double width = static_cast<double>(widest_exchange(w));
  const double h = static_cast<double>(p.halo), s = static_cast<double>(p.send);
  const double b = static_cast<double>(p.boundary);
  const CodecKind fwd = config.forward_codec(), bwd = config.backward_codec();
  double bytes = mapped_bytes(h * width) + mapped_bytes(std::max(b, s) * width);
  if (fwd != CodecKind::None || bwd != CodecKind::None) bytes += mapped_bytes(h * width);
  // bf16 aggregation: the halo or boundary rows the SpMMs read, rounded (2 bytes a value).
  if (config.aggregation_dtype() == DType::BF16) bytes += mapped_bytes(std::max(h, b) * width / 2);
  // Raw rows (no codec) are sent from the gathered rows and received in place: only a codec's
  // direction has encoded messages.
  const std::int64_t wi = widest_exchange(w);
  const double fwd_row = fwd == CodecKind::None ? 0.0 : codec_row_bytes(fwd, wi);
  const double bwd_row = bwd == CodecKind::None ? 0.0 : codec_row_bytes(bwd, wi);
  bytes += std::max(fwd_row, bwd_row) * (h + s);
  return bytes;
}

}  // namespace

std::uint64_t PlanEstimate::max_peak() const {
  std::uint64_t most = 0;
  for (const RankMemory& m : memory) most = std::max(most, m.peak());
  return most;
}

namespace {

// The bytes of one training epoch, summed over the ranks, by category.
void estimate_traffic(const PlanInputs& in, const ExchangedWidths& widths, PlanEstimate& e) {
  const TrainConfig& c = in.config;
  std::int64_t halo_total = 0;
  for (const PartShape& p : in.parts) halo_total += p.halo;
  ExchangedWidths fwd_only = widths, bwd_only = widths;
  std::fill(fwd_only.backward.begin(), fwd_only.backward.end(), 0);
  std::fill(bwd_only.forward.begin(), bwd_only.forward.end(), 0);
  const CodecKind fwd = c.forward_codec(), bwd = c.backward_codec();
  if (e.parts > 1) {
    e.halo_forward = graph_mode_bytes(halo_total, fwd_only, fwd, bwd);
    e.halo_backward = graph_mode_bytes(halo_total, bwd_only, fwd, bwd);
  }
  if (e.stages > 1) {
    const int streams = c.kind()->initial_residual ? 2 : 1;
    e.pipeline =
        pipeline_mode_bytes(e.stages, in.data.num_nodes, c.hidden_channels, fwd, bwd, streams);
  }
  // The gradient all-reduce between the parts (ring: 2 (G - 1) times the parameters, summed
  // over the ranks of each stage; the stages together hold the model once).
  e.all_reduce =
      2.0 * static_cast<double>(e.parts - 1) * 4.0 * static_cast<double>(in.step.parameters);
}

// Rank r's load phase in graph mode (or on a first stage), given its part's bytes `own`.
double load_bytes(const PlanInputs& in, int r, double own, double largest_part) {
  const double baseline = static_cast<double>(in.facts.baseline);
  const double graph =
      8.0 * static_cast<double>(in.data.num_nodes + 1) + 4.0 * static_cast<double>(in.entries);
  const double all_features = 4.0 * static_cast<double>(in.data.num_nodes * in.data.num_features);
  // Partitioning a Tessera HDF5 file in process, rank 0 holds no features (every rank reads
  // its own rows: part_loader.cc); the facts were measured with them.
  const bool held = in.source != PartSourceKind::InProcess || !is_hdf5_spec(in.config.dataset);
  const double features = held ? all_features : 0.0;
  const double dataset = static_cast<double>(in.facts.dataset) - all_features + features;
  const double load_peak = static_cast<double>(in.facts.load_peak) - all_features + features;
  // Renumbering (--node-order): the dataset and a training graph, each array moved to a new
  // copy in turn (the features or a graph, the larger), and the order with its inverse.
  const double renumber = in.config.node_order == "none"
                              ? 0.0
                              : dataset + graph + std::max(features, graph) +
                                    16.0 * static_cast<double>(in.data.num_nodes);
  switch (in.source) {
    case PartSourceKind::Single: return baseline + std::max(load_peak, renumber);
    case PartSourceKind::Store: return baseline + own;
    case PartSourceKind::Sliced: return baseline + 2.0 * own;  // its rows as read, and the part
    case PartSourceKind::InProcess: break;
  }
  if (r != 0) return baseline + 2.0 * own;  // the received image and the part read from it
  // The whole dataset, the training graph and the partitioner; the renumbering; then the
  // dataset, the graph and the largest part with its image while the parts are built and sent
  // (all handed back to the system before training: load_part).
  return baseline + std::max({load_peak, dataset + static_cast<double>(in.facts.partition_peak),
                              renumber, dataset + graph + 2.0 * largest_part + own});
}

// Bytes a row that a GPU keeps beyond the host's measured step: the hidden layers' outputs that
// the host reduces to their signs (keeps_signs_only).
double signs_gap_per_row(const TrainConfig& c, const DatasetInfo& data) {
  const ModelConfig model = model_config(c, data);
  const std::int64_t f = c.hidden_channels;
  double gap = 0.0;
  for (int j = 0; j + 1 < c.num_layers; ++j)
    if (keeps_signs_only(model, j))
      gap += 4.0 * static_cast<double>(f) - static_cast<double>((f + 7) / 8);
  return gap;
}

// What a graph-mode rank holds while training beside the process and its part.
double graph_train_bytes(const TrainConfig& c, const StepMemory& step, const PartShape& p,
                         const ExchangedWidths& widths) {
  double bytes = operator_bytes(p, c) + exchange_bytes(p, c, widths) + step.fixed +
                 step.per_row * static_cast<double>(p.owned);
  if (c.kind()->attention) {
    // The attention layers' (N + H)-row tensors over the halo rows: heads and source terms,
    // their gradients and the exchanged copy, at every layer.
    bytes += 3.0 * 4.0 * static_cast<double>(p.halo) *
             static_cast<double>(
                 std::accumulate(widths.forward.begin(), widths.forward.end(), std::int64_t{0}));
  }
  return bytes;
}

// What a pipeline stage holds while training beside the process and its part: the measured
// stage, the operator in chunk order with its per-chunk blocks and their transposes (12 bytes
// an entry, three times, and 16 a row), the encoded messages to and from the neighbouring
// stages (kept per chunk), and in hybrid mode the halo rows of the stage's historical buffers
// (inputs, gradients) and of the refresh's gathered rows at each of its layers.
double stage_train_bytes(const PlanInputs& in, const PartShape& p, const PipelineLayout& layout) {
  const TrainConfig& c = in.config;
  TESSERA_CHECK(layout.stage < static_cast<int>(in.stage_steps.size()), InvalidArgument,
                "the memory of stage ", layout.stage, " is needed, ", in.stage_steps.size(),
                " stages given");
  const StepMemory& step = in.stage_steps[static_cast<std::size_t>(layout.stage)];
  const double n = static_cast<double>(p.owned);
  double bytes = step.fixed + step.per_row * n;
  const double op_entries =
      static_cast<double>(p.entries + (c.kind()->op == &kGcnOperator ? p.owned : std::int64_t{0}));
  bytes += 3.0 * 12.0 * op_entries + 16.0 * n;
  if (!layout.last_stage()) bytes += n * codec_row_bytes(c.forward_codec(), c.hidden_channels);
  if (!layout.first_stage())
    bytes += 2.0 * n * codec_row_bytes(c.backward_codec(), c.hidden_channels);
  if (p.halo > 0) {
    bytes += 3.0 * 4.0 * static_cast<double>(p.halo) * static_cast<double>(c.hidden_channels) *
             layout.num_layers();
  }
  return bytes;
}

}  // namespace

double graph_rank_bytes(const TrainConfig& c, const DatasetInfo& d, const PartShape& p,
                        const StepMemory& step) {
  const ExchangedWidths widths = exchanged_widths(c.num_layers, d.num_features, c.hidden_channels,
                                                  d.num_outputs(), c.kind(), c.hyper());
  // The part as loaded (f32 features), and as it trains (its features rounded to bf16 under
  // --feature-dtype bf16). The operator is built beside the part, which then holds no
  // adjacency; the features are rounded once the operator and the exchange's buffers exist: f32
  // and bf16 features at once beside them.
  const double own = part_data_bytes(p, d);
  const double adjacency = adjacency_bytes(p);
  const double kept = part_data_bytes(p, d, c.features_dtype()) - adjacency;
  const double setup = own + operator_build_bytes(p, c);
  const double rounding = (own - adjacency) + (own - adjacency - kept) + operator_bytes(p, c) +
                          exchange_bytes(p, c, widths);
  return std::max({setup, rounding, kept + graph_train_bytes(c, step, p, widths)});
}

double graph_rank_device_bytes(const TrainConfig& c, const DatasetInfo& d, const PartShape& p,
                               const StepMemory& step) {
  return graph_rank_bytes(c, d, p, step) + signs_gap_per_row(c, d) * static_cast<double>(p.owned);
}

double graph_rank_floor_bytes(const TrainConfig& c, const DatasetInfo& d, const PartShape& p) {
  const double outputs =
      static_cast<double>(c.num_layers - 1) * static_cast<double>(c.hidden_channels) +
      static_cast<double>(d.num_outputs());
  // Attention layers also keep their projected rows, those rows with their attention terms, and
  // their gradient: three more rows of the layer's width.
  const double rows = c.kind()->attention ? 4.0 : 1.0;
  return part_data_bytes(p, d) + 4.0 * static_cast<double>(p.entries) +
         4.0 * static_cast<double>(p.owned) * outputs * rows;
}

PlanEstimate estimate_plan(const PlanInputs& in) {
  const TrainConfig& c = in.config;
  const DatasetInfo& d = in.data;
  PlanEstimate e;
  e.ranks = in.ranks;
  e.parts = static_cast<int>(in.parts.size());
  e.stages = e.ranks / std::max(1, e.parts);
  e.mode = in.ranks == 1 ? "single" : to_string(c.mode());
  e.codec = c.adaptive() ? "adaptive" : to_string(c.forward_codec());
  e.backward_codec = to_string(c.backward_codec());
  TESSERA_CHECK(e.parts >= 1 && e.parts * e.stages == e.ranks, InvalidArgument, e.parts,
                " parts do not divide ", e.ranks, " ranks");
  const ExchangedWidths widths = exchanged_widths(c.num_layers, d.num_features, c.hidden_channels,
                                                  d.num_outputs(), c.kind(), c.hyper());
  estimate_traffic(in, widths, e);
  const double baseline = static_cast<double>(in.facts.baseline);
  std::vector<double> data_bytes;  // the parts as loaded (f32 features)
  for (const PartShape& p : in.parts) data_bytes.push_back(part_data_bytes(p, d));
  const double largest_part = *std::max_element(data_bytes.begin(), data_bytes.end());
  std::vector<double> layer_cost;
  if (e.stages > 1)
    layer_cost = layer_costs(c.kind(), c.num_layers, d.num_features, c.hidden_channels,
                             d.num_outputs(), d.num_nodes, in.entries + d.num_nodes);
  for (int r = 0; r < e.ranks; ++r) {
    const int part = r / e.stages;
    const PartShape& p = in.parts[static_cast<std::size_t>(part)];
    const double own = data_bytes[static_cast<std::size_t>(part)];
    double load = load_bytes(in, r, own, largest_part);
    double train = baseline + own;
    if (e.stages == 1) {
      train = baseline + graph_rank_bytes(c, d, p, in.step);
    } else {
      const PipelineLayout layout = pipeline_layout(c, r, e.ranks, layer_cost);
      train += stage_train_bytes(in, p, layout);
      // Stages after the first receive the part as an image from the first (held with it).
      load = layout.first_stage() ? load + own : baseline + 2.0 * own;
    }
    const double device =
        e.stages == 1 ? graph_rank_device_bytes(c, d, p, in.step) : train - baseline;
    e.memory.push_back({static_cast<std::uint64_t>(load), static_cast<std::uint64_t>(train),
                        static_cast<std::uint64_t>(device)});
  }
  return e;
}

PartShape part_shape(const GraphPart& part) {
  const LocalGraph& g = part.graph;
  PartShape s;
  s.owned = g.num_owned();
  s.halo = g.num_halo();
  s.entries = g.adjacency.nnz();
  s.send = g.halo.num_send();
  s.train = static_cast<std::int64_t>(part.train_rows.size());
  const auto& indptr = g.adjacency.indptr();
  const auto& indices = g.adjacency.indices();
  for (std::int64_t v = 0; v < s.owned; ++v) {
    bool boundary = false;
    for (EdgeOffset e = indptr[v]; e < indptr[v + 1]; ++e) {
      if (indices[static_cast<std::size_t>(e)] >= s.owned) {
        ++s.halo_entries;
        boundary = true;
      }
    }
    if (boundary) ++s.boundary;
  }
  return s;
}

namespace {

// Entries of each part looked up for their reverse when a plan streams a file's block parts.
constexpr std::int64_t kPlanSample = 4096;

void say(bool progress, const std::string& line) {
  if (progress) std::fprintf(stderr, "Plan: %s\n", line.c_str());
}

// The configuration with another mode, stage count or codec.
TrainConfig variant(const TrainConfig& c, const std::string& parallel, int stages,
                    const std::string& codec, const std::string& backward) {
  TrainConfig v = c;
  v.parallel = parallel;
  v.stages = stages;
  v.chunks = c.parallel == parallel ? c.chunks : 0;
  v.codec = codec;
  v.codec_backward = backward;
  return v;
}

// The kinds whose pipeline stages the planner measures (a GCNII stage of one layer is not a
// model of its own; GAT's stages are not validated against measured runs).
bool pipelines(const TrainConfig& c) { return !c.kind()->initial_residual && !c.kind()->attention; }

// Whether train_gcn would accept `variant`: the table offers only alternatives the user can run
// (the pipelined modes refuse the options of graph mode alone, such as --aggregate-dtype and
// --feature-dtype bf16).
bool accepted(const TrainConfig& variant) {
  try {
    validate(variant);
    return true;
  } catch (const Error& e) {
    if (e.category() != ErrorCategory::InvalidArgument) throw;
    return false;
  }
}

// make_plan's steps over one report: the parts (a store's, or the dataset loaded and
// partitioned here), the measured step, and the rows.
class Planner {
 public:
  Planner(const TrainConfig& config, bool progress, bool gpu)
      : config_(config), progress_(progress) {
    report_.dataset = config.dataset;
    report_.partition_method = config.partition;
    report_.gpu = gpu;
    report_.facts.baseline = current_rss_bytes();
  }
  PlanReport& report() { return report_; }

  // --partition block or --partition-file on a Tessera HDF5 file: every rank reads its own rows
  // (part_loader.cc).
  bool sliced() const {
    return (config_.partition == "block" || !config_.partition_file.empty()) &&
           is_hdf5_spec(config_.dataset);
  }

  // A store: its parts one at a time, each as its rank would read it. Returns its part count.
  int read_store() {
    const StoreMeta meta = read_store_meta(config_.partitions);
    report_.from_store = true;
    report_.data = meta.dataset;
    report_.dataset = meta.dataset_spec;
    report_.partition_method = to_string(meta.method);
    std::vector<PartShape> parts;
    for (int p = 0; p < meta.num_parts; ++p) {
      parts.push_back(part_shape(read_part(config_.partitions, meta, p)));
      report_.entries += parts.back().entries;
    }
    say(progress_,
        "read the " + std::to_string(meta.num_parts) + " parts of " + config_.partitions);
    shapes_[meta.num_parts] = std::move(parts);
    return meta.num_parts;
  }

  // Whether the configuration's parts are planned from the file without loading it: block parts
  // of a Tessera HDF5 file in graph mode, which every rank reads in slices.
  bool streams(int ranks) const {
    return sliced() && config_.partition_file.empty() && config_.mode() == ParallelMode::Graph &&
           ranks >= 2;
  }

  // The shapes of the block parts for each count of `needed` from 2 up (counts past the file's
  // nodes left out) streamed from the file (block_shapes_from_file), which is never loaded.
  void stream_shapes(const std::vector<int>& needed, int config_parts) {
    Hdf5GraphReader file(config_.dataset);
    report_.streamed = true;
    DatasetInfo& d = report_.data;
    d.name = file.flags().name;
    d.task = file.flags().task;
    d.eval_metric = file.flags().eval_metric;
    d.num_classes = file.flags().num_classes;
    d.num_tasks = file.flags().num_tasks;
    d.num_nodes = file.num_nodes();
    d.num_edges = file.num_entries();
    d.num_features = file.num_features();
    d.fingerprint = file.fingerprint();
    check_num_parts(d.num_nodes, config_parts);
    for (const int k : needed) {
      if (k < 2 || k > d.num_nodes || shapes_.count(k)) continue;
      Stopwatch watch;
      StreamedShapes streamed = block_shapes_from_file(file, k, kPlanSample, config_.seed);
      if (k == config_parts) {
        report_.sampled = streamed.sampled;
        report_.entries_exact = streamed.exact;
        report_.entries = 0;
        for (const PartShape& part : streamed.parts) report_.entries += part.entries;
      }
      char line[200];
      std::snprintf(line, sizeof line,
                    "streamed the %d block parts of %s in %.2f s (%lld entries looked up%s)", k,
                    config_.dataset.c_str(), watch.seconds(),
                    static_cast<long long>(streamed.sampled), streamed.exact ? ", all" : "");
      say(progress_, line);
      shapes_[k] = std::move(streamed.parts);
    }
  }

  // Loads the dataset and partitions it into each part count of `needed` (counts past its nodes
  // left out), measuring both phases' resident memory.
  void load_and_partition(std::vector<int> needed, int config_parts) {
    report_.facts.peaks_measured = reset_rss_peak();
    const std::uint64_t before = current_rss_bytes();
    Dataset dataset = load_dataset(config_.dataset, LoadOptions{.progress = progress_});
    const std::uint64_t after = current_rss_bytes();
    const std::uint64_t high = report_.facts.peaks_measured ? rss_peak_since_reset() : after;
    report_.facts.load_peak = high - std::min(high, before);
    report_.facts.dataset = after - std::min(after, before);
    report_.data = dataset_info(dataset);
    const Csr graph = training_graph(dataset);
    report_.entries = graph.nnz();
    say(progress_, "loaded " + config_.dataset + " (" + std::to_string(report_.data.num_nodes) +
                       " nodes, " + std::to_string(report_.entries) + " adjacency entries)");
    check_num_parts(report_.data.num_nodes, config_parts);
    const PartitionMethod method = parse_partition_method(config_.partition);
    // --partition-file: its plan for its part count (the partitioner's for the alternatives).
    PlanFile file;
    if (!config_.partition_file.empty()) {
      file = read_plan_file(config_.partition_file);
      check_plan_matches(file, "--partition-file " + config_.partition_file, report_.data.num_nodes,
                         report_.data.fingerprint, file.plan.num_parts);
      report_.partition_method = "plan file";
    }
    for (const int k : needed) {
      if (shapes_.count(k) || k > report_.data.num_nodes) continue;  // too many parts: no row
      PartitionPlan plan;
      plan.num_parts = 1;
      plan.owner.assign(static_cast<std::size_t>(report_.data.num_nodes), 0);
      if (k > 1) {
        plan = k == file.plan.num_parts ? file.plan : partition(method, graph, dataset, k);
      }
      shapes_[k] = part_shapes(graph, plan, dataset.train_idx);
    }
  }

  void measure_step() {
    mean_degree_ = report_.data.num_nodes > 0 ? static_cast<double>(report_.entries) /
                                                    static_cast<double>(report_.data.num_nodes)
                                              : 0.0;
    report_.step = measure_step_memory(config_, report_.data, mean_degree_);
    char line[160];
    std::snprintf(line, sizeof line,
                  "a training step keeps %.0f bytes a row and %.1f MiB fixed (measured)",
                  report_.step.per_row, report_.step.fixed / 1048576.0);
    say(progress_, line);
  }

  // The row of configuration `c` on k ranks and `parts` graph parts; false when those parts
  // were not made.
  bool add(const TrainConfig& c, int k, int parts) {
    const auto it = shapes_.find(parts);
    if (it == shapes_.end()) return false;
    PlanInputs in;
    in.config = c;
    in.data = report_.data;
    in.entries = report_.entries;
    in.parts = it->second;
    in.source = report_.from_store ? PartSourceKind::Store
                : parts == 1       ? PartSourceKind::Single
                : sliced()         ? PartSourceKind::Sliced
                                   : PartSourceKind::InProcess;
    in.facts = report_.facts;
    in.step = report_.step;
    in.ranks = k;
    if (k / parts > 1) in.stage_steps = stage_steps(c, k, k / parts);
    if (report_.rows.empty()) report_.parts = in.parts;
    report_.rows.push_back(estimate_plan(in));
    return true;
  }

 private:
  PartitionPlan partition(PartitionMethod method, const Csr& graph, const Dataset& dataset, int k) {
    const bool reset = reset_rss_peak();
    const std::uint64_t resident = current_rss_bytes();
    Stopwatch watch;
    PartitionPlan plan = make_partition(method, graph, dataset.train_idx, k, config_.seed);
    const std::uint64_t high = reset ? rss_peak_since_reset() : current_rss_bytes();
    // What partitioning holds in a job: the training graph it builds, and the partitioner.
    const auto graph_bytes =
        static_cast<std::uint64_t>(8 * (graph.num_rows() + 1) + 4 * graph.nnz());
    report_.facts.partition_peak =
        std::max(report_.facts.partition_peak, high - std::min(high, resident) + graph_bytes);
    char line[160];
    std::snprintf(line, sizeof line, "partitioned (%s) into %d parts in %.2f s",
                  config_.partition.c_str(), k, watch.seconds());
    say(progress_, line);
    return plan;
  }

  // Every stage's memory, each distinct (first layer, layers, last stage, chunks) measured once.
  std::vector<StepMemory> stage_steps(const TrainConfig& c, int k, int stages) {
    const std::vector<double> cost =
        layer_costs(c.kind(), c.num_layers, report_.data.num_features, c.hidden_channels,
                    report_.data.num_outputs(), report_.data.num_nodes,
                    report_.entries + report_.data.num_nodes);
    std::vector<StepMemory> steps;
    for (int stage = 0; stage < stages; ++stage) {
      const PipelineLayout layout = pipeline_layout(c, stage, k, cost);
      const auto key = std::make_tuple(layout.first_layer(), layout.num_layers(),
                                       layout.last_stage(), layout.chunks);
      auto found = stage_memory_.find(key);
      if (found == stage_memory_.end()) {
        found =
            stage_memory_.emplace(key, measure_stage_memory(c, report_.data, mean_degree_, layout))
                .first;
      }
      steps.push_back(found->second);
    }
    return steps;
  }

  const TrainConfig& config_;
  const bool progress_;
  PlanReport report_;
  std::map<int, std::vector<PartShape>> shapes_;  // by graph parts
  double mean_degree_ = 0.0;
  std::map<std::tuple<int, int, bool, int>, StepMemory> stage_memory_;
};

// The configuration's graph parts on `ranks` ranks: the ranks, or in the pipelined modes the
// ranks over the stages (pipeline_layout checks --stages and --chunks against them).
int configuration_parts(const TrainConfig& c, int ranks) {
  if (ranks == 1 || c.mode() == ParallelMode::Graph) return ranks;
  const std::vector<double> unit(static_cast<std::size_t>(c.num_layers), 1.0);
  return pipeline_layout(c, 0, ranks, unit).groups;
}

}  // namespace

PlanReport make_plan(const TrainConfig& config, std::span<const int> ranks, bool progress,
                     bool gpu) {
  for (const int k : ranks)
    TESSERA_CHECK(k >= 1 && k <= 65536, InvalidArgument, "--plan-ranks: ", k,
                  " is not a rank count in [1, 65536]");
  const ParallelMode mode = config.mode();
  Stopwatch watch;
  Planner planner(config, progress, gpu);
  int requested = ranks.empty() ? 0 : ranks.front();
  const bool store = !config.partitions.empty();
  if (store) {
    const int parts = planner.read_store();
    TESSERA_CHECK(requested == 0 || requested == parts, InvalidArgument, "--plan-ranks ", requested,
                  ": --partitions ", config.partitions, " holds ", parts, " parts, one per rank");
    TESSERA_CHECK(mode == ParallelMode::Graph, InvalidArgument,
                  "--plan with --partitions plans --parallel graph (a store holds one part per "
                  "rank)");
    requested = parts;
  }
  TESSERA_CHECK(requested >= 1, InvalidArgument, "--plan: no rank count to plan for");
  const int config_parts = configuration_parts(config, requested);
  const bool streamed = !store && planner.streams(requested);
  if (!store) {
    std::vector<int> needed = {config_parts, 1};
    needed.insert(needed.end(), ranks.begin(), ranks.end());
    const bool hybrid_row = !streamed && requested >= 4 && requested % 2 == 0;
    if (hybrid_row) needed.push_back(requested / 2);  // hybrid over 2 stages
    if (streamed) {
      planner.stream_shapes(needed, config_parts);
    } else {
      planner.load_and_partition(needed, config_parts);
    }
  }
  planner.measure_step();
  TESSERA_CHECK(planner.add(config, requested, config_parts), InvalidArgument,
                "--plan: the configuration's ", config_parts, " parts could not be planned");
  if (requested > 1) {
    // The other codecs in graph mode (the configuration itself is the first row).
    for (const char* codec : {"none", "bf16", "int8"}) {
      const bool same = mode == ParallelMode::Graph && config.codec == codec &&
                        backward_codec_name(config) == codec;
      if (!same) planner.add(variant(config, "graph", 0, codec, ""), requested, requested);
    }
    // The pipelined modes, where they accept the configuration.
    const bool pipelined = !store && !streamed && pipelines(config);
    const TrainConfig pipeline =
        variant(config, "pipeline", requested, config.codec, config.codec_backward);
    if (pipelined && mode != ParallelMode::Pipeline && config.num_layers >= requested &&
        accepted(pipeline)) {
      planner.add(pipeline, requested, 1);
    }
    const TrainConfig hybrid = variant(config, "hybrid", 2, config.codec, config.codec_backward);
    if (pipelined && mode != ParallelMode::Hybrid && requested >= 4 && requested % 2 == 0 &&
        config.num_layers >= 2 && accepted(hybrid)) {
      planner.add(hybrid, requested, requested / 2);
    }
  }
  for (std::size_t i = 1; i < ranks.size(); ++i) {
    if (ranks[i] != requested && !store && (!streamed || ranks[i] >= 2))
      planner.add(variant(config, "graph", 0, config.codec, config.codec_backward), ranks[i],
                  ranks[i]);
  }
  planner.report().seconds = watch.seconds();
  return std::move(planner.report());
}

namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string mb(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / 1e6);
  return text;
}

// Tensors, operator and exchange of the largest rank: what a GPU holds (no process baseline, no
// loading, which happen on the host).
double device_bytes(const PlanEstimate& e) {
  double most = 0.0;
  for (const RankMemory& m : e.memory) most = std::max(most, static_cast<double>(m.device));
  return most;
}

}  // namespace

std::string plan_table(const PlanReport& r) {
  std::ostringstream out;
  const DatasetInfo& d = r.data;
  out << "Plan for " << r.dataset << ": " << d.num_nodes << " nodes, " << r.entries
      << (r.streamed && !r.entries_exact ? " adjacency entries (estimated), "
                                         : " adjacency entries, ")
      << d.num_features << " features, " << d.num_outputs() << " outputs; parts from "
      << (r.from_store ? "the partition store"
          : r.streamed ? r.partition_method + ", streamed from the file (never loaded; " +
                             std::to_string(r.sampled) + " entries looked up" +
                             (r.entries_exact ? ", all)" : ")")
          : r.partition_method == "plan file" ? std::string("the plan file (other part counts: ") +
                                                    "partitioned here by --partition)"
                                              : r.partition_method + " (run here)")
      << "\n";
  out << "Measured here: process " << gib(static_cast<double>(r.facts.baseline))
      << " GiB before loading";
  if (!r.from_store && !r.streamed)
    out << ", loading " << gib(static_cast<double>(r.facts.load_peak)) << " GiB at its peak ("
        << gib(static_cast<double>(r.facts.dataset)) << " GiB held), partitioning "
        << gib(static_cast<double>(r.facts.partition_peak)) << " GiB";
  if (!r.facts.peaks_measured)
    out << " (this system does not let a process reset its peak resident memory: the phases' "
           "peaks are read as their resident memory at the end)";
  char step[96];
  std::snprintf(step, sizeof step, "; a training step %.0f B a row + %.1f MiB", r.step.per_row,
                r.step.fixed / 1048576.0);
  out << step << "\n\n";
  out << "| mode | ranks | parts x stages | codec | peak GiB (largest rank) | rank 0 load GiB | "
         "training GiB (largest rank) | device GiB a rank | MB an epoch |\n";
  out << "|---|---|---|---|---|---|---|---|---|\n";
  for (const PlanEstimate& e : r.rows) {
    double load0 = e.memory.empty() ? 0.0 : static_cast<double>(e.memory[0].load);
    double train = 0.0;
    for (const RankMemory& m : e.memory) train = std::max(train, static_cast<double>(m.train));
    const std::string codec =
        e.codec == e.backward_codec ? e.codec : e.codec + "/" + e.backward_codec;
    out << "| " << e.mode << " | " << e.ranks << " | " << e.parts << " x " << e.stages << " | "
        << codec << " | " << gib(static_cast<double>(e.max_peak())) << " | " << gib(load0) << " | "
        << gib(train) << " | " << gib(device_bytes(e)) << " | " << mb(e.bytes_per_epoch())
        << " |\n";
  }
  out << "\nThe first row is the configuration asked for. Peak: the highest resident memory of a "
         "rank (loading, partitioning or training). Device: what a rank's GPU would hold "
         "(tensors, operator, halo buffers). MB an epoch: halo rows, pipeline streams and the "
         "gradient all-reduce of one training epoch, summed over the ranks, after the codec.\n";
  return out.str();
}

std::string plan_json(const PlanReport& r) {
  nlohmann::json j;
  j["dataset"] = r.dataset;
  j["nodes"] = r.data.num_nodes;
  j["entries"] = r.entries;
  j["features"] = r.data.num_features;
  j["outputs"] = r.data.num_outputs();
  j["partition"] = r.partition_method;
  j["from_store"] = r.from_store;
  j["streamed"] = r.streamed;
  j["entries_looked_up"] = r.sampled;
  j["entries_exact"] = r.entries_exact;
  j["baseline_bytes"] = r.facts.baseline;
  j["load_peak_bytes"] = r.facts.load_peak;
  j["dataset_bytes"] = r.facts.dataset;
  j["partition_peak_bytes"] = r.facts.partition_peak;
  j["step_bytes_per_row"] = r.step.per_row;
  j["step_bytes_fixed"] = r.step.fixed;
  j["parameters"] = r.step.parameters;
  j["seconds"] = r.seconds;
  j["gpu"] = r.gpu;
  j["peaks_measured"] = r.facts.peaks_measured;
  nlohmann::json rows = nlohmann::json::array();
  for (const PlanEstimate& e : r.rows) {
    nlohmann::json row;
    row["mode"] = e.mode;
    row["ranks"] = e.ranks;
    row["parts"] = e.parts;
    row["stages"] = e.stages;
    row["codec"] = e.codec;
    row["codec_backward"] = e.backward_codec;
    std::vector<std::uint64_t> peak, load, train, device;
    for (const RankMemory& m : e.memory) {
      peak.push_back(m.peak());
      load.push_back(m.load);
      train.push_back(m.train);
      device.push_back(m.device);
    }
    row["peak_bytes_per_rank"] = peak;
    row["load_bytes_per_rank"] = load;
    row["train_bytes_per_rank"] = train;
    row["device_bytes_per_rank"] = device;
    row["peak_bytes_max"] = e.max_peak();
    row["comm_bytes_per_epoch"] = {{"halo_forward", e.halo_forward},
                                   {"halo_backward", e.halo_backward},
                                   {"pipeline", e.pipeline},
                                   {"all_reduce", e.all_reduce}};
    row["bytes_per_epoch"] = e.bytes_per_epoch();
    rows.push_back(row);
  }
  j["rows"] = rows;
  nlohmann::json parts = nlohmann::json::array();
  for (const PartShape& p : r.parts)
    parts.push_back({{"owned", p.owned},
                     {"halo", p.halo},
                     {"entries", p.entries},
                     {"halo_entries", p.halo_entries},
                     {"send", p.send},
                     {"boundary", p.boundary},
                     {"train", p.train}});
  j["parts"] = parts;
  return j.dump(1) + "\n";
}

}  // namespace tessera
