// SPDX-License-Identifier: Apache-2.0
// bench_foundation: what one process of Tessera's CPU engine achieves on a synthetic preset,
// against limits measured in the same run. Copy bandwidth (STREAM-style) is the limit for SpMM
// on the GCN operator; GEMM GFLOP/s for a GCN's shapes; the median training epoch; loading the
// OGB raw layout vs Tessera HDF5; and with --refault-pause, fresh memory after a pause. Prints
// one JSON line per measurement, then Markdown tables.
// Relies on the core kernels, the synthetic generator, the loaders/writers and the Trainer.
#include <CLI/CLI.hpp>
#include <omp.h>
#include <zlib.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_common.h"
#include "core/cpu/dispatch.h"
#include "core/csr.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/kernels.h"
#include "core/tensor.h"
#include "datasets/loaders.h"
#include "datasets/synthetic.h"
#include "engine/system.h"
#include "engine/trainer.h"
#include "partition/metis_partition.h"
#include "partition/node_order.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr double kGB = 1e9;
constexpr std::int64_t kSpmmWidths[] = {16, 32, 64, 128, 256, 512};

struct Flags {
  std::string preset = "arxiv-like";
  int threads = 0;  // 0: all cores
  int epochs = 10;
  int warmup = 2;
  int repeats = 5;
  int layers = 3;
  std::int64_t hidden = 256;
  std::int64_t stream_mb = 0;  // 0: copy_array_mb's choice for the L3 cache found
  std::string json_file;
  std::string tmpdir;
  std::string blas_cores = "all";  // GEMM again with each of these OpenBLAS cores
  int core_rounds = 2;             // each core's child runs once per round; best round kept
  bool gemm_only = false;          // a child of the comparison: the GEMM lines only
  double refault_pause = 0;        // > 0: fresh memory right after freeing and after this pause
};

// ---- output ----

// One JSON object per line on stdout as each measurement finishes; also kept for --json.
class JsonLines {
 public:
  JsonLines(std::string preset, int threads) : preset_(std::move(preset)), threads_(threads) {}
  void emit(const char* bench, const Json& fields) {
    Json line = {{"bench", bench}, {"preset", preset_}, {"threads", threads_}};
    line.update(fields);
    const std::string text = line.dump();
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
    all_ += text + '\n';
  }
  const std::string& all() const { return all_; }

 private:
  std::string preset_;
  int threads_;
  std::string all_;
};

// Runs `body` once untimed (warm-up), then `repeats` times; the seconds of each timed run.
template <class Body>
std::vector<double> time_repeats(int repeats, Body&& body) {
  body();
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    Stopwatch watch;
    body();
    seconds.push_back(watch.seconds());
  }
  return seconds;
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// Deterministic values in [-0.5, 0.5) so that no kernel sees denormals or all-zero inputs.
void fill_pattern(Tensor& t, std::uint32_t salt) {
  float* x = t.f32();
  const std::int64_t n = t.numel();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t h = (static_cast<std::uint32_t>(i) ^ salt) * 2654435761u;
    x[i] = static_cast<float>(h >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
}

// ---- 1. copy bandwidth: the limit SpMM is compared with ----

// Size of the L3 cache that cpu0 shares (sysfs), else sysconf's figure; 0 when unknown. Arrays
// well past it (4x) make the copy a DRAM measurement.
std::int64_t l3_cache_bytes() {
  if (std::FILE* file = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r")) {
    long long size = 0;
    char unit = 0;
    const int got = std::fscanf(file, "%lld%c", &size, &unit);
    std::fclose(file);
    if (got >= 1 && size > 0) {
      if (unit == 'K') return size << 10;
      if (unit == 'M') return size << 20;
      return size;
    }
  }
  return std::max<long>(0, ::sysconf(_SC_LEVEL3_CACHE_SIZE));
}

// MB per array of the copy test: `requested` when given, else four times the L3 cache (`l3_bytes`,
// 0 when unknown), so that the copy measures DRAM, and at least 256.
std::int64_t copy_array_mb(std::int64_t requested, std::int64_t l3_bytes) {
  if (requested > 0) return requested;
  const auto mb = static_cast<std::int64_t>(std::ceil(4.0 * static_cast<double>(l3_bytes) / kMB));
  return std::max<std::int64_t>(256, mb);
}

struct CopyResult {
  double bytes = 0;  // read + write per copy
  std::vector<double> seconds;
  bool verified = false;
  double best_gbps() const { return bytes / min_of(seconds) / kGB; }
};

CopyResult measure_copy(std::int64_t megabytes, int repeats, int threads) {
  const std::int64_t n = megabytes * static_cast<std::int64_t>(kMB) / 4;
  auto src = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(n));
  auto dst = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(n));
  float* s = src.get();
  float* d = dst.get();
  // First touch by the threads that will copy, so pages sit near them.
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) {
    s[i] = static_cast<float>(i & 1023);
    d[i] = 0.0f;
  }
  CopyResult result;
  result.bytes = 2.0 * 4.0 * static_cast<double>(n);
  result.seconds = time_repeats(repeats, [&] {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t i = 0; i < n; ++i) d[i] = s[i];
  });
  result.verified = std::memcmp(s, d, static_cast<std::size_t>(n) * 4) == 0;
  return result;
}

// ---- 2. SpMM on the normalised GCN operator ----

struct SpmmResult {
  std::int64_t f = 0;
  DType x_dtype = DType::F32;     // f32, or bf16 (--aggregate-dtype bf16's rows)
  std::string order = "dataset";  // the node order the operator is in (partition/node_order.h)
  std::string prefetch;           // where the kernel prefetched rows: "l1" or "l2" (dispatch.h)
  bool other_prefetch = false;    // the target not in use, for comparison
  double speedup = 1.0;  // the f32 SpMM's median time at this width, dataset order / this one's
  double median_s = 0, min_s = 0;
  double bytes_upper = 0;       // every gathered row counted once per nonzero
  double bytes_compulsory = 0;  // input read once
  double flops = 0;             // 2 nnz F
  double max_abs_err = 0;       // sampled rows vs a double-precision loop
};

