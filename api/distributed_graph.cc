// SPDX-License-Identifier: Apache-2.0
// DistributedGraph (include/tessera/distributed_graph.h): the part loading of Session::load, then
// one HaloExchange and one HaloPropagator per aggregation used (built on first use, and put on
// the rank's GPU when the options name one), run on the caller's arrays through borrowed tensors.
#include "tessera/distributed_graph.h"

#include <algorithm>
#include <array>
#include <span>
#include <utility>

#include "api/api_support.h"
#include "api/graph_view.h"
#include "comm/halo_exchange.h"
#include "comm/mpi_communicator.h"
#include "core/caller_stream.h"
#include "core/device.h"
#include "core/host_memory.h"
#include "core/kernels.h"
#include "core/rng.h"
#include "datasets/dataset.h"
#include "engine/halo_propagator.h"
#include "engine/modes.h"
#include "engine/part_loader.h"
#include "layers/layer_kind.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

constexpr std::array<const GraphOperator*, 3> kOperators = {&kGcnOperator, &kMeanOperator,
                                                            &kSumOperator};

}  // namespace

Aggregation parse_aggregation(const std::string& name) {
  if (name == "gcn") return Aggregation::Gcn;
  if (name == "mean") return Aggregation::Mean;
  if (name == "sum") return Aggregation::Sum;
  throw std::invalid_argument("aggregation: expected gcn, mean or sum, got '" + name + "'");
}

struct DistributedGraph::Impl {
  Options options;
  TrainConfig config;
  std::unique_ptr<MpiCommunicator> comm;
  // GPU ranks: this rank's GPU and, with several ranks, the communicator of the halos (traffic
  // counted in comm's counter); on the CPU the CPU and none.
  Device device;
  std::unique_ptr<Communicator> gpu_comm;
  std::uintptr_t stream = 0;  // the caller's CUDA stream (set_stream)
  bool loaded = false;
  GraphPart part;
  std::array<std::int64_t, 3> split_sizes{};  // train, valid, test over all ranks
  std::uint64_t epoch = 0;                    // keys the dropout masks
  std::unique_ptr<HaloExchange> exchange;
  std::array<std::unique_ptr<HaloPropagator>, 3> propagators;  // by Aggregation
  Tensor device_ids;  // (num_local, 1) i64 on a GPU: the owned rows' global ids (dropout keys)
  std::span<const GlobalId> ids;  // part.graph.owned_ids, or device_ids' on a GPU

  template <class F>
  auto guarded(F&& body) -> decltype(body()) {
    return api::guarded(comm.get(), std::forward<F>(body));
  }
  void require_loaded(const char* what) const {
    TESSERA_CHECK(loaded, InvalidArgument, "DistributedGraph::", what, ": load a dataset first");
  }
  void load(PartSource source);
  HaloPropagator& propagator(Aggregation op);
  void check_call(const char* what, std::int64_t f, int call) const;
  // The caller's rows (num_local, f) at `data` as a tensor of device; InvalidArgument naming
  // `name` when they are memory of another device.
  Tensor rows(const char* what, const char* name, const float* data, std::int64_t f) const;
  void run_dropout(float* out, const float* in, std::int64_t f, float p, std::uint64_t key,
                   bool backward);
};

DistributedGraph::DistributedGraph(const Options& options)
    : DistributedGraph(options, MPI_COMM_NULL) {}

