// SPDX-License-Identifier: Apache-2.0
// Pipeline and hybrid training of one rank: the layout (layers balanced over stages, checks),
// the memory estimate, and the engine: chunks, historical buffers, the 1F1B schedule over the
// stage streams, the hybrid halo refresh and the exact evaluation pass.
#include "engine/pipeline.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "comm/codec.h"
#include "comm/message_tags.h"
#include "core/error.h"
#include "core/kernels.h"
#include "engine/loss.h"
#include "engine/outputs.h"
#include "engine/system.h"

namespace tessera {

namespace {

std::int64_t layer_in(int l, std::int64_t in, std::int64_t hidden) { return l == 0 ? in : hidden; }
std::int64_t layer_out(int l, int layers, std::int64_t hidden, std::int64_t out) {
  return l + 1 == layers ? out : hidden;
}

// The codec noise key of the h0 stream at layer l: past every layer's own key, so that h0's
// rounding is drawn apart from the embeddings' beside it.
int initial_noise_key(int l) { return (1 << 20) + l; }

std::span<std::byte> bytes_of(Tensor& t) {
  return {reinterpret_cast<std::byte*>(t.raw()), t.bytes()};
}
std::span<const std::byte> bytes_of(const Tensor& t) {
  return {reinterpret_cast<const std::byte*>(t.raw()), t.bytes()};
}

// The values of a one-column index tensor (empty: none).
template <class T>
std::span<const T> values_of(const Tensor& t) {
  if (t.empty()) return {};
  return {t.data<T>(), static_cast<std::size_t>(t.rows())};
}

// A host tensor where the stage trains: itself on the CPU, a copy on a GPU.
Tensor placed(Tensor host, Device device) {
  return device.kind == DeviceKind::Cpu ? std::move(host) : host.to(device);
}

}  // namespace

std::vector<double> layer_costs(ModelKind kind, int layers, std::int64_t in_channels,
                                std::int64_t hidden, std::int64_t out_channels,
                                std::int64_t nodes, std::int64_t nnz) {
  std::vector<double> cost;
  const double gemms = kind->gemms;  // e.g. SAGE adds the root weight
  for (int l = 0; l < layers; ++l) {
    const std::int64_t f_in = layer_in(l, in_channels, hidden);
    const std::int64_t f_out = layer_out(l, layers, hidden, out_channels);
    cost.push_back(2.0 * static_cast<double>(nnz) * static_cast<double>(std::min(f_in, f_out)) +
                   2.0 * gemms * static_cast<double>(nodes) * static_cast<double>(f_in) *
                       static_cast<double>(f_out));
  }
  return cost;
}

std::vector<int> balance_layers(std::span<const double> cost, int stages) {
  const int layers = static_cast<int>(cost.size());
  TESSERA_CHECK(stages >= 1 && stages <= layers, InvalidArgument, "--stages ", stages,
                " with --num-layers ", layers, ": every stage needs at least one layer");
  std::vector<double> prefix(static_cast<std::size_t>(layers) + 1, 0.0);
  for (int l = 0; l < layers; ++l) prefix[l + 1] = prefix[l] + cost[static_cast<std::size_t>(l)];
  // best[s][l]: the least possible costliest stage when layers [0, l) go to s stages.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<std::size_t>(stages) + 1,
                                        std::vector<double>(static_cast<std::size_t>(layers) + 1, inf));
  std::vector<std::vector<int>> cut(best.size(), std::vector<int>(best[0].size(), 0));
  best[0][0] = 0.0;
  for (int s = 1; s <= stages; ++s) {
    for (int l = s; l <= layers; ++l) {
      for (int k = s - 1; k < l; ++k) {
        const double worst = std::max(best[s - 1][k], prefix[l] - prefix[k]);
        if (worst < best[s][l]) {  // strict: the earliest cut wins ties (deterministic)
          best[s][l] = worst;
          cut[s][l] = k;
        }
      }
    }
  }
  std::vector<int> first(static_cast<std::size_t>(stages) + 1, layers);
  int l = layers;
  for (int s = stages; s >= 1; --s) {
    l = cut[s][l];
    first[static_cast<std::size_t>(s) - 1] = l;
  }
  return first;
}

