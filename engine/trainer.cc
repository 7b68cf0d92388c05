// The full-graph training loop of one rank: the part's operator built once (GCN weights from
// global degrees, or the mean over neighbours), then per epoch one forward/backward over the
// owned rows with halo exchanges inside the propagator, one all-reduce of the gradients, an
// Adam step, one all-reduce of the loss and the step's communication figures, and (every
// eval_every epochs) an evaluation whose counts are summed over ranks.
#include "engine/trainer.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <optional>

#include "comm/agreement.h"
#include "comm/codec.h"
#include "comm/gpu_communicator.h"
#include "comm/message_tags.h"
#include "core/device.h"
#include "core/error.h"
#include "core/kernels.h"
#include "datasets/evaluator.h"
#include "engine/checkpoint.h"
#include "engine/halo_propagator.h"
#include "engine/loss.h"
#include "engine/optimizer.h"
#include "engine/pipeline.h"
#include "engine/system.h"

namespace tessera {

ParallelMode parse_parallel_mode(const std::string& text) {
  if (text == "graph") return ParallelMode::Graph;
  if (text == "pipeline") return ParallelMode::Pipeline;
  if (text == "hybrid") return ParallelMode::Hybrid;
  TESSERA_FAIL(InvalidArgument, "--parallel: expected graph, pipeline or hybrid, got '", text,
               "'");
}

std::string to_string(ParallelMode mode) {
  switch (mode) {
    case ParallelMode::Graph: return "graph";
    case ParallelMode::Pipeline: return "pipeline";
    case ParallelMode::Hybrid: return "hybrid";
  }
  return "?";
}

void validate(const TrainConfig& c) {
  TESSERA_CHECK(c.num_layers >= 1, InvalidArgument, "--num-layers must be >= 1, got ", c.num_layers);
  TESSERA_CHECK(c.hidden_channels >= 1, InvalidArgument, "--hidden-channels must be >= 1, got ",
                c.hidden_channels);
  TESSERA_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, InvalidArgument,
                "--dropout must be in [0, 1), got ", c.dropout);
  TESSERA_CHECK(c.input_dropout >= 0.0f && c.input_dropout < 1.0f, InvalidArgument,
                "--input-dropout must be in [0, 1), got ", c.input_dropout);
  TESSERA_CHECK(c.lr > 0.0f && std::isfinite(c.lr), InvalidArgument, "--lr must be > 0, got ", c.lr);
  TESSERA_CHECK(c.weight_decay >= 0.0f && std::isfinite(c.weight_decay), InvalidArgument,
                "--weight-decay must be >= 0, got ", c.weight_decay);
  TESSERA_CHECK(c.epochs >= 1, InvalidArgument, "--epochs must be >= 1, got ", c.epochs);
  TESSERA_CHECK(c.eval_every >= 1, InvalidArgument, "--eval-every must be >= 1, got ", c.eval_every);
  TESSERA_CHECK(c.runs >= 1, InvalidArgument, "--runs must be >= 1, got ", c.runs);
  TESSERA_CHECK(c.threads >= 0, InvalidArgument, "--threads must be >= 0, got ", c.threads);
  if (c.codec == "adaptive") {
    TESSERA_CHECK(c.codec_backward.empty(), InvalidArgument,
                  "--codec adaptive plans both directions; --codec-backward does not apply");
    TESSERA_CHECK(c.bit_budget >= 2.0 && c.bit_budget <= 8.0, InvalidArgument,
                  "--bit-budget must be in [2, 8] bits per value, got ", c.bit_budget);
    TESSERA_CHECK(c.replan_every >= 1, InvalidArgument, "--replan-every must be >= 1, got ",
                  c.replan_every);
  } else {
    parse_codec(c.codec);
  }
  if (!c.codec_backward.empty()) parse_codec(c.codec_backward);
  TESSERA_CHECK(c.device == "cpu" || c.parallel == ParallelMode::Graph, InvalidArgument,
                "--device ", c.device, ": --parallel ", to_string(c.parallel),
                " runs on the CPU only; GPU training is --parallel graph");
  TESSERA_CHECK(c.device == "cpu" || (c.codec != "adaptive" && !c.error_feedback),
                InvalidArgument, "--device ", c.device,
                ": --codec adaptive and --error-feedback run on CPU ranks; GPU ranks take the "
                "fixed codecs (none, bf16, fp16, int8, int4, int2)");
  parse_device(c.device);  // a clear error when the device is unknown or has no usable GPU
  TESSERA_CHECK(c.stages >= 0, InvalidArgument, "--stages must be >= 0, got ", c.stages);
  TESSERA_CHECK(c.chunks >= 0, InvalidArgument, "--chunks must be >= 0, got ", c.chunks);
  TESSERA_CHECK(c.memory_budget_gb >= 0.0 && std::isfinite(c.memory_budget_gb), InvalidArgument,
                "--memory-budget must be >= 0 GiB, got ", c.memory_budget_gb);
  if (c.parallel == ParallelMode::Graph) {
    TESSERA_CHECK(c.stages == 0 && c.chunks == 0, InvalidArgument,
                  "--stages and --chunks apply to --parallel pipeline or hybrid");
    return;
  }
  const std::string mode = "--parallel " + to_string(c.parallel);
  TESSERA_CHECK(c.parallel != ParallelMode::Hybrid || c.stages >= 1, InvalidArgument, mode,
                " needs --stages S (pipeline stages per graph part)");
  TESSERA_CHECK(!c.batch_norm, InvalidArgument, mode,
                ": --batch-norm needs every layer's statistics over the whole graph, which a "
                "chunk does not see; use --parallel graph");
  TESSERA_CHECK(c.codec != "adaptive" && !c.error_feedback, InvalidArgument, mode,
                ": --codec adaptive and --error-feedback apply to --parallel graph; the "
                "fixed codecs (bf16, fp16, int8, int4, int2) apply to the pipeline streams");
  TESSERA_CHECK(c.checkpoint_dir.empty(), InvalidArgument, mode,
                ": checkpoints are written in --parallel graph only (a stage holds only its "
                "layers' weights)");
  TESSERA_CHECK(c.chunks == 0 || c.stages == 0 || c.chunks >= c.stages, InvalidArgument,
                "--chunks ", c.chunks, " < --stages ", c.stages,
                ": every stage needs a chunk to work on (use --chunks >= ", c.stages, ")");
}