// Largest |out - reference| over 64 spread-out rows, the reference summed in double.
double spmm_sample_error(const Tensor& out, const Csr& a, const Tensor& x) {
  const std::int64_t n = a.num_rows(), f = x.cols();
  double worst = 0.0;
  for (std::int64_t s = 0; s < 64 && s < n; ++s) {
    const std::int64_t r = s * n / std::min<std::int64_t>(64, n);
    for (std::int64_t j = 0; j < f; ++j) {
      double sum = 0.0;
      for (EdgeOffset e = a.indptr()[r]; e < a.indptr()[r + 1]; ++e) {
        const double w = a.has_values() ? a.values()[e] : 1.0;
        sum += w * x.row<float>(a.indices()[e])[j];
      }
      worst = std::max(worst, std::fabs(sum - out.row<float>(r)[j]));
    }
  }
  return worst;
}

// One SpMM measured at every width: the GCN operator in a node order, with f32 rows or the same
// rows rounded to bf16.
struct SpmmVariant {
  std::string order;  // "dataset", or the node order `op` was renumbered by
  const Csr* op = nullptr;
  DType x_dtype = DType::F32;
  bool other_prefetch = false;  // prefetch into the cache level not in use (spmm_prefetch_target)
};

// Each width, every variant one after the other (so that they meet the same machine state);
// the first variant is the f32 SpMM in the dataset's order the others are timed against. The
// error is always against the f32 rows (so a bf16 variant's includes the rounding).
std::vector<SpmmResult> measure_spmm(const std::vector<SpmmVariant>& variants, int repeats) {
  std::vector<SpmmResult> results;
  for (std::int64_t f : kSpmmWidths) {
    const std::int64_t cols = variants.front().op->num_cols();
    Tensor x(cols, f);
    Tensor out(variants.front().op->num_rows(), f);
    fill_pattern(x, static_cast<std::uint32_t>(f));
    Tensor x_bf16(cols, f, DType::BF16);
    to_bf16(x_bf16, x);
    double first_median = 0.0;
    for (const SpmmVariant& variant : variants) {
      const Csr& op = *variant.op;
      const double n = static_cast<double>(op.num_rows());
      const double nnz = static_cast<double>(op.nnz());
      const double structure = 8.0 * (n + 1) + 4.0 * nnz + 4.0 * nnz;  // indptr, indices, values
      const double df = static_cast<double>(f);
      const Tensor& input = variant.x_dtype == DType::F32 ? x : x_bf16;
      const CsrView view = op.view();
      const cpu::PrefetchTarget in_use = cpu::spmm_prefetch_target();
      const cpu::PrefetchTarget target = !variant.other_prefetch ? in_use
                                         : in_use == cpu::PrefetchTarget::L1
                                             ? cpu::PrefetchTarget::L2
                                             : cpu::PrefetchTarget::L1;
      cpu::set_spmm_prefetch_target(target);
      std::vector<double> seconds = time_repeats(repeats, [&] { spmm(out, view, input); });
      cpu::set_spmm_prefetch_target(in_use);
      const double in_bytes = static_cast<double>(dtype_size(input.dtype()));
      SpmmResult r;
      r.f = f;
      r.x_dtype = input.dtype();
      r.order = variant.order;
      r.prefetch = cpu::to_string(target);
      r.other_prefetch = variant.other_prefetch;
      r.median_s = median(seconds);
      r.min_s = min_of(seconds);
      if (&variant == &variants.front()) first_median = r.median_s;
      r.speedup = first_median / r.median_s;
      r.bytes_upper = structure + in_bytes * nnz * df + 4.0 * n * df;
      r.bytes_compulsory = structure + in_bytes * n * df + 4.0 * n * df;
      r.flops = 2.0 * nnz * df;
      r.max_abs_err = spmm_sample_error(out, op, x);
      results.push_back(r);
    }
  }
  return results;
}

// A node order of the whole graph, what computing it took, and the operator's bandwidth in it.
struct OrderResult {
  std::string name;
  double seconds = 0;
  std::int64_t bandwidth = 0;
};

// Parts of the fine METIS partition the "metis" order groups nodes by: about this many nodes
// each (a part's rows of a 256-wide layer, 512 KiB, fit in a core's L2).
constexpr std::int64_t kOrderPartNodes = 512;

// ---- 3. GEMM at the shapes of an L-layer GCN ----

struct GemmShape {
  std::string what;  // e.g. "X*W forward, layer 1"
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, k = 0, n = 0;  // C (m, n) = op(A) (m, k) · op(B) (k, n)
};

struct GemmResult {
  GemmShape shape;
  double median_s = 0, min_s = 0;
  double flops() const { return 2.0 * double(shape.m) * double(shape.k) * double(shape.n); }
  double gflops() const { return flops() / median_s / kGB; }
};

// Per layer l (width in -> out): forward X·W, weight gradient X^T·dY, and for l > 1 the input
// gradient dY·W^T. Duplicate shapes (deep models) are measured once, labelled with every layer.
std::vector<GemmShape> gcn_gemm_shapes(std::int64_t rows, std::int64_t f_in, std::int64_t hidden,
                                       std::int64_t f_out, int layers) {
  std::vector<GemmShape> shapes;
  auto add = [&](const std::string& form, int layer, bool ta, bool tb, std::int64_t m,
                 std::int64_t k, std::int64_t n) {
    for (GemmShape& s : shapes) {
      if (s.trans_a == ta && s.trans_b == tb && s.m == m && s.k == k && s.n == n) {
        s.what += ", " + std::to_string(layer);
        return;
      }
    }
    shapes.push_back({form + " layer " + std::to_string(layer), ta, tb, m, k, n});
  };
  for (int l = 0; l < layers; ++l) {
    const std::int64_t in = l == 0 ? f_in : hidden;
    const std::int64_t out = l + 1 == layers ? f_out : hidden;
    add("X*W forward,", l + 1, false, false, rows, in, out);
    add("X^T*dY weight grad,", l + 1, true, false, in, rows, out);
    if (l > 0) add("dY*W^T input grad,", l + 1, false, true, rows, out, in);
  }
  return shapes;
}