DistributedGraph::DistributedGraph(const Options& options, MPI_Comm comm)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = options;
  s.comm = api::make_communicator(comm, options.comm_timeout);
  s.guarded([&] {
    run_agreed(*s.comm, "checking options", [&] {
      s.config = api::to_config(options);
      TESSERA_CHECK(s.config.mode() == ParallelMode::Graph, InvalidArgument,
                    "DistributedGraph: parallel=", s.config.parallel,
                    " is Tessera's own trainer's; a DistributedGraph is one graph part per rank");
      TESSERA_CHECK(!s.config.adaptive(), InvalidArgument,
                    "DistributedGraph: codec=adaptive re-plans its bits inside Tessera's own "
                    "trainer; use a fixed codec (none, bf16, fp16, int8, int4, int2)");
      TESSERA_CHECK(s.config.features_dtype() == DType::F32, InvalidArgument,
                    "DistributedGraph: feature_dtype=", s.config.feature_dtype,
                    " is how Tessera's own trainer keeps its features; here they are the "
                    "caller's arrays, kept as the caller keeps them (aggregate_dtype=bf16 reads "
                    "the aggregated rows in bf16)");
    });
    // Binding a GPU makes it current; the caller's stays current when this returns.
    const CurrentDevice callers(parse_device(s.config.device), false);
    DevicePlacement placement = place_on_device(s.config, *s.comm);
    s.device = placement.device;
    s.gpu_comm = std::move(placement.comm);
    api::warn_about_blas(*s.comm, options.verbosity);
  });
}

DistributedGraph::~DistributedGraph() {
  if (!impl_) return;                                 // moved from
  const CurrentDevice callers(impl_->device, false);  // freeing GPU memory switches the GPU
  impl_.reset();
}
DistributedGraph::DistributedGraph(DistributedGraph&&) noexcept = default;
DistributedGraph& DistributedGraph::operator=(DistributedGraph&&) noexcept = default;

int DistributedGraph::rank() const { return impl_->comm->rank(); }
int DistributedGraph::size() const { return impl_->comm->size(); }
const Options& DistributedGraph::options() const { return impl_->options; }
std::string DistributedGraph::device() const { return to_string(impl_->device); }
void DistributedGraph::set_stream(std::uintptr_t stream) { impl_->stream = stream; }

void DistributedGraph::Impl::load(PartSource source) {
  source.partitions_dir = options.partitions;
  source.plan_file = options.partition_file;
  source.parts = options.parts;
  source.method = run_agreed(*comm, "checking options",
                             [&] { return parse_partition_method(options.partition); });
  source.seed = config.seed;
  source.node_order = parse_node_order(options.node_order);
  source.progress = options.verbosity >= 2 && comm->rank() == 0;
  const CurrentDevice callers(device, false);  // freeing and uploading GPU memory switch the GPU
  propagators = {};
  exchange.reset();
  device_ids = Tensor();
  loaded = false;
  LoadedPart loaded_part = load_part(source, *comm);
  part = std::move(loaded_part.part);
  if (config.normalize_features) row_normalize(part.features);
  split_sizes = {static_cast<std::int64_t>(part.train_rows.size()),
                 static_cast<std::int64_t>(part.valid_rows.size()),
                 static_cast<std::int64_t>(part.test_rows.size())};
  std::vector<double> sizes(split_sizes.begin(), split_sizes.end());
  comm->all_reduce_sum(sizes, TrafficCategory::Setup);
  for (std::size_t i = 0; i < sizes.size(); ++i)
    split_sizes[i] = static_cast<std::int64_t>(sizes[i]);
  run_agreed(*comm, "setting up the halo exchange", [&] {
    const LocalGraph& g = part.graph;
    ExchangeCodecs codecs;
    codecs.forward = config.forward_codec();
    codecs.backward = config.backward_codec();
    codecs.error_feedback = config.error_feedback;
    codecs.num_layers = config.num_layers;
    exchange = std::make_unique<HaloExchange>(gpu_comm ? *gpu_comm : *comm, g.halo, g.owned_ids,
                                              g.halo_ids, codecs);
    exchange->set_noise(config.seed, 0);
    ids = part.graph.owned_ids;
    if (device.kind == DeviceKind::Cpu) return;
    const CurrentDevice on_gpu(device);
    device_ids = index_tensor(ids, device);
    ids = {device_ids.data<GlobalId>(), ids.size()};
  });
  loaded = true;
}

HaloPropagator& DistributedGraph::Impl::propagator(Aggregation op) {
  std::unique_ptr<HaloPropagator>& p = propagators[static_cast<std::size_t>(op)];
  if (!p) {
    const GraphOperator& g = *kOperators[static_cast<std::size_t>(op)];
    p = std::make_unique<HaloPropagator>(g.build(part.graph.adjacency, part.graph.degrees),
                                         g.symmetry, *exchange);
    p->upload(device);
    p->set_operand_dtype(config.aggregation_dtype());
  }
  return *p;
}