namespace {

// Class predictions (argmax) of the listed rows against their labels.
AccuracyCounts split_counts(const Tensor& logits, const std::vector<std::int64_t>& labels,
                            const std::vector<NodeId>& rows) {
  std::vector<std::int64_t> y_true(rows.size()), y_pred(rows.size());
  const std::int64_t c = logits.cols();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const float* row = logits.row<float>(rows[i]);
    y_true[i] = labels[rows[i]];
    y_pred[i] = std::max_element(row, row + c) - row;
  }
  return accuracy_counts(y_true, y_pred);
}

// Mean ROC-AUC over all ranks' listed rows: ROC-AUC does not decompose, so rank 0 gathers the
// (targets, scores) rows of every rank, computes it and broadcasts the value.
double split_rocauc(Communicator& comm, const Tensor& logits, const Tensor& targets,
                    const std::vector<NodeId>& rows) {
  const auto n = static_cast<std::int64_t>(rows.size());
  const std::int64_t t = targets.cols();
  Tensor local(n, 2 * t);  // (n, 2T): targets then scores
  for (std::int64_t i = 0; i < n; ++i) {
    std::copy_n(targets.row<float>(rows[i]), t, local.row<float>(i));
    std::copy_n(logits.row<float>(rows[i]), t, local.row<float>(i) + t);
  }
  const int k = comm.size();
  std::vector<std::int64_t> counts(static_cast<std::size_t>(k), 0);
  counts[static_cast<std::size_t>(comm.rank())] = n;
  comm.all_reduce_max(counts);
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  double value = 0.0;
  if (comm.rank() == 0) {
    Tensor all(total, 2 * t);
    std::copy_n(local.f32(), local.numel(), all.f32());
    std::vector<std::unique_ptr<Request>> requests;
    std::int64_t offset = n;
    for (int r = 1; r < k; ++r) {
      const std::size_t row_bytes = static_cast<std::size_t>(2 * t) * sizeof(float);
      if (counts[r] > 0) {
        requests.push_back(comm.irecv(
            {reinterpret_cast<std::byte*>(all.row<float>(offset)), counts[r] * row_bytes}, r,
            tags::kRocAucRows));
      }
      offset += counts[r];
    }
    wait_all(requests);
    Tensor y_true(total, t), y_score(total, t);
    for (std::int64_t i = 0; i < total; ++i) {
      std::copy_n(all.row<float>(i), t, y_true.row<float>(i));
      std::copy_n(all.row<float>(i) + t, t, y_score.row<float>(i));
    }
    value = mean_rocauc(y_true, y_score);
  } else if (n > 0) {
    comm.isend({reinterpret_cast<const std::byte*>(local.raw()), local.bytes()}, 0,
               tags::kRocAucRows, TrafficCategory::Setup)
        ->wait();
  }
  comm.broadcast({reinterpret_cast<std::byte*>(&value), sizeof value}, 0, TrafficCategory::Setup);
  return value;
}

// TESSERA_FAULT_INJECT=RANK:EPOCH[:MODE] makes that rank fail at that epoch of every run: how
// the tests check that failures, kills and signals end or stop the whole job. MODE:
//   throw       (default) throw an error at the start of the epoch
//   kill        SIGKILL itself at the start of the epoch (a node or rank lost)
//   usr1        send itself SIGUSR1 at the start of the epoch (a stop request on one rank)
//   checkpoint  SIGKILL itself after writing that epoch's checkpoint, before its rename
enum class FaultMode { Throw, Kill, Usr1, Checkpoint };

struct FaultInjection {
  int rank = -1;
  int epoch = -1;
  FaultMode mode = FaultMode::Throw;
};

FaultInjection fault_injection_from_env() {
  FaultInjection f;
  const char* text = std::getenv("TESSERA_FAULT_INJECT");
  if (text == nullptr || *text == '\0') return f;
  char mode[16] = "throw";
  const int fields = std::sscanf(text, "%d:%d:%15s", &f.rank, &f.epoch, mode);
  const std::string m = mode;
  TESSERA_CHECK(fields >= 2 && f.rank >= 0 && f.epoch >= 1 &&
                    (m == "throw" || m == "kill" || m == "usr1" || m == "checkpoint"),
                InvalidArgument, "TESSERA_FAULT_INJECT='", text,
                "', expected RANK:EPOCH[:throw|kill|usr1|checkpoint]");
  f.mode = m == "kill" ? FaultMode::Kill
           : m == "usr1" ? FaultMode::Usr1
           : m == "checkpoint" ? FaultMode::Checkpoint
                               : FaultMode::Throw;
  return f;
}