PipelineLayout pipeline_layout(const TrainConfig& config, int rank, int ranks,
                               std::span<const double> layer_cost) {
  PipelineLayout layout;
  layout.mode = config.mode();
  const int layers = config.num_layers;
  int stages = config.stages;
  if (layout.mode == ParallelMode::Pipeline) {
    if (stages == 0) stages = ranks;
    TESSERA_CHECK(stages == ranks, InvalidArgument, "--parallel pipeline runs one stage per rank: "
                  "--stages ", stages, " does not match the ", ranks,
                  " ranks (use --parallel hybrid for ranks = parts x stages)");
  } else {
    TESSERA_CHECK(stages >= 1 && stages <= ranks, InvalidArgument, "--stages ", stages,
                  " with ", ranks, " ranks: a pipeline cannot have more stages than ranks");
    TESSERA_CHECK(ranks % stages == 0, InvalidArgument, "--parallel hybrid: ", ranks,
                  " ranks are not a multiple of --stages ", stages,
                  " (ranks = graph parts x stages)");
  }
  TESSERA_CHECK(stages <= layers, InvalidArgument, "--stages ", stages, " > --num-layers ",
                layers, ": every stage needs at least one layer");
  layout.stages = stages;
  layout.groups = ranks / stages;
  layout.group = rank / stages;
  layout.stage = rank % stages;
  layout.chunks = config.chunks == 0 ? stages : config.chunks;
  TESSERA_CHECK(layout.chunks >= stages, InvalidArgument, "--chunks ", layout.chunks,
                " < --stages ", stages, ": every stage needs a chunk to work on");
  layout.stage_first = balance_layers(layer_cost, stages);
  return layout;
}

StageMemory estimate_stage_memory(const PipelineLayout& layout, ModelKind kind,
                                  std::int64_t in_channels, std::int64_t hidden,
                                  std::int64_t out_channels, std::int64_t nodes,
                                  std::int64_t halo_nodes, std::int64_t nnz,
                                  const LayerHyper& hyper) {
  StageMemory m;
  m.nodes = nodes;
  m.halo_nodes = halo_nodes;
  m.nnz = nnz;
  const int layers = layout.stage_first.back();
  const double n = static_cast<double>(nodes), halo = static_cast<double>(halo_nodes);
  double floats = 0.0;
  for (int l = layout.first_layer(); l < layout.first_layer() + layout.num_layers(); ++l) {
    const double f_in = static_cast<double>(layer_in(l, in_channels, hidden));
    const double f_out = static_cast<double>(layer_out(l, layers, hidden, out_channels));
    double w = std::min(f_in, f_out);
    if (kind->attention) {
      // Heads and source terms (H·D + H), in the history and per chunk: z, [z, s_src] over the
      // chunk's columns and their gradient; per edge the weights and their gradients (H each)
      // and the transposed pattern (about 3 floats' worth).
      const LayerShape shape{.layer = l,
                             .num_layers = layers,
                             .f_in = layer_in(l, in_channels, hidden),
                             .f_out = layer_out(l, layers, hidden, out_channels),
                             .hyper = hyper};
      w = static_cast<double>(kind->halo_widths(shape).forward);
      const double heads = static_cast<double>(shape.hidden() ? hyper.gat_heads
                                                              : hyper.gat_output_heads);
      floats += 3.0 * (n + halo) * w + static_cast<double>(nnz) * (2.0 * heads + 3.0);
    }
    // history: inputs and halo rows, gradients and those pushed to halo rows, remote gradients
    floats += 2.0 * (n + halo) * w + (halo_nodes > 0 ? n * w : 0.0);
    // Activations over the chunks: conv output, aggregate, residual sum, and the dropped-out
    // input where the backward needs it (SAGE, or a GCN layer that transforms first); weights
    // per slot.
    const double per_node = 3.0 * f_out + std::max(f_in, f_out) +
                            (kind->backward_reads_input(layer_in(l, in_channels, hidden),
                                                        layer_out(l, layers, hidden, out_channels))
                                 ? f_in
                                 : 0.0);
    floats += n * per_node + static_cast<double>(layout.chunks + 1) * f_in * f_out * 4.0;
  }
  // The stage's input and output per chunk and their gradients, the backward workspaces (three
  // rotating gradients and one before the activation, chunk-sized), and the evaluation pass
  // (inference only: the whole input and output and one layer's working set).
  const double f_in0 = static_cast<double>(layer_in(layout.first_layer(), in_channels, hidden));
  const double h = static_cast<double>(hidden);
  const double chunk = n / static_cast<double>(layout.chunks);
  floats += 2.0 * n * f_in0 + 2.0 * n * h + 4.0 * chunk * h + n * (f_in0 + 5.0 * h);
  if (layout.first_stage()) {
    m.features = nodes * in_channels;
    floats += n * static_cast<double>(in_channels);  // the chunks' features (and the eval copy)
  }
  // The operator in chunk order, its per-chunk blocks (and transposes), 12 bytes an entry.
  const double operator_bytes = 12.0 * static_cast<double>(nnz) * 3.0 + 16.0 * n;
  m.bytes = static_cast<std::uint64_t>(4.0 * floats + operator_bytes);
  return m;
}