void DistributedGraph::Impl::check_call(const char* what, std::int64_t f, int call) const {
  require_loaded(what);
  TESSERA_CHECK(f > 0, InvalidArgument, "DistributedGraph::", what, ": width ", f,
                ", expected at least 1 column");
  TESSERA_CHECK(call >= 0 && call < config.num_layers, InvalidArgument, "DistributedGraph::", what,
                ": call ", call, " is not in [0, num_layers = ", config.num_layers,
                "): set num_layers to the aggregations one pass makes");
}

Tensor DistributedGraph::Impl::rows(const char* what, const char* name, const float* data,
                                    std::int64_t f) const {
  const std::int64_t n = part.graph.num_owned();
  // Asked on GPUs only: on a machine with a GPU the question makes a CUDA context, which a CPU
  // graph should not cost.
  const bool on_cpu = device.kind == DeviceKind::Cpu;
  TESSERA_CHECK(n == 0 || on_cpu || memory_on(device, data), InvalidArgument,
                "DistributedGraph::", what, ": ", name, " is not memory of ", to_string(device),
                ", where this graph's rows live");
  return Tensor::borrow(const_cast<float*>(data), n, f, DType::F32, device);
}

void DistributedGraph::load(const std::string& spec) {
  impl_->guarded([&] {
    PartSource source;
    source.dataset = spec.empty() ? impl_->options.dataset : spec;
    source.dataset_given = !spec.empty();
    impl_->load(std::move(source));
  });
}

void DistributedGraph::load(const GraphView& graph) {
  impl_->guarded([&] {
    PartSource source;
    source.dataset = graph.name;
    source.make_dataset = [&graph] { return dataset_from_view(graph); };
    impl_->load(std::move(source));
  });
}

std::int64_t DistributedGraph::num_nodes() const {
  impl_->require_loaded("num_nodes");
  return impl_->part.dataset.num_nodes;
}

std::int64_t DistributedGraph::num_local() const {
  impl_->require_loaded("num_local");
  return impl_->part.graph.num_owned();
}

std::vector<std::int64_t> DistributedGraph::node_ids() const {
  impl_->require_loaded("node_ids");
  const std::span<const GlobalId> ids = impl_->part.graph.dataset_ids();
  return {ids.begin(), ids.end()};
}

std::int64_t DistributedGraph::num_features() const {
  impl_->require_loaded("num_features");
  return impl_->part.dataset.num_features;
}

std::int64_t DistributedGraph::num_outputs() const {
  impl_->require_loaded("num_outputs");
  return impl_->part.dataset.num_outputs();
}

std::string DistributedGraph::metric() const {
  impl_->require_loaded("metric");
  return impl_->part.dataset.eval_metric;
}

Matrix DistributedGraph::features() const {
  impl_->require_loaded("features");
  return api::to_matrix(impl_->part.features);
}

std::vector<std::int64_t> DistributedGraph::labels() const {
  impl_->require_loaded("labels");
  return impl_->part.labels;
}

Matrix DistributedGraph::targets() const {
  impl_->require_loaded("targets");
  return api::to_matrix(impl_->part.targets);
}

std::vector<float> DistributedGraph::degrees() const {
  impl_->require_loaded("degrees");
  const LocalGraph& g = impl_->part.graph;
  // LocalGraph::degrees holds the global degree plus the self loop, owned rows first.
  std::vector<float> out(g.degrees.begin(), g.degrees.begin() + g.num_owned());
  for (float& d : out) d -= 1.0f;
  return out;
}

namespace {

std::size_t split_index(const std::string& split) {
  if (split == "train") return 0;
  if (split == "valid") return 1;
  if (split == "test") return 2;
  throw std::invalid_argument("split: expected train, valid or test, got '" + split + "'");
}

}  // namespace

std::vector<std::int64_t> DistributedGraph::split_rows(const std::string& split) const {
  impl_->require_loaded("split_rows");
  const GraphPart& p = impl_->part;
  const std::vector<NodeId>* rows[] = {&p.train_rows, &p.valid_rows, &p.test_rows};
  const std::vector<NodeId>& r = *rows[split_index(split)];
  return {r.begin(), r.end()};
}