void inject_fault(const FaultInjection& f, int epoch) {
  switch (f.mode) {
    case FaultMode::Throw:
      TESSERA_FAIL(Internal, "fault injected at epoch ", epoch, " (TESSERA_FAULT_INJECT)");
    case FaultMode::Kill:
      std::fprintf(stderr, "rank %d: killing itself at epoch %d (TESSERA_FAULT_INJECT)\n", f.rank,
                   epoch);
      std::fflush(stderr);
      std::raise(SIGKILL);
      break;
    case FaultMode::Usr1:
      std::raise(SIGUSR1);
      break;
    case FaultMode::Checkpoint:
      break;  // at the checkpoint write
  }
}

// Fingerprint of the partitioning (which rank owns which node): FNV-1a of each rank's owned ids,
// gathered with one all-reduce and combined in rank order.
std::uint64_t partition_fingerprint(Communicator& comm, std::span<const GlobalId> owned_ids) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (GlobalId id : owned_ids) {
    hash ^= static_cast<std::uint64_t>(id);
    hash *= 0x100000001b3ULL;
  }
  std::vector<std::int64_t> slots(static_cast<std::size_t>(comm.size()), 0);
  slots[static_cast<std::size_t>(comm.rank())] = static_cast<std::int64_t>(hash >> 1);
  comm.all_reduce_max(slots);
  std::uint64_t combined = 0xcbf29ce484222325ULL;
  for (std::int64_t slot : slots) {
    combined ^= static_cast<std::uint64_t>(slot);
    combined *= 0x100000001b3ULL;
  }
  return combined;
}

// Rank 0 picks the newest valid checkpoint of config.checkpoint_dir (setting corrupt ones aside
// as NAME.corrupt, with a warning) and checks that it belongs to this configuration; returns
// its image and path, or nothing. Throws on rank 0 only: call inside run_agreed.
std::vector<std::byte> find_checkpoint(const TrainConfig& config, const CheckpointIdentity& identity,
                                       std::string& path_out) {
  const std::filesystem::path dir = config.checkpoint_dir;
  for (const CheckpointFile& file : list_checkpoints(dir)) {
    std::vector<std::byte> image;
    std::string problem;
    CheckpointState state;
    try {
      image = read_file_bytes(file.path);
      // The label names the in-memory image (not the file, which HDF5 would then see as open).
      state = checkpoint_from_image(image, "checkpoint " + file.path.string());
    } catch (const Error& e) {
      problem = e.message();
    }
    if (!problem.empty()) {
      std::fprintf(stderr, "warning: skipping checkpoint %s: %s (set aside as %s.corrupt)\n",
                   file.path.string().c_str(), problem.c_str(), file.path.filename().c_str());
      std::error_code ignored;
      std::filesystem::rename(file.path, file.path.string() + ".corrupt", ignored);
      continue;
    }
    const std::string difference = identity_difference(state.identity, identity);
    TESSERA_CHECK(difference.empty(), InvalidArgument, "checkpoint ", file.path.string(),
                  " belongs to another configuration or dataset (", difference,
                  "): use another --checkpoint-dir, or --no-resume to start over and replace it");
    path_out = file.path.string();
    return image;
  }
  TESSERA_CHECK(config.resume != ResumeMode::Require, InvalidArgument,
                "--resume: no valid checkpoint in --checkpoint-dir ", dir.string());
  return {};
}

}  // namespace

struct Trainer::Impl {
  GraphPart part;
  std::unique_ptr<Communicator> own_comm;  // the SelfCommunicator of a single-process trainer
  Communicator* comm = nullptr;
  std::unique_ptr<HaloExchange> exchange;
  std::unique_ptr<HaloPropagator> propagator;
  GraphContext context;
  GraphTotals totals;
  std::vector<NodeId> train_loss_rows;  // labelled training rows
  std::int64_t train_loss_terms = 0;    // over all ranks
  double all_reduce_s = 0.0;            // blocking all-reduce time since the last reset
  FaultInjection fault;
  std::vector<EpochRecord> history;     // train(): every record so far (checkpoints hold them)
  std::vector<RunResult> finished;      // train(): the runs finished so far
  std::unique_ptr<Model> model;
  Tensor logits, logp, d_logits;        // (N, C), on `device`
  // Where the model runs. On a GPU the features, the operator, the dropout keys and the loss's
  // labels and rows live there from set-up on (uploaded once), as do the parameters, their
  // gradients and Adam's moments (Model::to, Adam's device): a step moves no tensor to or from
  // the host but the loss, the batch-norm statistics (2F values a layer) and, for the metrics of
  // an evaluated epoch, the logits.
  Device device;
  // Several GPU ranks: the NCCL communicator of their halos and gradients (traffic counted in
  // comm's counter), and this rank's GPU.
  std::unique_ptr<Communicator> gpu_comm;
  int gpu_device = 0;
  Tensor device_features;   // (N, F) the features on a GPU (empty on the CPU)
  Tensor device_targets;    // (N, T) multi-label targets on a GPU
  Tensor device_ids;        // (N, 1) i64 global ids (dropout keys) on a GPU
  Tensor device_labels;     // (N, 1) i64 labels on a GPU
  Tensor device_loss_rows;  // (R, 1) i32 labelled training rows on a GPU
  Tensor host_logits;       // (N, C) the logits copied back for the metrics
  const Tensor* features = nullptr;  // part.features or device_features
  const Tensor* targets = nullptr;   // part.targets or device_targets
  std::span<const std::int64_t> labels;  // part.labels or device_labels
  std::span<const NodeId> loss_rows;     // train_loss_rows or device_loss_rows
  // Pipeline and hybrid modes: this rank's place, the operator until the engine takes it, and
  // the engine (no halo exchange or propagator then).
  std::optional<PipelineLayout> layout;
  Csr pipeline_operator;
  MatrixSymmetry pipeline_symmetry = MatrixSymmetry::General;
  std::unique_ptr<PipelineEngine> pipeline;
  // Where weight gradients are summed: all ranks, or (pipelined) this stage's ranks.
  Communicator* grad_comm = nullptr;
};