std::vector<GemmResult> measure_gemm(const std::vector<GemmShape>& shapes, int repeats) {
  std::vector<GemmResult> results;
  for (const GemmShape& s : shapes) {
    // Stored shapes: A is (m, k) or, transposed, (k, m); B is (k, n) or (n, k).
    Tensor a = s.trans_a ? Tensor(s.k, s.m) : Tensor(s.m, s.k);
    Tensor b = s.trans_b ? Tensor(s.n, s.k) : Tensor(s.k, s.n);
    Tensor c(s.m, s.n);
    fill_pattern(a, 1);
    fill_pattern(b, 2);
    std::vector<double> seconds =
        time_repeats(repeats, [&] { gemm(c, a, s.trans_a, b, s.trans_b); });
    results.push_back({s, median(seconds), min_of(seconds)});
  }
  return results;
}

// ---- 3b. the same shapes with each OpenBLAS core the CPU runs ----

// GFLOP/s per shape (in the order of gcn_gemm_shapes) of one core, measured by a child
// bench_foundation started with OPENBLAS_CORETYPE=<asked>: the core a DYNAMIC_ARCH OpenBLAS
// takes only when it loads. `got` is the core the child's OpenBLAS reports.
struct CoreGemm {
  std::string asked, got;
  std::vector<double> gflops;
  std::vector<std::string> shapes;  // "m x k x n", to check they are the parent's
};

std::string shape_text(const GemmShape& s) {
  return std::to_string(s.m) + " x " + std::to_string(s.k) + " x " + std::to_string(s.n);
}

std::vector<std::string> cores_to_compare(const std::string& list) {
  if (list == "none") return {};
  if (list == "all") return cpu::openblas_cores_this_cpu_runs();
  std::vector<std::string> cores;
  std::stringstream in(list);
  for (std::string core; std::getline(in, core, ',');) {
    TESSERA_CHECK(cpu::openblas_core_level(core) >= 0, InvalidArgument, "--blas-cores: '", core,
                  "' is not an OpenBLAS x86-64 core (e.g. Haswell,SkylakeX; or all, none)");
    cores.push_back(core);
  }
  return cores;
}

CoreGemm measure_gemm_with_core(const std::string& core, const Flags& flags,
                                const fs::path& scratch) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::vector<std::string> argv = {self,        "--gemm-only",
                                         "--preset",  flags.preset,
                                         "--threads", std::to_string(flags.threads),
                                         "--repeats", std::to_string(flags.repeats),
                                         "--layers",  std::to_string(flags.layers),
                                         "--hidden",  std::to_string(flags.hidden)};
  const fs::path log = scratch / ("gemm-" + core);
  run_child("bench_foundation", argv, {"OPENBLAS_CORETYPE=" + core}, log);
  CoreGemm result;
  result.asked = core;
  std::ifstream in(log.string() + ".out");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() != '{') continue;
    const Json j = Json::parse(line);
    if (j.at("bench") == "blas") result.got = j.at("core").get<std::string>();
    if (j.at("bench") != "gemm") continue;
    result.gflops.push_back(j.at("gflops").get<double>());
    result.shapes.push_back(shape_text({"", false, false, j.at("m"), j.at("k"), j.at("n")}));
  }
  return result;
}

// ---- 4. training epochs ----

struct TrainResult {
  int timed_epochs = 0;
  double median_s = 0, min_s = 0, max_s = 0;
  double setup_s = 0;
  double final_loss = 0;
  std::uint64_t peak_rss = 0;
};

TrainResult measure_training(const Dataset& data, const Flags& flags) {
  TrainConfig config;
  config.model = "gcn";
  config.num_layers = flags.layers;
  config.hidden_channels = flags.hidden;
  config.dropout = 0.5f;
  config.epochs = flags.warmup + flags.epochs;
  config.eval_every = config.epochs + 1;  // evaluates once, after the last epoch only
  config.threads = flags.threads;
  config.verbosity = 0;
  Trainer trainer(config, data);
  std::vector<double> timed;
  RunResult run = trainer.train_run(0, [&](const EpochRecord& record) {
    if (record.epoch > flags.warmup) timed.push_back(record.epoch_s);
  });
  TrainResult result;
  result.timed_epochs = static_cast<int>(timed.size());
  result.median_s = median(timed);
  result.min_s = min_of(timed);
  result.max_s = max_of(timed);
  result.setup_s = trainer.setup_seconds();
  result.final_loss = run.final_loss;
  result.peak_rss = peak_rss_bytes();
  return result;
}

// ---- 5. loading: OGB raw layout vs HDF5 ----