std::int64_t DistributedGraph::split_size(const std::string& split) const {
  impl_->require_loaded("split_size");
  return impl_->split_sizes[split_index(split)];
}

void DistributedGraph::aggregate(Aggregation op, float* out, const float* x, std::int64_t f,
                                 int call) {
  Impl& s = *impl_;
  s.guarded([&] {
    s.check_call("aggregate", f, call);
    const Tensor in = s.rows("aggregate", "x", x, f);
    Tensor result = s.rows("aggregate", "out", out, f);
    CallerStream caller(s.device, s.stream);
    s.propagator(op).forward(result, in, call);
    caller.finish();
  });
}

void DistributedGraph::aggregate_backward(Aggregation op, float* d_x, const float* d_out,
                                          std::int64_t f, int call) {
  Impl& s = *impl_;
  s.guarded([&] {
    s.check_call("aggregate_backward", f, call);
    const Tensor grad_out = s.rows("aggregate_backward", "d_out", d_out, f);
    Tensor grad_in = s.rows("aggregate_backward", "d_x", d_x, f);
    CallerStream caller(s.device, s.stream);
    s.propagator(op).backward(grad_in, grad_out, call);
    caller.finish();
  });
}

void DistributedGraph::set_epoch(std::uint64_t epoch) {
  impl_->require_loaded("set_epoch");
  impl_->exchange->set_noise(impl_->config.seed, epoch);
  impl_->epoch = epoch;
}

void DistributedGraph::Impl::run_dropout(float* out, const float* in, std::int64_t f, float p,
                                         std::uint64_t key, bool backward) {
  const char* what = backward ? "dropout_backward" : "dropout";
  require_loaded(what);
  TESSERA_CHECK(f > 0, InvalidArgument, "DistributedGraph::", what, ": width ", f,
                ", expected at least 1 column");
  TESSERA_CHECK(p >= 0.0f && p < 1.0f, InvalidArgument, "DistributedGraph::", what, ": p = ", p,
                ", expected a probability in [0, 1)");
  const Tensor x = rows(what, backward ? "d_out" : "x", in, f);
  Tensor y = rows(what, backward ? "d_x" : "out", out, f);
  const CounterRng rng(config.seed, epoch, key, RngPurpose::Dropout);
  CallerStream caller(device, stream);
  if (backward) {
    tessera::dropout_backward(y, x, p, rng, ids);
  } else {
    tessera::dropout_forward(y, x, p, rng, ids);
  }
  caller.finish();
}

void DistributedGraph::dropout(float* out, const float* x, std::int64_t f, float p,
                               std::uint64_t key) {
  impl_->guarded([&] { impl_->run_dropout(out, x, f, p, key, false); });
}

void DistributedGraph::dropout_backward(float* d_x, const float* d_out, std::int64_t f, float p,
                                        std::uint64_t key) {
  impl_->guarded([&] { impl_->run_dropout(d_x, d_out, f, p, key, true); });
}

void DistributedGraph::all_reduce_sum(float* values, std::int64_t n) {
  impl_->guarded([&] {
    impl_->comm->all_reduce_sum(std::span<float>(values, static_cast<std::size_t>(n)),
                                TrafficCategory::AllReduce);
  });
}

void DistributedGraph::all_reduce_sum(double* values, std::int64_t n) {
  impl_->guarded([&] {
    impl_->comm->all_reduce_sum(std::span<double>(values, static_cast<std::size_t>(n)),
                                TrafficCategory::AllReduce);
  });
}

std::uint64_t DistributedGraph::bytes_sent() const { return impl_->comm->traffic().total_sent(); }

void* allocate_rows(std::size_t bytes) { return backend(Device::cpu()).allocate(bytes); }

void free_rows(void* block, std::size_t bytes) {
  if (block != nullptr) backend(Device::cpu()).deallocate(block, bytes);
}

std::size_t release_cached_rows() { return host_block_cache().trim(); }

}  // namespace tessera