Trainer::Trainer(const TrainConfig& config, GraphPart part, Communicator& comm)
    : config_(config), impl_(std::make_unique<Impl>()) {
  impl_->part = std::move(part);
  impl_->comm = &comm;
  setup();
}

Trainer::Trainer(const TrainConfig& config, const Dataset& dataset)
    : config_(config), impl_(std::make_unique<Impl>()) {
  TESSERA_CHECK(dataset.num_nodes() > 0, InvalidInput, "dataset '", dataset.name, "' has no nodes");
  const Csr graph = training_graph(dataset);
  PartitionPlan plan;
  plan.owner.assign(static_cast<std::size_t>(dataset.num_nodes()), 0);
  const DatasetInfo info = dataset_info(dataset);
  impl_->part = PartBuilder(dataset, graph, plan, info).build(0);
  impl_->own_comm = std::make_unique<SelfCommunicator>();
  impl_->comm = impl_->own_comm.get();
  setup();
}

// Pipelined modes: refuses, before training, a stage whose estimated memory exceeds the budget
// (--memory-budget GiB, else this machine's memory).
static void check_stage_memory(const TrainConfig& config, const PipelineLayout& layout,
                        const GraphPart& part, std::int64_t nnz) {
  const DatasetInfo& data = part.dataset;
  const StageMemory m = estimate_stage_memory(
      layout, config.model, data.num_features, config.hidden_channels, data.num_outputs(),
      part.graph.num_owned(), part.graph.num_halo(), nnz);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double budget = config.memory_budget_gb > 0.0
                            ? config.memory_budget_gb * gib
                            : static_cast<double>(physical_memory_bytes());
  char need[32], have[32];
  std::snprintf(need, sizeof need, "%.3g", static_cast<double>(m.bytes) / gib);
  std::snprintf(have, sizeof have, "%.3g", budget / gib);
  TESSERA_CHECK(budget <= 0.0 || static_cast<double>(m.bytes) <= budget, InvalidInput,
                "--parallel ", to_string(layout.mode), ": stage ", layout.stage, " (layers ",
                layout.first_layer(), "-", layout.first_layer() + layout.num_layers() - 1,
                ") of part ", layout.group, " needs an estimated ", need, " GiB (",
                m.nodes, " nodes, ", m.halo_nodes, " halo nodes, ", m.nnz,
                " operator entries), more than the ", have,
                " GiB one rank may use (--memory-budget); use --parallel hybrid with more "
                "graph parts, more stages, or a larger budget");
}

// Local set-up of this rank: checks, the normalised operator behind the overlapping
// propagator, the training rows. Returns this rank's number of loss terms.
std::int64_t Trainer::build_local() {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  GraphPart& part = s.part;
  const DatasetInfo& data = part.dataset;
  validate(config_);
  s.device = parse_device(config_.device);
  if (s.gpu_comm) s.device.index = s.gpu_device;  // each rank's own GPU
  if (config_.parallel != ParallelMode::Graph) {
    const std::vector<double> cost =
        layer_costs(config_.model, config_.num_layers, data.num_features, config_.hidden_channels,
                    data.num_outputs(), data.num_nodes, 2 * data.num_edges + data.num_nodes);
    s.layout = tessera::pipeline_layout(config_, comm.rank(), comm.size(), cost);
    TESSERA_CHECK(part.graph.num_parts == s.layout->groups && part.graph.part == s.layout->group,
                  InvalidArgument, "part ", part.graph.part, " of ", part.graph.num_parts,
                  " given to rank ", comm.rank(), ", which trains part ", s.layout->group, " of ",
                  s.layout->groups);
  } else {
    TESSERA_CHECK(part.graph.num_parts == comm.size() && part.graph.part == comm.rank(),
                  InvalidArgument, "part ", part.graph.part, " of ", part.graph.num_parts,
                  " given to rank ", comm.rank(), " of ", comm.size());
  }
  validate(part, "part " + std::to_string(part.graph.part));
  TESSERA_CHECK(data.num_outputs() > 0, InvalidInput, "dataset '", data.name,
                "' has no classes or tasks");
  if (config_.threads > 0) set_num_threads(config_.threads);
  s.fault = fault_injection_from_env();
  if (config_.normalize_features) row_normalize(part.features);

  LocalGraph& g = part.graph;
  // GCN: D^-1/2 (A + I) D^-1/2 with global degrees (the owned block is symmetric); SAGE: the
  // mean over neighbours.
  const MatrixSymmetry symmetry =
      config_.model == ModelKind::Sage ? MatrixSymmetry::General : MatrixSymmetry::Symmetric;
  Csr normalized =
      config_.model == ModelKind::Sage
          ? mean_normalized(g.adjacency)
          : gcn_normalized(g.adjacency.with_self_loops(),
                           std::span<const float>(g.degrees).first(
                               static_cast<std::size_t>(g.num_owned())),
                           g.degrees);
  if (s.layout) {
    check_stage_memory(config_, *s.layout, part, normalized.nnz());
    s.pipeline_operator = std::move(normalized);
    s.pipeline_symmetry = symmetry;
  } else {
    ExchangeCodecs codecs;
    codecs.adaptive = config_.codec == "adaptive";
    codecs.forward = codecs.adaptive ? CodecKind::None : parse_codec(config_.codec);
    codecs.backward =
        config_.codec_backward.empty() ? codecs.forward : parse_codec(config_.codec_backward);
    codecs.error_feedback = config_.error_feedback;
    codecs.bit_budget = config_.bit_budget;
    codecs.num_layers = config_.num_layers;
    s.exchange = std::make_unique<HaloExchange>(s.gpu_comm ? *s.gpu_comm : comm, g.halo,
                                                g.owned_ids, g.halo_ids, codecs);
    s.propagator = std::make_unique<HaloPropagator>(normalized, symmetry, *s.exchange);
    s.propagator->upload(s.device);
    (config_.model == ModelKind::Sage ? s.context.mean : s.context.gcn) = s.propagator.get();
  }
  s.context.global_ids = g.owned_ids;
  s.context.global_num_nodes = data.num_nodes;
  s.context.all_reduce = [&s](std::span<double> values) {
    Stopwatch reduce;
    s.comm->all_reduce_sum(values, TrafficCategory::AllReduce);
    s.all_reduce_s += reduce.seconds();
  };

  std::int64_t terms = 0;
  if (data.task == TaskType::MultiClass) {
    for (NodeId v : part.train_rows)
      if (part.labels[v] >= 0) s.train_loss_rows.push_back(v);
    terms = static_cast<std::int64_t>(s.train_loss_rows.size());
  } else {
    s.train_loss_rows = part.train_rows;
    const std::int64_t t = part.targets.cols();
    for (NodeId v : part.train_rows)
      for (std::int64_t j = 0; j < t; ++j)
        if (!std::isnan(part.targets.row<float>(v)[j])) ++terms;
  }
  place_data();
  return terms;
}