// Inflated size of a gzip file (all members), by decompressing it.
std::uint64_t gunzip_size(const fs::path& file) {
  gzFile gz = gzopen(file.c_str(), "rb");
  TESSERA_CHECK(gz != nullptr, Io, "cannot open ", file.string());
  std::vector<char> buffer(std::size_t{1} << 20);
  std::uint64_t total = 0;
  int got;
  while ((got = gzread(gz, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0)
    total += static_cast<std::uint64_t>(got);
  int code = 0;
  const std::string message = got < 0 ? gzerror(gz, &code) : "";
  gzclose(gz);
  TESSERA_CHECK(got == 0, Io, file.string(), ": gzip read failed: ", message);
  return total;
}

struct LayoutBytes {
  double files = 0;  // bytes on disk
  double text = 0;   // .gz files counted inflated, other files as they are
};

LayoutBytes layout_bytes(const fs::path& path) {
  LayoutBytes bytes;
  auto add = [&](const fs::path& file) {
    const double size = static_cast<double>(fs::file_size(file));
    bytes.files += size;
    bytes.text += file.extension() == ".gz" ? static_cast<double>(gunzip_size(file)) : size;
  };
  if (fs::is_regular_file(path)) {
    add(path);
    return bytes;
  }
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(path))
    if (entry.is_regular_file()) add(entry.path());
  return bytes;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.same_shape(b) && a.dtype() == b.dtype() &&
         (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

// Whether a loaded dataset holds exactly the arrays that were written.
bool same_content(const Dataset& a, const Dataset& b) {
  return a.task == b.task && a.num_classes == b.num_classes && a.num_tasks == b.num_tasks &&
         a.graph.num_rows() == b.graph.num_rows() && a.graph.indptr() == b.graph.indptr() &&
         a.graph.indices() == b.graph.indices() && same_tensor(a.features, b.features) &&
         a.labels == b.labels && same_tensor(a.targets, b.targets) &&
         a.train_idx == b.train_idx && a.valid_idx == b.valid_idx && a.test_idx == b.test_idx;
}

struct LoadResult {
  std::string format;
  LayoutBytes bytes;
  double write_s = 0;
  std::vector<double> read_seconds;
  bool identical = false;
  double best_read_s() const { return min_of(read_seconds); }
};

template <class Write, class Read>
LoadResult measure_format(const std::string& format, const Dataset& data, const fs::path& path,
                          int reads, Write write, Read read) {
  LoadResult result;
  result.format = format;
  Stopwatch watch;
  write(data, path);
  result.write_s = watch.seconds();
  result.bytes = layout_bytes(path);
  for (int i = 0; i < reads; ++i) {
    watch.restart();
    Dataset loaded = read(path);
    result.read_seconds.push_back(watch.seconds());
    if (i == 0) result.identical = same_content(data, loaded);
  }
  return result;
}

std::vector<LoadResult> measure_loading(const Dataset& data, const fs::path& dir, int reads) {
  std::vector<LoadResult> results;
  results.push_back(measure_format(
      "ogb_raw", data, dir / "ogb_raw", reads,
      [](const Dataset& d, const fs::path& p) { write_ogb_raw(d, p); },
      [](const fs::path& p) { return read_ogb_raw(p); }));
  results.push_back(measure_format(
      "hdf5", data, dir / "dataset.h5", reads,
      [](const Dataset& d, const fs::path& p) { write_hdf5(d, p); },
      [](const fs::path& p) { return read_hdf5(p); }));
  return results;
}

// ---- 6. fresh memory right after freeing and after a pause ----

// Mapping and first touch of a large block the way a tensor's is made (HostBlockCache: mapped
// with huge pages advised; this cache keeps no freed block), once right after a block of its
// size was freed and once after `pause` idle seconds, a round each. Where a virtual machine
// hands free memory back to its host (Linux free page reporting), the second is many times
// slower: a phase that pauses (a memory check's probe, a wait for other ranks) then slows the
// next phase that touches fresh memory, such as a run's first epoch.
struct RefaultResult {
  double bytes = 0;
  std::vector<double> right_after_s, after_pause_s;  // one of each a round
};

double touch_fresh_block(HostBlockCache& cache, std::size_t bytes) {
  Stopwatch watch;
  void* block = cache.allocate(bytes);
  std::memset(block, 1, bytes);
  const double seconds = watch.seconds();
  cache.deallocate(block, bytes);
  return seconds;
}

RefaultResult measure_refault(std::int64_t megabytes, double pause, int rounds) {
  HostBlockCache cache(0);
  const auto bytes = static_cast<std::size_t>(static_cast<double>(megabytes) * kMB);
  RefaultResult r;
  r.bytes = static_cast<double>(bytes);
  for (int i = 0; i < rounds; ++i) {
    touch_fresh_block(cache, bytes);  // the block whose memory the next one gets back
    r.right_after_s.push_back(touch_fresh_block(cache, bytes));
    std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    r.after_pause_s.push_back(touch_fresh_block(cache, bytes));
  }
  return r;
}

// ---- the report ----

struct Measurements {
  std::int64_t num_nodes = 0, graph_nnz = 0, operator_nnz = 0, f_in = 0, outputs = 0;
  CopyResult copy;
  int copy_repeats = 0;
  std::int64_t l3_bytes = 0;
  std::vector<SpmmResult> spmm;  // per width: f32 and bf16 in the dataset's order, then f32 in
                                 // each other node order
  std::vector<OrderResult> orders;
  std::vector<GemmResult> gemm;
  std::vector<CoreGemm> gemm_by_core;
  TrainResult train;
  std::vector<LoadResult> load;
  RefaultResult refault;
  double load_avg_start = -1, load_avg_end = -1;  // other processes compete for the cores
};

// 1-minute load average of the machine (-1 when unknown).
double load_average() {
  double avg[1];
  return ::getloadavg(avg, 1) == 1 ? avg[0] : -1.0;
}

void print_header(const Flags& flags, const Measurements& m) {
  std::printf("\n# bench_foundation: preset %s | threads %d | N %lld | nnz %lld (GCN operator "
              "with self loops; graph %lld) | F_in %lld | C %lld\n",
              flags.preset.c_str(), flags.threads, static_cast<long long>(m.num_nodes),
              static_cast<long long>(m.operator_nnz), static_cast<long long>(m.graph_nnz),
              static_cast<long long>(m.f_in), static_cast<long long>(m.outputs));
  std::printf("(%d cores; 1-min load average %.2f before the run, %.2f after it, this run's "
              "threads included; a load above the core count means other processes competed "
              "for the cores and the times are inflated)\n",
              omp_get_num_procs(), m.load_avg_start, m.load_avg_end);
  // The CPU kernels and OpenBLAS's, with a note when OpenBLAS's core is weaker than the CPU's.
  std::printf("CPU kernels: %s\n", cpu::cpu_kernels_description().c_str());
}

void print_copy_spmm_table(const Flags& flags, const Measurements& m) {
  const double limit = m.copy.best_gbps();
  std::printf("\n## Copy bandwidth and SpMM\n\n");
  std::printf(
      "| kernel | F | median ms | min ms | GB/s upper | of copy | GB/s compulsory | "
      "of copy | GFLOP/s | max abs err | speed vs SpMM |\n");
  std::printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  std::printf("| copy 2 x %lld MB | - | %.3f | %.3f | %.2f | 1.00 | - | - | - | %s | - |\n",
              static_cast<long long>(flags.stream_mb), 1e3 * median(m.copy.seconds),
              1e3 * min_of(m.copy.seconds), limit, m.copy.verified ? "0" : "MISMATCH");
  for (const SpmmResult& r : m.spmm) {
    const double upper = r.bytes_upper / r.median_s / kGB;
    const double compulsory = r.bytes_compulsory / r.median_s / kGB;
    const std::string kernel = r.x_dtype != DType::F32 ? "SpMM bf16 x"
                               : r.other_prefetch      ? "SpMM, prefetch into " + r.prefetch
                               : r.order == "dataset"  ? "SpMM"
                                                       : "SpMM, " + r.order + " order";
    std::printf("| %s | %lld | %.3f | %.3f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1e | %.2f |\n",
                kernel.c_str(), static_cast<long long>(r.f), 1e3 * r.median_s, 1e3 * r.min_s, upper,
                upper / limit, compulsory, compulsory / limit, r.flops / r.median_s / kGB,
                r.max_abs_err, r.speedup);
  }
}

void print_order_table(const Measurements& m) {
  std::printf("\n## Node orders\n\n");
  std::printf("| order | compute s | bandwidth | SpMM speed vs dataset order, F = 16 ... 512 |\n");
  std::printf("|---|--:|--:|---|\n");
  for (const OrderResult& o : m.orders) {
    std::string speeds;
    for (const SpmmResult& r : m.spmm) {
      if (r.order != o.name || r.x_dtype != DType::F32 || r.other_prefetch || o.name == "dataset")
        continue;
      char cell[32];
      std::snprintf(cell, sizeof cell, "%s%.2f", speeds.empty() ? "" : ", ", r.speedup);
      speeds += cell;
    }
    std::printf("| %s | %.2f | %lld | %s |\n", o.name.c_str(), o.seconds,
                static_cast<long long>(o.bandwidth),
                speeds.empty() ? "1 (the rows above)" : speeds.c_str());
  }
}

void print_gemm_train_tables(const Flags& flags, const Measurements& m) {
  std::printf("\n## GEMM (%d-layer GCN, hidden %lld)\n\n", flags.layers,
              static_cast<long long>(flags.hidden));
  std::printf("| product, layers | m x k x n | median ms | min ms | GFLOP/s |\n");
  std::printf("|---|---|--:|--:|--:|\n");
  for (const GemmResult& r : m.gemm) {
    std::printf("| %s | %lld x %lld x %lld | %.3f | %.3f | %.2f |\n", r.shape.what.c_str(),
                static_cast<long long>(r.shape.m), static_cast<long long>(r.shape.k),
                static_cast<long long>(r.shape.n), 1e3 * r.median_s, 1e3 * r.min_s, r.gflops());
  }
  const TrainResult& t = m.train;
  std::printf("\n## Training step (GCN, %d layers, hidden %lld, dropout 0.5)\n\n", flags.layers,
              static_cast<long long>(flags.hidden));
  std::printf("| warm-up | timed epochs | median s | min s | max s | setup s | final loss | "
              "peak RSS MB |\n");
  std::printf("|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  std::printf("| %d | %d | %.4f | %.4f | %.4f | %.3f | %.4f | %.1f |\n", flags.warmup,
              t.timed_epochs, t.median_s, t.min_s, t.max_s, t.setup_s, t.final_loss,
              static_cast<double>(t.peak_rss) / kMB);
}

void print_load_table(const Measurements& m) {
  std::printf("\n## Loading\n\n");
  std::printf("| format | file MB | text MB | write s | read s (best of %d) | MB/s file | "
              "MB/s text | speedup vs raw | same data |\n",
              m.load.empty() ? 0 : static_cast<int>(m.load.front().read_seconds.size()));
  std::printf("|---|--:|--:|--:|--:|--:|--:|--:|---|\n");
  for (const LoadResult& r : m.load) {
    const double best = r.best_read_s();
    std::printf("| %s | %.1f | %.1f | %.3f | %.3f | %.1f | %.1f | %.2f | %s |\n",
                r.format.c_str(), r.bytes.files / kMB, r.bytes.text / kMB, r.write_s, best,
                r.bytes.files / best / kMB, r.bytes.text / best / kMB,
                m.load.front().best_read_s() / best, r.identical ? "yes" : "NO");
  }
}

void print_refault_table(const Flags& flags, const Measurements& m) {
  if (m.refault.right_after_s.empty()) return;
  std::printf("\n## Fresh memory right after freeing and after a %.1f s pause\n\n",
              flags.refault_pause);
  std::printf("| MB | round | right after, GB/s | after the pause, GB/s | slower |\n");
  std::printf("|--:|--:|--:|--:|--:|\n");
  for (std::size_t i = 0; i < m.refault.right_after_s.size(); ++i) {
    const double after = m.refault.after_pause_s[i], right = m.refault.right_after_s[i];
    std::printf("| %.0f | %zu | %.2f | %.2f | %.1fx |\n", m.refault.bytes / kMB, i + 1,
                m.refault.bytes / right / kGB, m.refault.bytes / after / kGB, after / right);
  }
}

void print_notes(const Flags& flags, const Measurements& m) {
  std::printf(
      "\nNotes:\n"
      "- MB and GB are 10^6 and 10^9 bytes. Copy: bytes = read + write (STREAM convention; "
      "write-allocate traffic not counted), best of %d after a warm-up; it is the limit "
      "\"of copy\" refers to.\n"
      "- SpMM bytes: indptr 8(N+1) + indices 4nnz + values 4nnz + output 4NF, plus the input: "
      "\"upper\" counts one gathered row per nonzero (4nnz F; rows served from cache are counted "
      "again, so this overstates DRAM traffic), \"compulsory\" reads it once (4NF). The true "
      "traffic lies between. Median of %d runs after a warm-up; max abs err: 64 sampled rows "
      "against a double-precision loop. \"SpMM bf16 x\": the same rows rounded to bf16 "
      "(--aggregate-dtype bf16), 2 bytes per input value, summed in f32; its error is against "
      "the f32 rows, so it includes the rounding. \"SpMM, prefetch into l1/l2\": the same SpMM "
      "with the gathered rows prefetched into the cache level not in use (the other rows use "
      "the one in use: TESSERA_SPMM_PREFETCH, else the CPU's default; core/cpu/dispatch.h). "
      "\"SpMM, rcm/metis order\": the same operator "
      "renumbered by reverse Cuthill-McKee or grouped by the parts of a METIS partition into "
      "parts of about %lld nodes (partition/node_order.h), so that a row's neighbours lie near "
      "it. Speed vs SpMM = the f32 SpMM's time in the dataset's order / its time.\n"
      "- Node orders: compute s = the time to find the order (with this run's threads); "
      "bandwidth = the largest |i - j| over the operator's entries (i, j) in that order.\n"
      "- GEMM: 2mkn flops, median of %d after a warm-up; op(A) (m x k) times op(B) (k x n).\n"
      "- Training step: forward, backward and Adam (evaluation excluded; it runs once, after "
      "the last epoch). Peak RSS is the process's, after training (includes the dataset).\n"
      "- Loading: files just written, so the page cache is warm: this measures decoding and "
      "parsing, not the disk. Raw layout text = .csv.gz files inflated; speedup = raw read "
      "time / this format's read time; same data = arrays identical to those written.\n",
      m.copy_repeats, flags.repeats, static_cast<long long>(kOrderPartNodes), flags.repeats);
  if (!m.refault.right_after_s.empty())
    std::printf(
        "- Fresh memory: a block of 4 x --stream-mb mapped as a tensor's (huge pages "
        "advised) and written once, single-threaded, right after a block of its size was "
        "freed and after the pause; \"slower\" = the second time / the first. Far above "
        "1 where the system hands freed memory back to a hypervisor (free page "
        "reporting): a run's first epoch after a pause then pays it.\n");
  const double array_bytes = static_cast<double>(flags.stream_mb) * kMB;
  if (m.l3_bytes > 0 && array_bytes < 4.0 * static_cast<double>(m.l3_bytes)) {
    std::printf("- WARNING: the copy arrays (%.0f MB each) are smaller than 4x the L3 cache "
                "(%.1f MB): the copy limit is partly a cache bandwidth, not DRAM's; use "
                "--stream-mb %.0f or more.\n",
                array_bytes / kMB, static_cast<double>(m.l3_bytes) / kMB,
                std::ceil(4.0 * static_cast<double>(m.l3_bytes) / kMB));
  }
}

// ---- the run: measure, emitting each JSON line as soon as it is known ----

// The GCN operator `op` of `graph` renumbered by reverse Cuthill-McKee and grouped by the
// parts of a fine METIS partition (partition/node_order.h), each with what finding its order
// took and its bandwidth, after the dataset order's own entry.
std::vector<Csr> order_operators(const Csr& graph, const Csr& op, Measurements& m) {
  m.orders.push_back({"dataset", 0.0, ordered_bandwidth(op)});
  std::vector<Csr> ordered;
  for (const std::string name : {"rcm", "metis"}) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<GlobalId> order;
    if (name == "rcm") {
      order = reverse_cuthill_mckee(graph);
    } else {
      const int parts = static_cast<int>(
          std::clamp<std::int64_t>(graph.num_rows() / kOrderPartNodes, 1, graph.num_rows()));
      order = order_by_parts(partition_metis(graph, {}, parts, /*seed=*/1));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ordered.push_back(permute_symmetric(op, order));
    m.orders.push_back({name, seconds, ordered_bandwidth(ordered.back())});
  }
  return ordered;
}

void run_copy_and_spmm(const Dataset& data, const Flags& flags, Measurements& m, JsonLines& out) {
  m.copy_repeats = std::max(flags.repeats, 5);  // cheap; the limit deserves a few tries
  m.copy = measure_copy(flags.stream_mb, m.copy_repeats, flags.threads);
  m.l3_bytes = l3_cache_bytes();
  out.emit("copy", {{"bytes", m.copy.bytes}, {"l3_bytes", m.l3_bytes}, {"repeats", m.copy_repeats},
                    {"median_s", median(m.copy.seconds)}, {"best_s", min_of(m.copy.seconds)},
                    {"gbps", m.copy.best_gbps()}, {"verified", m.copy.verified}});
  {
    const Csr op = gcn_normalized(data.graph.without_self_loops().symmetrize().with_self_loops());
    m.operator_nnz = op.nnz();
    const std::vector<Csr> ordered = order_operators(data.graph, op, m);
    std::vector<SpmmVariant> variants = {{"dataset", &op, DType::F32},
                                         {"dataset", &op, DType::BF16},
                                         {"dataset", &op, DType::F32, true}};
    for (std::size_t i = 0; i < ordered.size(); ++i) {
      variants.push_back({m.orders[i + 1].name, &ordered[i], DType::F32});
    }
    m.spmm = measure_spmm(variants, flags.repeats);
  }
  for (const OrderResult& o : m.orders) {
    out.emit("node_order", {{"order", o.name}, {"seconds", o.seconds}, {"bandwidth", o.bandwidth}});
  }
  for (const SpmmResult& r : m.spmm) {
    const double upper = r.bytes_upper / r.median_s / kGB;
    const double compulsory = r.bytes_compulsory / r.median_s / kGB;
    out.emit("spmm", {{"F", r.f},
                      {"x_dtype", to_string(r.x_dtype)},
                      {"order", r.order},
                      {"prefetch", r.prefetch},
                      {"speedup", r.speedup},
                      {"N", m.num_nodes},
                      {"nnz", m.operator_nnz},
                      {"repeats", flags.repeats},
                      {"median_s", r.median_s},
                      {"min_s", r.min_s},
                      {"bytes_upper", r.bytes_upper},
                      {"bytes_compulsory", r.bytes_compulsory},
                      {"gbps_upper", upper},
                      {"gbps_compulsory", compulsory},
                      {"of_copy_upper", upper / m.copy.best_gbps()},
                      {"of_copy_compulsory", compulsory / m.copy.best_gbps()},
                      {"gflops", r.flops / r.median_s / kGB},
                      {"max_abs_err", r.max_abs_err}});
  }
}

void run_gemm(const Flags& flags, Measurements& m, JsonLines& out) {
  m.gemm = measure_gemm(
      gcn_gemm_shapes(m.num_nodes, m.f_in, flags.hidden, m.outputs, flags.layers), flags.repeats);
  for (const GemmResult& r : m.gemm) {
    out.emit("gemm", {{"what", r.shape.what},
                      {"trans_a", r.shape.trans_a},
                      {"trans_b", r.shape.trans_b},
                      {"m", r.shape.m},
                      {"k", r.shape.k},
                      {"n", r.shape.n},
                      {"repeats", flags.repeats},
                      {"median_s", r.median_s},
                      {"min_s", r.min_s},
                      {"gflops", r.gflops()}});
  }
}

// The core in use, per shape: its own child's figure where it is among the cores compared, so
// that it is measured as often, at the same times and in the same kind of process as the
// cores it is compared with; this process's GEMM where it is not.
std::vector<double> in_use_gflops(const Measurements& m, const std::string& in_use) {
  for (const CoreGemm& c : m.gemm_by_core)
    if (c.got == in_use) return c.gflops;
  std::vector<double> gflops;
  for (const GemmResult& r : m.gemm) gflops.push_back(r.gflops());
  return gflops;
}

// GEMM with each core of --blas-cores, each in a child process, in --core-rounds rounds (every
// core once per round, so that a slow spell of the machine meets all of them); a core's figure
// for a shape is its best round. Then, per shape, the core in use against the fastest.
void run_gemm_by_core(const Flags& flags, Measurements& m, JsonLines& out) {
  const std::vector<std::string> cores = cores_to_compare(flags.blas_cores);
  if (cores.empty()) return;
  const ScratchDir scratch(flags.tmpdir.empty() ? fs::temp_directory_path()
                                                : fs::path(flags.tmpdir));
  std::vector<std::string> shapes;
  for (const GemmResult& r : m.gemm) shapes.push_back(shape_text(r.shape));
  m.gemm_by_core.resize(cores.size());
  for (int round = 0; round < flags.core_rounds; ++round) {
    for (std::size_t k = 0; k < cores.size(); ++k) {
      const CoreGemm c = measure_gemm_with_core(cores[k], flags, scratch.path());
      TESSERA_CHECK(c.shapes == shapes, Internal,
                    "bench_foundation with OPENBLAS_CORETYPE=", cores[k],
                    " measured other GEMM shapes (", join(c.shapes), ") than this run's (",
                    join(shapes), ")");
      for (std::size_t i = 0; i < m.gemm.size(); ++i)
        out.emit("gemm_core", {{"core", c.asked},
                               {"openblas_core", c.got},
                               {"round", round},
                               {"what", m.gemm[i].shape.what},
                               {"gflops", c.gflops[i]}});
      CoreGemm& best = m.gemm_by_core[k];
      if (round == 0) best = c;
      for (std::size_t i = 0; i < m.gemm.size(); ++i)
        best.gflops[i] = std::max(best.gflops[i], c.gflops[i]);
    }
  }
  const std::string in_use = cpu::blas_kernels().chosen;
  const std::vector<double> mine = in_use_gflops(m, in_use);
  for (std::size_t i = 0; i < m.gemm.size(); ++i) {
    const CoreGemm* best = &m.gemm_by_core.front();
    for (const CoreGemm& c : m.gemm_by_core)
      if (c.gflops[i] > best->gflops[i]) best = &c;
    out.emit("gemm_vs_best", {{"what", m.gemm[i].shape.what},
                              {"core_in_use", in_use},
                              {"gflops_in_use", mine[i]},
                              {"gflops_this_process", m.gemm[i].gflops()},
                              {"best_core", best->got},
                              {"best_gflops", best->gflops[i]},
                              {"of_best", mine[i] / best->gflops[i]}});
  }
}

void print_gemm_by_core_table(const Flags& flags, const Measurements& m) {
  if (m.gemm_by_core.empty()) return;
  const std::vector<double> mine = in_use_gflops(m, cpu::blas_kernels().chosen);
  std::printf(
      "\n## GEMM GFLOP/s with each OpenBLAS core (one child process per core and round, best of "
      "%d rounds; in use here: %s)\n\n| product, layers |",
      flags.core_rounds, cpu::blas_kernels().chosen.c_str());
  for (const CoreGemm& c : m.gemm_by_core) std::printf(" %s |", c.got.c_str());
  std::printf(" in use | in use / best |\n|---|");
  for (std::size_t c = 0; c <= m.gemm_by_core.size(); ++c) std::printf("--:|");
  std::printf("--:|\n");
  for (std::size_t i = 0; i < m.gemm.size(); ++i) {
    std::printf("| %s |", m.gemm[i].shape.what.c_str());
    double best = 0;
    for (const CoreGemm& c : m.gemm_by_core) {
      std::printf(" %.2f |", c.gflops[i]);
      best = std::max(best, c.gflops[i]);
    }
    std::printf(" %.2f | %.2f |\n", mine[i], mine[i] / best);
  }
}

void run_loading(const Dataset& data, const Flags& flags, Measurements& m, JsonLines& out) {
  {
    const ScratchDir scratch(flags.tmpdir.empty() ? fs::temp_directory_path()
                                                  : fs::path(flags.tmpdir));
    m.load = measure_loading(data, scratch.path(), std::clamp(flags.repeats, 1, 3));
  }
  for (const LoadResult& r : m.load) {
    const double best = r.best_read_s();
    out.emit("load", {{"format", r.format}, {"file_bytes", r.bytes.files},
                      {"text_bytes", r.bytes.text}, {"write_s", r.write_s},
                      {"reads", r.read_seconds.size()}, {"best_read_s", best},
                      {"mbps_file", r.bytes.files / best / kMB},
                      {"mbps_text", r.bytes.text / best / kMB},
                      {"speedup_vs_ogb_raw", m.load.front().best_read_s() / best},
                      {"identical", r.identical}});
  }
}

void run_refault(const Flags& flags, Measurements& m, JsonLines& out) {
  m.refault = measure_refault(4 * flags.stream_mb, flags.refault_pause, flags.repeats);
  for (std::size_t i = 0; i < m.refault.right_after_s.size(); ++i) {
    out.emit("refault", {{"bytes", m.refault.bytes},
                         {"pause_s", flags.refault_pause},
                         {"round", i},
                         {"right_after_s", m.refault.right_after_s[i]},
                         {"after_pause_s", m.refault.after_pause_s[i]}});
  }
}

// --gemm-only: the core OpenBLAS uses and the GEMM lines, at the preset's sizes.
int run_gemm_only(const Flags& flags, JsonLines& out) {
  const SyntheticConfig preset = synthetic_preset(flags.preset);
  Measurements m;
  m.num_nodes = preset.num_nodes;
  m.f_in = preset.num_features;
  m.outputs = preset.num_classes;
  out.emit("blas", {{"core", cpu::blas_kernels().chosen}});
  run_gemm(flags, m, out);
  return 0;
}

int run(Flags flags) {
  if (flags.threads <= 0) flags.threads = omp_get_num_procs();
  flags.stream_mb = copy_array_mb(flags.stream_mb, l3_cache_bytes());
  set_num_threads(flags.threads);
  JsonLines out(flags.preset, flags.threads);
  if (flags.gemm_only) return run_gemm_only(flags, out);
  cores_to_compare(flags.blas_cores);  // a bad list is refused before anything runs
  Measurements m;
  m.load_avg_start = load_average();

  Stopwatch watch;
  const Dataset data = generate_synthetic(synthetic_preset(flags.preset));
  m.num_nodes = data.num_nodes();
  m.graph_nnz = data.graph.nnz();
  m.f_in = data.num_features();
  m.outputs = data.num_outputs();
  out.emit("dataset", {{"N", m.num_nodes}, {"graph_nnz", m.graph_nnz}, {"F_in", m.f_in},
                       {"outputs", m.outputs}, {"generate_s", watch.seconds()}});

  // Training first, so that its peak RSS is not the copy arrays' or the loaders'.
  m.train = measure_training(data, flags);
  out.emit("train", {{"model", "gcn"}, {"layers", flags.layers}, {"hidden", flags.hidden},
                     {"dropout", 0.5}, {"warmup", flags.warmup},
                     {"timed_epochs", m.train.timed_epochs}, {"median_s", m.train.median_s},
                     {"min_s", m.train.min_s}, {"max_s", m.train.max_s},
                     {"setup_s", m.train.setup_s}, {"final_loss", m.train.final_loss},
                     {"peak_rss_bytes", m.train.peak_rss}});
  run_copy_and_spmm(data, flags, m, out);
  run_gemm(flags, m, out);
  run_gemm_by_core(flags, m, out);
  run_loading(data, flags, m, out);
  if (flags.refault_pause > 0) run_refault(flags, m, out);

  m.load_avg_end = load_average();
  out.emit("machine", {{"cores", omp_get_num_procs()}, {"load_avg_1min_start", m.load_avg_start},
                       {"load_avg_1min_end", m.load_avg_end}});
  print_header(flags, m);
  print_copy_spmm_table(flags, m);
  print_order_table(m);
  print_gemm_train_tables(flags, m);
  print_gemm_by_core_table(flags, m);
  print_load_table(m);
  print_refault_table(flags, m);
  print_notes(flags, m);
  std::fflush(stdout);
  if (!flags.json_file.empty()) write_file_atomic(flags.json_file, out.all());
  return 0;
}

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--preset", f.preset, "synthetic preset (default, arxiv-like, products-like)")
      ->capture_default_str();
  app.add_option("--threads", f.threads, "OpenMP threads (0: all cores)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--epochs", f.epochs, "timed training epochs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", f.warmup, "untimed training epochs before them")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--repeats", f.repeats, "timed runs of each kernel (after one warm-up)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--layers", f.layers, "GCN layers (training and GEMM shapes)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--hidden", f.hidden, "GCN hidden width (training and GEMM shapes)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str();
  app.add_option("--stream-mb", f.stream_mb,
                 "MB per array of the copy test (0: four times the L3 cache found, so that it "
                 "measures DRAM, and at least 256; the refault block is four arrays)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 16))
      ->capture_default_str();
  app.add_option("--json", f.json_file, "also write the JSON lines to this file");
  app.add_option("--tmpdir", f.tmpdir,
                 "where the loading test writes its files (in a fresh subdirectory, removed at "
                 "the end; default: the system temp directory)");
  app.add_option("--blas-cores", f.blas_cores,
                 "GEMM again with each of these OpenBLAS cores, one child process each, against "
                 "the core in use: all (every core this CPU runs), none, or a list such as "
                 "Haswell,SkylakeX")
      ->capture_default_str();
  app.add_option("--core-rounds", f.core_rounds,
                 "rounds of --blas-cores: each runs every core's child once, in turn; a core's "
                 "figure is its best round (the core in use: its own child's, if compared)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--refault-pause", f.refault_pause,
                 "also time the first touch of a 4 x --stream-mb block right after freeing one "
                 "and after this many idle seconds, --repeats rounds (0: not measured)")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_flag("--gemm-only", f.gemm_only,
               "measure the GEMM shapes only (what each child of --blas-cores runs)");
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::bench_main<tessera::Flags>(
      argc, argv, "bench_foundation",
      "copy bandwidth, SpMM, GEMM, training epoch and loading "
      "on a synthetic preset (one JSON line per measurement, then tables)",
      tessera::add_flags, tessera::run);
}
