// SPDX-License-Identifier: Apache-2.0
// bench_cuda: GPU SpMM against the device's measured copy bandwidth (built with TESSERA_CUDA).
// The copy limit is a device-to-device cudaMemcpy of a large buffer (read + write bytes / time);
// SpMM moves indptr + indices + values + the gathered x rows (nnz * F) + out (R * F), counted as
// the style guide asks, on a random graph of R rows with a given mean degree, for each width.
// Warm-up, then the median of the timed repeats (CUDA events). One JSON line per measurement.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "bench/bench_common.h"
#include "core/csr.h"
#include "core/cuda/check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/runtime.h"

namespace tessera {
namespace {

struct Flags {
  std::int64_t rows = 2'000'000;
  int degree = 25;
  std::vector<std::int64_t> widths = {32, 128, 256};
  int repeats = 10;
};

// Median of `repeats` timings of fn() on the compute stream, in seconds, after one warm-up.
template <class Fn>
double median_seconds(int repeats, Fn fn) {
  cudaStream_t stream = cuda::compute_stream();
  cudaEvent_t start, stop;
  TESSERA_CUDA_CHECK(cudaEventCreate(&start));
  TESSERA_CUDA_CHECK(cudaEventCreate(&stop));
  fn();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    TESSERA_CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    TESSERA_CUDA_CHECK(cudaEventRecord(stop, stream));
    TESSERA_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

Csr random_graph(std::int64_t rows, int degree) {
  std::mt19937_64 gen(7);
  std::uniform_int_distribution<NodeId> col(0, static_cast<NodeId>(rows - 1));
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(rows) + 1, 0);
  std::vector<NodeId> indices(static_cast<std::size_t>(rows) * static_cast<std::size_t>(degree));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < degree; ++j) indices[static_cast<std::size_t>(r * degree + j)] = col(gen);
    std::sort(indices.begin() + r * degree, indices.begin() + (r + 1) * degree);
    indptr[static_cast<std::size_t>(r) + 1] = (r + 1) * degree;
  }
  std::vector<float> values(indices.size(), 1.0f / static_cast<float>(degree));
  return Csr(rows, rows, std::move(indptr), std::move(indices), std::move(values));
}

int run(const Flags& f) {
  cuda::require_device(0, "bench_cuda");
  JsonLines out;
  cudaDeviceProp prop{};
  TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  // Copy bandwidth: 1 GiB device-to-device (read + write).
  const std::size_t copy_bytes = std::size_t{1} << 30;
  cuda::DeviceBuffer src(copy_bytes), dst(copy_bytes);
  TESSERA_CUDA_CHECK(cudaMemsetAsync(src.get(), 1, copy_bytes, cuda::compute_stream()));
  const double copy_s = median_seconds(f.repeats, [&] {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), copy_bytes,
                                       cudaMemcpyDeviceToDevice, cuda::compute_stream()));
  });
  const double copy_gbs = 2.0 * static_cast<double>(copy_bytes) / copy_s / 1e9;
  out.emit("copy", {{"device", prop.name}, {"bytes", copy_bytes}, {"seconds", copy_s},
                    {"gb_per_s", copy_gbs}});
  std::printf("%-28s %10.1f GB/s\n", "device-to-device copy", copy_gbs);

  const Csr a = random_graph(f.rows, f.degree);
  const cuda::CudaCsr device_a(a.view());
  for (std::int64_t width : f.widths) {
    cuda::DeviceBuffer x(static_cast<std::size_t>(f.rows * width) * sizeof(float));
    cuda::DeviceBuffer y(static_cast<std::size_t>(f.rows * width) * sizeof(float));
    TESSERA_CUDA_CHECK(cudaMemsetAsync(x.get(), 0, x.bytes(), cuda::compute_stream()));
    const double s = median_seconds(f.repeats, [&] {
      cuda::spmm(y.as<float>(), device_a, x.as<float>(), width);
    });
    const double bytes = static_cast<double>(device_a.matrix_bytes()) +
                         static_cast<double>(a.nnz() * width + f.rows * width) * sizeof(float);
    const double gbs = bytes / s / 1e9;
    out.emit("spmm", {{"rows", f.rows}, {"nnz", a.nnz()}, {"width", width}, {"seconds", s},
                      {"gb_per_s", gbs}, {"fraction_of_copy", gbs / copy_gbs}});
    std::printf("spmm R=%lld nnz=%lld F=%-4lld %10.1f GB/s (%.0f %% of copy), %.3f ms\n",
                static_cast<long long>(f.rows), static_cast<long long>(a.nnz()),
                static_cast<long long>(width), gbs, 100.0 * gbs / copy_gbs, s * 1e3);
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using tessera::Flags;
  return tessera::bench_main<Flags>(
      argc, argv, "bench_cuda", "GPU SpMM bandwidth against the measured copy bandwidth",
      [](CLI::App& app, Flags& f) {
        app.add_option("--rows", f.rows, "rows (nodes) of the random graph")->capture_default_str();
        app.add_option("--degree", f.degree, "entries per row")->capture_default_str();
        app.add_option("--widths", f.widths, "feature widths")->capture_default_str();
        app.add_option("--repeats", f.repeats, "timed repeats (median)")->capture_default_str();
      },
      [](const Flags& f) { return tessera::run(f); });
}