// What the epochs read, on the training device: on the CPU the part's own tensors, on a GPU
// copies uploaded once here.
void Trainer::place_data() {
  Impl& s = *impl_;
  GraphPart& part = s.part;
  s.features = &part.features;
  s.targets = &part.targets;
  s.labels = part.labels;
  s.loss_rows = s.train_loss_rows;
  if (s.device.kind == DeviceKind::Cpu) return;
  s.device_features = part.features.to(s.device);
  s.features = &s.device_features;
  if (!part.targets.empty()) {
    s.device_targets = part.targets.to(s.device);
    s.targets = &s.device_targets;
  }
  // Index lists, uploaded once; the kernels read GPU spans in place.
  s.device_ids = index_tensor(std::span<const GlobalId>(part.graph.owned_ids), s.device);
  s.context.global_ids = {s.device_ids.data<GlobalId>(), part.graph.owned_ids.size()};
  s.device_labels = index_tensor(std::span<const std::int64_t>(part.labels), s.device);
  s.labels = {s.device_labels.data<std::int64_t>(), part.labels.size()};
  s.device_loss_rows = index_tensor(std::span<const NodeId>(s.train_loss_rows), s.device);
  s.loss_rows = {s.device_loss_rows.data<NodeId>(), s.train_loss_rows.size()};
}

void Trainer::setup() {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  const GraphPart& part = s.part;
  Stopwatch watch;
  // GPU ranks of a multi-rank job move halos and gradients over NCCL (bootstrapped over this
  // job's MPI ranks, each binding the GPU of its local rank; agreed inside).
  if (config_.device != "cpu" && comm.size() > 1) {
    run_agreed(comm, "binding the GPUs",
               [&] { s.gpu_comm = make_gpu_communicator(comm, &s.gpu_device); });
  }
  // The local work is agreed first, so that no rank enters the all-reduce below alone.
  const std::int64_t local_terms =
      run_agreed(comm, "building the graph operator", [&] { return build_local(); });
  // Each part counts once: in pipelined modes the S ranks of a part hold the same rows.
  const double counted = !s.layout || s.layout->first_stage() ? 1.0 : 0.0;
  const double nnz = static_cast<double>(s.propagator ? s.propagator->nnz()
                                                      : s.pipeline_operator.nnz());
  std::vector<double> sums = {counted * static_cast<double>(local_terms),
                              counted * static_cast<double>(part.train_rows.size()),
                              counted * static_cast<double>(part.valid_rows.size()),
                              counted * static_cast<double>(part.test_rows.size()),
                              counted * nnz};
  comm.all_reduce_sum(std::span<double>(sums), TrafficCategory::Setup);
  s.train_loss_terms = static_cast<std::int64_t>(sums[0]);
  s.totals = {static_cast<std::int64_t>(sums[1]), static_cast<std::int64_t>(sums[2]),
              static_cast<std::int64_t>(sums[3]), static_cast<std::int64_t>(sums[4])};
  TESSERA_CHECK(s.train_loss_terms > 0, InvalidInput, "dataset '", part.dataset.name,
                "' has no labelled training node");
  s.grad_comm = s.gpu_comm ? s.gpu_comm.get() : &comm;
  if (s.layout) {
    run_agreed(comm, "setting up the pipeline", [&] {
      s.pipeline = std::make_unique<PipelineEngine>(config_, *s.layout, s.part, comm,
                                                    s.pipeline_operator, s.pipeline_symmetry,
                                                    s.train_loss_rows, s.train_loss_terms);
    });
    s.pipeline_operator = Csr();
    s.grad_comm = &s.pipeline->stage_comm();
  }
  setup_s_ = watch.seconds();
}