struct PipelineEngine::Chunk {
  std::unique_ptr<ChunkPropagator> propagator;
  GraphContext context;
  std::span<const GlobalId> ids;  // (n_c) global ids on the device: dropout and noise keys
  // What the stage reads of the data, on its device:
  Tensor features;                      // (n_c, F) first stage
  Tensor labels;                        // (n_c, 1) i64 last stage, multi-class
  Tensor targets;                       // (n_c, T) last stage, multi-label
  Tensor loss_rows;                     // (R_c, 1) i32 chunk rows with a training label (last)
  Tensor input;                         // (n_c, H) from the previous stage
  Tensor output;                        // (n_c, H) to the next stage, or the logits (n_c, C)
  Tensor d_output;                      // gradient of the output (from the next stage / loss)
  Tensor d_input;                       // (n_c, H) gradient of the input, to the previous stage
  Tensor logp;                          // loss workspace
  Tensor forward_bytes, backward_bytes, received;  // encoded messages (u8, on the device)
  // Initial-residual kinds: h0 (n_c, H) from the previous stage, the gradient of h0 the later
  // stages accumulated (from the next stage), this stage's sum (to the previous one).
  Tensor initial, d_initial_later, d_initial;
  Tensor initial_forward_bytes, initial_backward_bytes, initial_received;
};