Trainer::~Trainer() = default;

const Model& Trainer::model() const {
  TESSERA_CHECK(impl_->model != nullptr, InvalidArgument, "no run has been trained yet");
  return *impl_->model;
}
const GraphPart& Trainer::part() const { return impl_->part; }
const GraphTotals& Trainer::totals() const { return impl_->totals; }
const PipelineLayout* Trainer::pipeline_layout() const {
  return impl_->layout ? &*impl_->layout : nullptr;
}

struct Trainer::RunState {
  int run = 0;
  int epoch = 0;  // epochs completed
  RunResult result;
  std::array<double, static_cast<int>(TrafficCategory::Count)> bytes_total{}, raw_total{};
  std::unique_ptr<Adam> adam;
  int local_stop = 0;  // the stop signal this rank saw when the run stopped
};

Trainer::RunState Trainer::begin_run(int run) {
  Impl& s = *impl_;
  const DatasetInfo& data = s.part.dataset;
  ModelConfig model_config;
  model_config.kind = config_.model;
  model_config.in_channels = data.num_features;
  model_config.hidden_channels = config_.hidden_channels;
  model_config.out_channels = data.num_outputs();
  model_config.num_layers = config_.num_layers;
  model_config.dropout = config_.dropout;
  model_config.input_dropout = config_.input_dropout;
  model_config.batch_norm = config_.batch_norm;
  model_config.seed = config_.seed + static_cast<std::uint64_t>(run);
  s.model = std::make_unique<Model>(s.pipeline ? s.pipeline->stage_model(model_config)
                                               : model_config);
  s.model->to(s.device);  // built on the host, trained where the data lives
  RunState state;
  state.run = run;
  state.adam = std::make_unique<Adam>(
      AdamConfig{.lr = config_.lr, .weight_decay = config_.weight_decay}, s.model->param_info(),
      static_cast<std::int64_t>(s.model->params().size()), s.device);
  state.result.run = run;
  state.result.seed = model_config.seed;
  state.result.best_valid = -1.0;
  // Error-feedback residuals (and pipeline histories) start empty in every run, and after a
  // resume (they are per rank and not part of a checkpoint).
  if (s.exchange) s.exchange->reset_residuals();
  if (s.pipeline) s.pipeline->reset_run();
  return state;
}

bool Trainer::train_epoch(RunState& state, const EpochCallback& on_epoch) {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  const GraphPart& part = s.part;
  Model& model = *s.model;
  const bool multiclass = part.dataset.task == TaskType::MultiClass;
  const float loss_scale = 1.0f / static_cast<float>(s.train_loss_terms);
  constexpr int kCategories = static_cast<int>(TrafficCategory::Count);
  RunResult& result = state.result;
  const int epoch = state.epoch + 1;
  const std::uint64_t seed = result.seed;

  EpochRecord record;
  record.run = state.run;
  record.epoch = epoch;
  if (s.exchange) {
    s.exchange->reset_times();
    s.exchange->set_noise(seed, static_cast<std::uint64_t>(epoch));
    if (s.exchange->codecs().adaptive && epoch > 1 && (epoch - 1) % config_.replan_every == 0) {
      record.bit_plan = s.exchange->replan();
    }
  }
  s.all_reduce_s = 0.0;
  const TrafficCounter traffic_before = comm.traffic();
  if (s.fault.rank == comm.rank() && s.fault.epoch == epoch) inject_fault(s.fault, epoch);
  Stopwatch step;
  model.zero_grad();
  double loss_sum = 0.0;
  if (s.pipeline) {
    loss_sum = s.pipeline->train_step(model, epoch, seed);
  } else {
    model.forward(s.logits, *s.features, s.context, /*training=*/true, epoch);
    loss_sum = loss_and_gradient(s.d_logits, s.logp, s.logits, multiclass, s.labels, *s.targets,
                                 s.loss_rows, loss_scale);
    model.backward(s.d_logits, s.context);
  }
  {
    Stopwatch reduce;
    s.grad_comm->all_reduce_sum(model.grads(), TrafficCategory::AllReduce);
    s.all_reduce_s += reduce.seconds();
  }
  state.adam->step(model.params(), model.grads());
  record.epoch_s = step.seconds();

  // One all-reduce for the loss, the step's communication figures (means over ranks) and
  // whether any rank received a stop signal (so that all ranks stop after the same epoch).
  state.local_stop = stop_signal();
  const ExchangeTimes times = s.pipeline ? s.pipeline->times() : s.exchange->times();
  std::vector<double> step_sums = {loss_sum,       times.comm_s + s.all_reduce_s, times.hidden_s(),
                                   times.encode_s, times.decode_s,
                                   state.local_stop != 0 ? 1.0 : 0.0};
  constexpr int kFirstBytes = 6;
  for (int c = 0; c < kCategories; ++c) {
    const auto category = static_cast<TrafficCategory>(c);
    step_sums.push_back(
        static_cast<double>(comm.traffic().sent(category) - traffic_before.sent(category)));
    step_sums.push_back(
        static_cast<double>(comm.traffic().raw(category) - traffic_before.raw(category)));
  }
  // Every rank's peak resident memory, one slot each.
  const std::size_t first_rss = step_sums.size();
  step_sums.resize(first_rss + static_cast<std::size_t>(comm.size()), 0.0);
  step_sums[first_rss + static_cast<std::size_t>(comm.rank())] =
      static_cast<double>(peak_rss_bytes());
  comm.all_reduce_sum(std::span<double>(step_sums), TrafficCategory::Setup);
  for (std::size_t r = first_rss; r < step_sums.size(); ++r)
    record.peak_rss_bytes.push_back(static_cast<std::uint64_t>(step_sums[r]));
  const double k = comm.size();
  record.loss = step_sums[0] * static_cast<double>(loss_scale);
  record.comm_s = step_sums[1] / k;
  record.comm_hidden_s = step_sums[2] / k;
  record.encode_s = step_sums[3] / k;
  record.decode_s = step_sums[4] / k;
  const bool stop = step_sums[5] > 0.0;
  for (int c = 0; c < kCategories; ++c) {
    record.bytes[c] = static_cast<std::uint64_t>(step_sums[kFirstBytes + 2 * c]);
    record.raw_bytes[c] = static_cast<std::uint64_t>(step_sums[kFirstBytes + 2 * c + 1]);
    state.bytes_total[c] += step_sums[kFirstBytes + 2 * c];
    state.raw_total[c] += step_sums[kFirstBytes + 2 * c + 1];
  }
  TESSERA_CHECK(std::isfinite(record.loss), InvalidInput, "training diverged: loss is ",
                record.loss, " at epoch ", epoch, " (try a smaller --lr)");
  result.epoch_seconds.push_back(record.epoch_s);
  result.comm_seconds.push_back(record.comm_s);
  result.hidden_seconds.push_back(record.comm_hidden_s);
  result.encode_seconds.push_back(record.encode_s);
  result.decode_seconds.push_back(record.decode_s);
  result.final_loss = record.loss;

  if (epoch % config_.eval_every == 0 || epoch == config_.epochs) {
    Stopwatch eval;
    // Pipelined: the last stage holds the logits; the other stages count no rows.
    static const std::vector<NodeId> kNoRows;
    const bool scored = !s.pipeline || s.layout->last_stage();
    const std::vector<NodeId>& train_rows = scored ? part.train_rows : kNoRows;
    const std::vector<NodeId>& valid_rows = scored ? part.valid_rows : kNoRows;
    const std::vector<NodeId>& test_rows = scored ? part.test_rows : kNoRows;
    if (s.pipeline) {
      s.pipeline->evaluate(model, s.logits, epoch);
    } else {
      model.forward(s.logits, *s.features, s.context, /*training=*/false, epoch);
    }
    const Tensor* logits = &s.logits;  // host copy for the metrics when they ran on a GPU
    if (s.logits.device().kind != DeviceKind::Cpu) {
      s.host_logits.resize(s.logits.rows(), s.logits.cols(), Device::cpu());
      s.host_logits.copy_from(s.logits);
      logits = &s.host_logits;
    }
    if (multiclass) {
      const AccuracyCounts splits[3] = {split_counts(*logits, part.labels, train_rows),
                                        split_counts(*logits, part.labels, valid_rows),
                                        split_counts(*logits, part.labels, test_rows)};
      std::vector<double> counts;
      for (const AccuracyCounts& c : splits) {
        counts.push_back(static_cast<double>(c.labelled));
        counts.push_back(static_cast<double>(c.correct));
      }
      comm.all_reduce_sum(std::span<double>(counts), TrafficCategory::Setup);
      auto acc = [&](int i) { return counts[2 * i] > 0 ? counts[2 * i + 1] / counts[2 * i] : 0.0; };
      record.train_metric = acc(0);
      record.valid_metric = acc(1);
      record.test_metric = acc(2);
    } else {
      record.train_metric = split_rocauc(comm, *logits, part.targets, train_rows);
      record.valid_metric = split_rocauc(comm, *logits, part.targets, valid_rows);
      record.test_metric = split_rocauc(comm, *logits, part.targets, test_rows);
    }
    record.evaluated = true;
    record.eval_s = eval.seconds();
    if (record.valid_metric > result.best_valid) {
      result.best_valid = record.valid_metric;
      result.test_at_best_valid = record.test_metric;
      result.train_at_best_valid = record.train_metric;
      result.best_epoch = epoch;
    }
    result.final_train = record.train_metric;
    result.final_valid = record.valid_metric;
    result.final_test = record.test_metric;
  }
  state.epoch = epoch;
  s.history.push_back(record);
  if (on_epoch) on_epoch(record);
  return stop;
}

RunResult Trainer::finish_run(RunState& state) {
  constexpr int kCategories = static_cast<int>(TrafficCategory::Count);
  RunResult result = state.result;
  for (int c = 0; c < kCategories; ++c) {
    result.bytes_per_epoch[c] = static_cast<std::uint64_t>(state.bytes_total[c] / config_.epochs);
    result.raw_bytes_per_epoch[c] = static_cast<std::uint64_t>(state.raw_total[c] / config_.epochs);
  }
  return result;
}

RunResult Trainer::train_run(int run, const EpochCallback& on_epoch) {
  RunState state = begin_run(run);
  while (state.epoch < config_.epochs) train_epoch(state, on_epoch);
  impl_->history.clear();  // only train() keeps the records (for checkpoints)
  return finish_run(state);
}