PipelineEngine::PipelineEngine(const TrainConfig& config, const PipelineLayout& layout,
                               GraphPart& part, std::unique_ptr<Communicator> pipe_comm,
                               std::unique_ptr<Communicator> stage_comm, const Csr& op,
                               MatrixSymmetry owned_symmetry, std::span<const NodeId> loss_rows,
                               std::int64_t loss_terms_total, Device device,
                               const PartExchangeFactory& part_exchange)
    : config_(config),
      layout_(layout),
      device_(device),
      pipe_comm_(std::move(pipe_comm)),
      stage_comm_(std::move(stage_comm)) {
  const LocalGraph& g = part.graph;
  const std::int64_t n = g.num_owned();
  chunks_ = make_chunks(g.adjacency, part.train_rows, layout.chunks, config.seed);
  op_ = std::make_unique<ChunkedOperator>(op, owned_symmetry, chunks_);
  op_->upload(device_);
  history_ = std::make_unique<History>(n, g.num_halo(), layout.first_layer(), layout.num_layers(),
                                       device_);
  for (int l = layout.first_layer(); l < layout.first_layer() + layout.num_layers(); ++l)
    history_->layer(l).pushed = config.kind()->attention;  // the edge-weighting kinds
  owned_ids_.resize(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r)
    owned_ids_[static_cast<std::size_t>(r)] = g.owned_ids[chunks_.order[static_cast<std::size_t>(r)]];
  device_ids_ = index_tensor(std::span<const GlobalId>(owned_ids_), device_);
  order_list_ = DeviceIndexList(chunks_.order);
  halo_ids_ = g.halo_ids;
  halo_plan_ = g.halo;
  for (NodeId& row : halo_plan_.send_rows) row = chunks_.position[static_cast<std::size_t>(row)];
  forward_codec_ = config.forward_codec();
  backward_codec_ = config.backward_codec();
  global_nodes_ = part.dataset.num_nodes;
  loss_scale_ = 1.0f / static_cast<float>(loss_terms_total);
  multiclass_ = part.dataset.task == TaskType::MultiClass;
  if (part_exchange && layout.groups > 1) {
    part_exchange_ = part_exchange(*stage_comm_, halo_plan_, owned_ids_, halo_ids_);
    eval_propagator_ = part_exchange_->eval_propagator(op_->whole(), owned_symmetry);
  } else {
    eval_propagator_ = std::make_unique<LocalPropagator>(op_->whole(), owned_symmetry);
  }
  eval_propagator_->upload(device_);
  std::int64_t largest = 0;
  for (int c = 0; c < chunks_.num_chunks(); ++c) largest = std::max(largest, chunks_.size(c));
  identity_.resize(static_cast<std::size_t>(largest));
  std::iota(identity_.begin(), identity_.end(), 0);
  identity_list_ = DeviceIndexList(identity_);
  place_chunks(part, loss_rows);
  part.features = Tensor();  // the chunks hold what this stage needs
}

// Per chunk: its propagator and context, and what its stage needs of the data, on the device.
void PipelineEngine::place_chunks(const GraphPart& part, std::span<const NodeId> loss_rows) {
  const std::int64_t n = op_->num_owned();
  std::vector<int> chunk_of(static_cast<std::size_t>(n));
  for (int c = 0; c < chunks_.num_chunks(); ++c)
    std::fill_n(chunk_of.begin() + chunks_.begin(c), chunks_.size(c), c);
  chunk_state_.resize(static_cast<std::size_t>(chunks_.num_chunks()));
  for (int c = 0; c < chunks_.num_chunks(); ++c) {
    Chunk& k = chunk_state_[static_cast<std::size_t>(c)];
    const std::int64_t first = chunks_.begin(c), rows = chunks_.size(c);
    k.propagator = std::make_unique<ChunkPropagator>(*op_, *history_, chunks_, c, owned_ids_,
                                                     halo_ids_);
    k.context.set_propagator(*config_.kind()->op, k.propagator.get());
    k.ids = values_of<GlobalId>(device_ids_)
                .subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(rows));
    k.context.global_ids = k.ids;
    k.context.global_num_nodes = global_nodes_;
    const std::span<const NodeId> order =
        std::span<const NodeId>(chunks_.order).subspan(static_cast<std::size_t>(first),
                                                       static_cast<std::size_t>(rows));
    if (layout_.first_stage()) {
      Tensor features(rows, part.features.cols());
      gather_rows(features, part.features, order);
      k.features = placed(std::move(features), device_);
    }
    if (layout_.last_stage()) {
      if (multiclass_) {
        std::vector<std::int64_t> labels(static_cast<std::size_t>(rows));
        for (std::int64_t i = 0; i < rows; ++i) labels[i] = part.labels[order[i]];
        k.labels = index_tensor(std::span<const std::int64_t>(labels), device_);
      } else {
        Tensor targets(rows, part.targets.cols());
        gather_rows(targets, part.targets, order);
        k.targets = placed(std::move(targets), device_);
      }
    }
  }
  if (layout_.last_stage()) {
    std::vector<std::vector<NodeId>> chunk_loss_rows(chunk_state_.size());
    for (NodeId v : loss_rows) {
      const NodeId p = chunks_.position[static_cast<std::size_t>(v)];
      const int c = chunk_of[static_cast<std::size_t>(p)];
      chunk_loss_rows[static_cast<std::size_t>(c)].push_back(
          static_cast<NodeId>(p - chunks_.begin(c)));
    }
    for (std::size_t c = 0; c < chunk_state_.size(); ++c) {
      std::sort(chunk_loss_rows[c].begin(), chunk_loss_rows[c].end());
      chunk_state_[c].loss_rows =
          index_tensor(std::span<const NodeId>(chunk_loss_rows[c]), device_);
    }
  }
}