void Trainer::restore_run(RunState& state, const CheckpointState& checkpoint) {
  Impl& s = *impl_;
  run_agreed(*s.comm, "restoring the checkpoint", [&] {
    Model& model = *s.model;
    const std::size_t n = model.params().size();
    TESSERA_CHECK(checkpoint.params.size() == n && checkpoint.buffers.size() == model.buffers().size(),
                  InvalidInput, "checkpoint holds ", checkpoint.params.size(), " parameters and ",
                  checkpoint.buffers.size(), " buffer values, the model has ", n, " and ",
                  model.buffers().size());
    TESSERA_CHECK(checkpoint.epoch >= 0 && checkpoint.epoch <= config_.epochs &&
                      checkpoint.adam_steps == checkpoint.epoch,
                  InvalidInput, "checkpoint at epoch ", checkpoint.epoch, " with ",
                  checkpoint.adam_steps, " optimizer steps does not fit --epochs ", config_.epochs);
    model.set_params(checkpoint.params);
    std::copy(checkpoint.buffers.begin(), checkpoint.buffers.end(), model.buffers().begin());
    state.adam->restore(checkpoint.adam_steps, checkpoint.adam_m, checkpoint.adam_v);
    state.epoch = checkpoint.epoch;
    state.result = checkpoint.current;
    state.bytes_total = checkpoint.bytes_total;
    state.raw_total = checkpoint.raw_total;
  });
}

std::string Trainer::save_checkpoint(const RunState& state, std::uint64_t partition) {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  std::string path;
  run_agreed(comm, "writing a checkpoint", [&] {
    if (comm.rank() != 0) return;
    CheckpointState c;
    c.identity = checkpoint_identity(config_, s.part.dataset);
    c.ranks = comm.size();
    c.partition_fingerprint = partition;
    c.run = state.run;
    c.epoch = state.epoch;
    c.current = state.result;
    c.bytes_total = state.bytes_total;
    c.raw_total = state.raw_total;
    c.history = s.history;
    const Model& model = *s.model;
    c.params = model.host_params();
    c.buffers.assign(model.buffers().begin(), model.buffers().end());
    c.adam_m = state.adam->first_moment();
    c.adam_v = state.adam->second_moment();
    c.adam_steps = state.adam->steps();
    c.finished = s.finished;
    const bool crash = s.fault.mode == FaultMode::Checkpoint && s.fault.rank == 0 &&
                       s.fault.epoch == state.epoch;
    path = write_checkpoint(config_.checkpoint_dir, c, crash).string();
    prune_checkpoints(config_.checkpoint_dir, config_.keep_checkpoints);
  });
  return path;
}

TrainOutcome Trainer::train(const EpochCallback& on_epoch) {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  const bool root = comm.rank() == 0;
  TrainOutcome out;
  if (config_.handle_signals) install_stop_handlers();
  const std::uint64_t partition = partition_fingerprint(comm, s.part.graph.owned_ids);
  const bool checkpoints = !config_.checkpoint_dir.empty();
  std::optional<CheckpointState> resumed;
  if (checkpoints) {
    std::vector<std::byte> image;
    run_agreed(comm, "checking --checkpoint-dir", [&] {
      if (!root) return;
      check_checkpoint_dir(config_.checkpoint_dir);
      if (config_.resume == ResumeMode::Never) return;
      image = find_checkpoint(config_, checkpoint_identity(config_, s.part.dataset),
                              out.resumed_from);
    });
    std::vector<std::int64_t> size = {static_cast<std::int64_t>(image.size())};
    comm.all_reduce_max(size);
    if (size[0] > 0) {
      image.resize(static_cast<std::size_t>(size[0]));
      comm.broadcast(image, 0, TrafficCategory::Setup);
      resumed = run_agreed(comm, "reading the checkpoint", [&] {
        CheckpointState c = checkpoint_from_image(image, "checkpoint from rank 0");
        TESSERA_CHECK(c.run >= 0 && c.run < config_.runs &&
                          static_cast<int>(c.finished.size()) == c.run,
                      InvalidInput, "checkpoint of run ", c.run, " with ", c.finished.size(),
                      " finished runs does not fit --runs ", config_.runs);
        return c;
      });
    }
  }
  s.history.clear();
  s.finished.clear();
  if (resumed) {
    out.resumed_ranks = resumed->ranks;
    s.finished = resumed->finished;
    s.history = resumed->history;
    if (root) {
      std::fprintf(stderr,
                   "Resuming from %s: run %d, %d of %d epochs done (checkpoint of %d rank%s, "
                   "now %d)\n",
                   out.resumed_from.c_str(), resumed->run + 1, resumed->epoch, config_.epochs,
                   resumed->ranks, resumed->ranks == 1 ? "" : "s", comm.size());
    }
    if (on_epoch) {
      for (EpochRecord record : s.history) {
        record.replayed = true;
        on_epoch(record);
      }
    }
  }
  for (int run = resumed ? resumed->run : 0; run < config_.runs; ++run) {
    RunState state = begin_run(run);
    if (resumed) {
      restore_run(state, *resumed);
      resumed.reset();
    }
    while (state.epoch < config_.epochs) {
      const bool stop = train_epoch(state, on_epoch);
      const bool last = state.epoch == config_.epochs && run == config_.runs - 1;
      const bool periodic =
          config_.checkpoint_every > 0 && state.epoch % config_.checkpoint_every == 0;
      if (checkpoints && (stop || last || periodic)) {
        out.checkpoint = save_checkpoint(state, partition);
        if (root && config_.progress && !last)
          std::fprintf(stderr, "Checkpoint %s\n", out.checkpoint.c_str());
      }
      if (stop && !last) {
        out.stopped = true;
        out.stop_signal = state.local_stop;
        out.stop_run = run;
        out.stop_epoch = state.epoch;
        out.results = s.finished;
        return out;
      }
    }
    s.finished.push_back(finish_run(state));
  }
  out.results = s.finished;
  return out;
}

}  // namespace tessera