PipelineEngine::~PipelineEngine() = default;

ModelConfig PipelineEngine::stage_model(const ModelConfig& whole) const {
  ModelConfig c = whole;
  c.first_layer = layout_.first_layer();
  c.num_layers = layout_.num_layers();
  c.total_layers = whole.num_layers;
  c.slots = chunks_.num_chunks() + 1;  // the last one for evaluation (inference only)
  return c;
}

void PipelineEngine::reset_run() {
  history_->clear();
  if (part_exchange_) part_exchange_->reset();
}

ExchangeTimes PipelineEngine::times() const {
  ExchangeTimes t = halo_times_;
  t.comm_s += wait_s_;
  t.exposed_s += wait_s_;
  t.encode_s += encode_s_;
  t.decode_s += decode_s_;
  return t;
}

void PipelineEngine::send_rows(const Tensor& x, int c, int peer, int tag, int layer, bool backward,
                               std::uint64_t seed, std::int64_t epoch, Tensor& bytes) {
  const CodecKind kind = backward ? backward_codec_ : forward_codec_;
  if (kind == CodecKind::None) {
    sends_.push_back(pipe_comm_->isend(bytes_of(x), peer, tag, TrafficCategory::Pipeline));
    return;
  }
  Stopwatch watch;
  const std::int64_t rows = x.rows(), f = x.cols();
  const std::span<std::byte> message = message_buffer(
      bytes, kMessageHeaderBytes + static_cast<std::size_t>(rows) * encoded_row_bytes(kind, f),
      x.device());
  write_message_header(message, x.device(), kind, rows, f);
  const CodecNoise noise{seed, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(layer),
                         backward ? RngPurpose::CodecBackward : RngPurpose::CodecForward};
  encode_rows(kind, message.subspan(kMessageHeaderBytes), x,
              identity_list_.on(x.device()).first(static_cast<std::size_t>(rows)),
              chunk_state_[static_cast<std::size_t>(c)].ids, noise);
  encode_s_ += watch.seconds();
  sends_.push_back(pipe_comm_->isend(std::span<const std::byte>(message), peer, tag,
                                     TrafficCategory::Pipeline, x.bytes()));
}

void PipelineEngine::receive_rows(Tensor& x, int c, std::int64_t width, int peer, int tag,
                                  bool backward, Tensor& bytes) {
  const CodecKind kind = backward ? backward_codec_ : forward_codec_;
  const std::int64_t rows = chunks_.size(c);
  x.resize(rows, width, device_);
  Stopwatch watch;
  if (kind == CodecKind::None) {
    pipe_comm_->irecv(bytes_of(x), peer, tag)->wait();
    wait_s_ += watch.seconds();
    return;
  }
  const std::span<std::byte> message = message_buffer(
      bytes, kMessageHeaderBytes + static_cast<std::size_t>(rows) * encoded_row_bytes(kind, width),
      device_);
  pipe_comm_->irecv(message, peer, tag)->wait();
  wait_s_ += watch.seconds();
  Stopwatch decode;
  const std::string where = std::string("pipeline ") + (backward ? "gradients" : "embeddings") +
                            " from stage " + std::to_string(peer) + ", chunk " +
                            std::to_string(c);
  read_message_header(message, device_, rows, width, kind, where);
  decode_rows(kind, x, 0, rows, std::span<const std::byte>(message).subspan(kMessageHeaderBytes));
  decode_s_ += decode.seconds();
}

void PipelineEngine::forward_chunk(Model& model, int c, std::int64_t epoch, std::uint64_t seed) {
  Chunk& k = chunk_state_[static_cast<std::size_t>(c)];
  const bool initial = config_.kind()->initial_residual;
  const Tensor* input = &k.features;
  if (!layout_.first_stage()) {
    receive_rows(k.input, c, config_.hidden_channels, layout_.stage - 1, tags::pipeline_forward(c),
                 false, k.received);
    input = &k.input;
    if (initial) {
      receive_rows(k.initial, c, config_.hidden_channels, layout_.stage - 1,
                   tags::pipeline_initial_forward(c), false, k.initial_received);
      model.set_initial(c, &k.initial);
    }
  }
  model.forward(k.output, *input, k.context, /*training=*/true, epoch, c);
  if (layout_.last_stage()) {
    loss_sum_ += loss_and_gradient(k.d_output, k.logp, k.output, multiclass_,
                                   values_of<std::int64_t>(k.labels), k.targets,
                                   values_of<NodeId>(k.loss_rows), loss_scale_);
  } else {
    const int next_layer = layout_.first_layer() + layout_.num_layers();
    send_rows(k.output, c, layout_.stage + 1, tags::pipeline_forward(c), next_layer, false, seed,
              epoch, k.forward_bytes);
    if (initial)
      send_rows(model.initial(c), c, layout_.stage + 1, tags::pipeline_initial_forward(c),
                initial_noise_key(next_layer), false, seed, epoch, k.initial_forward_bytes);
  }
}

void PipelineEngine::backward_chunk(Model& model, int c, std::int64_t epoch, std::uint64_t seed) {
  Chunk& k = chunk_state_[static_cast<std::size_t>(c)];
  const bool initial = config_.kind()->initial_residual;
  if (!layout_.last_stage()) {
    receive_rows(k.d_output, c, config_.hidden_channels, layout_.stage + 1,
                 tags::pipeline_backward(c), true, k.received);
    if (initial)
      receive_rows(k.d_initial_later, c, config_.hidden_channels, layout_.stage + 1,
                   tags::pipeline_initial_backward(c), true, k.initial_received);
  }
  const Tensor* d_initial_later = initial && !layout_.last_stage() ? &k.d_initial_later : nullptr;
  model.backward(k.d_output, k.context, layout_.first_stage() ? nullptr : &k.d_input, c,
                 d_initial_later, initial ? &k.d_initial : nullptr);
  if (!layout_.first_stage()) {
    send_rows(k.d_input, c, layout_.stage - 1, tags::pipeline_backward(c), layout_.first_layer(),
              true, seed, epoch, k.backward_bytes);
    if (initial)
      send_rows(k.d_initial, c, layout_.stage - 1, tags::pipeline_initial_backward(c),
                initial_noise_key(layout_.first_layer()), true, seed, epoch,
                k.initial_backward_bytes);
  }
}

double PipelineEngine::train_step(Model& model, std::int64_t epoch, std::uint64_t seed) {
  wait_s_ = encode_s_ = decode_s_ = 0.0;
  halo_times_ = {};
  loss_sum_ = 0.0;
  sends_.clear();
  // 1F1B: stage s starts S - s - 1 chunks ahead, then alternates one forward and one backward
  // (the last stage runs each chunk's backward right after its forward). Every stage handles
  // the chunks in the same order in both directions, so which rows are fresh does not depend
  // on timing: the run is deterministic.
  const int chunks = chunks_.num_chunks();
  const int warmup = std::min(chunks, layout_.stages - layout_.stage - 1);
  int forwards = 0, backwards = 0;
  while (forwards < warmup) forward_chunk(model, forwards++, epoch, seed);
  while (backwards < chunks) {
    if (forwards < chunks) forward_chunk(model, forwards++, epoch, seed);
    backward_chunk(model, backwards++, epoch, seed);
  }
  Stopwatch watch;
  wait_all(sends_);
  wait_s_ += watch.seconds();
  sends_.clear();
  if (part_exchange_) {
    part_exchange_->refresh(*history_, *op_, layout_.first_layer(), layout_.num_layers(), epoch,
                            seed, /*restored=*/false);
    halo_times_ = part_exchange_->times();
  }
  return loss_sum_;
}

void PipelineEngine::evaluate(Model& model, Tensor& logits, std::int64_t epoch) {
  const int chunks = chunks_.num_chunks();
  const std::int64_t n = op_->num_owned();
  const bool initial = config_.kind()->initial_residual;
  Tensor input;  // (N, F_in) of the stage's first layer, in chunk order
  Tensor h0;     // (N, H) initial-residual kinds, after the first stage
  if (layout_.first_stage()) {
    input.resize(n, chunk_state_.front().features.cols(), device_);
    for (int c = 0; c < chunks; ++c)
      copy_rows_into(input, chunks_.begin(c), chunk_state_[static_cast<std::size_t>(c)].features);
  } else {
    input.resize(n, config_.hidden_channels, device_);
    pipe_comm_->irecv(bytes_of(input), layout_.stage - 1, tags::kPipelineEval)->wait();
    if (initial) {
      h0.resize(n, config_.hidden_channels, device_);
      pipe_comm_->irecv(bytes_of(h0), layout_.stage - 1, tags::kPipelineEvalInitial)->wait();
      model.set_initial(chunks, &h0);
    }
  }
  model.set_inference_slot(chunks);  // two layers of activations, not all of them
  GraphContext context;
  context.set_propagator(*config_.kind()->op, eval_propagator_.get());
  context.global_ids = values_of<GlobalId>(device_ids_);
  context.global_num_nodes = global_nodes_;
  Tensor output;
  model.forward(output, input, context, /*training=*/false, epoch, chunks);
  if (!layout_.last_stage()) {
    std::vector<std::unique_ptr<Request>> sends;
    sends.push_back(pipe_comm_->isend(bytes_of(std::as_const(output)), layout_.stage + 1,
                                      tags::kPipelineEval, TrafficCategory::Pipeline));
    if (initial)
      sends.push_back(pipe_comm_->isend(bytes_of(model.initial(chunks)), layout_.stage + 1,
                                        tags::kPipelineEvalInitial, TrafficCategory::Pipeline));
    wait_all(sends);
    logits = Tensor();
    return;
  }
  logits.resize(n, output.cols(), device_);
  scatter_rows(logits, output, order_list_.on(device_));  // back to local row order
}

namespace {

std::string history_name(int layer, const char* what) {
  return "history." + std::to_string(layer) + "." + what;
}

}  // namespace

std::vector<NodeArray> PipelineEngine::save_history(Communicator& world) {
  const int layers = layout_.stage_first.back();
  // Per layer, from the ranks that keep it: the width of its buffers, whether a backward
  // aggregated gradients, and whether the other parts' contributions must be kept as they are
  // (pushed layers in hybrid mode: the refresh cannot rebuild them from this part's buffers).
  constexpr std::size_t kFields = 3;
  std::vector<std::int64_t> shape(kFields * static_cast<std::size_t>(layers), 0);
  const auto at = [&](int l, std::size_t field) -> std::int64_t& {
    return shape[kFields * static_cast<std::size_t>(l) + field];
  };
  for (int l = layout_.first_layer(); l < layout_.first_layer() + layout_.num_layers(); ++l) {
    const History::Layer& h = history_->layer(l);
    at(l, 0) = h.inputs.cols();
    at(l, 1) = h.backward_used ? 1 : 0;
    at(l, 2) = h.backward_used && h.pushed && part_exchange_ ? 1 : 0;
  }
  world.all_reduce_max(shape);
  std::vector<NodeArray> arrays;
  auto gather = [&](int l, const Tensor* mine, const char* what) {
    const std::int64_t f = at(l, 0);
    Tensor host;  // a GPU stage's buffers, copied down
    if (mine != nullptr && mine->device().kind != DeviceKind::Cpu) {
      host = mine->to(Device::cpu());
      mine = &host;
    }
    Tensor all = gather_by_id(
        world, mine, mine ? std::span<const GlobalId>(owned_ids_) : std::span<const GlobalId>(),
        global_nodes_, f);
    if (world.rank() == 0) arrays.push_back({history_name(l, what), std::move(all)});
  };
  for (int l = 0; l < layers; ++l) {
    if (at(l, 0) == 0) continue;  // not trained yet
    History::Layer* h = history_->has(l) ? &history_->layer(l) : nullptr;
    gather(l, h ? &h->inputs : nullptr, "inputs");
    if (at(l, 1) != 0) gather(l, h ? &h->grads : nullptr, "grads");
    if (at(l, 2) != 0) {
      // A part without halo rows keeps no remote gradients (History::sized): it received none.
      const Tensor* remote = h ? &h->remote_grads : nullptr;
      Tensor none;
      if (remote != nullptr && remote->empty()) {
        none = Tensor::zeros(h->inputs.rows(), at(l, 0));
        remote = &none;
      }
      gather(l, remote, "remote_grads");
    }
  }
  return arrays;
}

void PipelineEngine::restore_history(const std::vector<NodeArray>& arrays) {
  auto find = [&arrays](const std::string& name) -> const Tensor* {
    for (const NodeArray& a : arrays)
      if (a.name == name) return &a.values;
    return nullptr;
  };
  const std::int64_t n = op_->num_owned();
  // Rows in chunk order from the checkpoint's node-id order, then to where the buffers live.
  auto pick = [&](Tensor& dst, const Tensor& all) {
    Tensor rows(n, all.cols());
    for (std::int64_t r = 0; r < n; ++r)
      std::copy_n(all.row<float>(owned_ids_[static_cast<std::size_t>(r)]), all.cols(),
                  rows.row<float>(r));
    dst.copy_from(rows);
  };
  for (int l = layout_.first_layer(); l < layout_.first_layer() + layout_.num_layers(); ++l) {
    const Tensor* inputs = find(history_name(l, "inputs"));
    const Tensor* grads = find(history_name(l, "grads"));
    const Tensor* remote = find(history_name(l, "remote_grads"));
    if (inputs == nullptr) continue;  // a checkpoint of graph mode: as a new run
    for (const Tensor* t : {inputs, grads, remote}) {
      TESSERA_CHECK(
          t == nullptr ||
              (t->rows() == global_nodes_ && t->cols() == inputs->cols() && t->cols() > 0),
          InvalidInput, "checkpoint: the historical buffers of layer ", l, " are ",
          t->shape_string(), ", expected ", global_nodes_, " rows of width ", inputs->cols());
    }
    History::Layer& h = history_->sized(l, inputs->cols());
    pick(h.inputs, *inputs);
    if (grads != nullptr) {
      pick(h.grads, *grads);
      h.backward_used = true;
    }
    if (remote != nullptr && !h.remote_grads.empty()) pick(h.remote_grads, *remote);
  }
}

void PipelineEngine::refresh_restored(std::int64_t epoch, std::uint64_t seed) {
  if (!part_exchange_) return;
  part_exchange_->refresh(*history_, *op_, layout_.first_layer(), layout_.num_layers(), epoch,
                          seed, /*restored=*/true);
}

}  // namespace tessera
