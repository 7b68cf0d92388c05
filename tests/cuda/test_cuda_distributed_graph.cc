// SPDX-License-Identifier: Apache-2.0
// The public DistributedGraph (include/tessera/distributed_graph.h) on GPU ranks against the same
// partition on the CPU, under mpiexec at 1 and 2 ranks, once per gpu_comm: the aggregations
// forward and backward and dropout on the caller's GPU memory, ordered after the caller's
// stream, and host memory refused. Over NCCL every rank needs a GPU of its own (skipped, with
// the reason, otherwise); over MPI the ranks may share one GPU. cuSPARSE sums in its own order,
// so the aggregations are compared to 1e-5; dropout's masks exactly.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tessera/distributed_graph.h"

namespace {

int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

int ranks_on_node() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int size = 0;
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return size;
}

// A (num_local, f) float32 block on the current GPU, freed with it.
class GpuRows {
 public:
  GpuRows(std::int64_t rows, std::int64_t f) : bytes_(static_cast<std::size_t>(rows * f) * 4) {
    EXPECT_EQ(cudaMalloc(&data_, bytes_ == 0 ? 4 : bytes_), cudaSuccess);
  }
  ~GpuRows() { cudaFree(data_); }
  GpuRows(const GpuRows&) = delete;
  GpuRows& operator=(const GpuRows&) = delete;
  float* data() { return static_cast<float*>(data_); }
  void upload(const std::vector<float>& host) {
    EXPECT_EQ(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<float> download(cudaStream_t stream = nullptr) const {
    std::vector<float> host(bytes_ / 4);
    EXPECT_EQ(cudaMemcpyAsync(host.data(), data_, bytes_, cudaMemcpyDeviceToHost, stream),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    return host;
  }

 private:
  std::size_t bytes_;
  void* data_ = nullptr;
};

// Holds the caller's stream for a while: the work queued after it starts 200 ms late.
void CUDART_CB hold_the_stream(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

// Each node's row a function of its global id, so that both graphs see the same input.
std::vector<float> rows_of(const tessera::DistributedGraph& g, std::int64_t f, unsigned seed) {
  std::vector<float> rows;
  for (const std::int64_t id : g.node_ids()) {
    std::mt19937 rng(seed * 1000003u + static_cast<unsigned>(id));
    std::normal_distribution<float> normal;
    for (std::int64_t j = 0; j < f; ++j) rows.push_back(normal(rng));
  }
  return rows;
}

void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, float tolerance,
                  const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  std::size_t off = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    if (std::abs(gpu[i] - cpu[i]) > tolerance * (1.0f + std::abs(cpu[i]))) ++off;
  }
  EXPECT_EQ(off, 0u) << what << ": " << off << " of " << cpu.size() << " values differ";
}

// The parameter is gpu_comm.
class CudaDistributedGraph : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const int gpus = visible_gpus();
    if (gpus == 0) GTEST_SKIP() << "no usable CUDA GPU";
    if (GetParam() == "nccl" && gpus < ranks_on_node())
      GTEST_SKIP() << ranks_on_node() << " ranks on this node need as many GPUs under NCCL, "
                   << "found " << gpus;
    tessera::Options options;
    options.num_layers = 1;
    cpu_ = std::make_unique<tessera::DistributedGraph>(options);
    options.device = "cuda";
    options.gpu_comm = GetParam();
    gpu_ = std::make_unique<tessera::DistributedGraph>(options);
    for (auto* g : {cpu_.get(), gpu_.get()}) g->load("synth:default");
    n_ = cpu_->num_local();
    // The graph leaves the current GPU as it was: the test's own memory goes on the graph's.
    ASSERT_EQ(gpu_->device().rfind("cuda:", 0), 0u) << gpu_->device();
    ASSERT_EQ(cudaSetDevice(std::stoi(gpu_->device().substr(5))), cudaSuccess);
  }
  std::unique_ptr<tessera::DistributedGraph> cpu_, gpu_;
  std::int64_t n_ = 0;
};

TEST_P(CudaDistributedGraph, AggregationsAndDropoutEqualTheCpus) {
  ASSERT_EQ(gpu_->node_ids(), cpu_->node_ids());
  EXPECT_EQ(gpu_->device().rfind("cuda:", 0), 0u) << gpu_->device();
  const std::int64_t f = 24;
  const std::vector<float> x = rows_of(*cpu_, f, 1);
  GpuRows x_gpu(n_, f), y_gpu(n_, f);
  x_gpu.upload(x);
  for (const tessera::Aggregation op :
       {tessera::Aggregation::Gcn, tessera::Aggregation::Mean, tessera::Aggregation::Sum}) {
    SCOPED_TRACE(static_cast<int>(op));
    std::vector<float> y(x.size());
    cpu_->aggregate(op, y.data(), x.data(), f, 0);
    gpu_->aggregate(op, y_gpu.data(), x_gpu.data(), f, 0);
    expect_close(y_gpu.download(), y, 1e-5f, "forward");
    cpu_->aggregate_backward(op, y.data(), x.data(), f, 0);
    gpu_->aggregate_backward(op, y_gpu.data(), x_gpu.data(), f, 0);
    expect_close(y_gpu.download(), y, 1e-5f, "backward");
  }
  cpu_->set_epoch(3);
  gpu_->set_epoch(3);
  std::vector<float> kept(x.size());
  cpu_->dropout(kept.data(), x.data(), f, 0.4f, 5);
  gpu_->dropout(y_gpu.data(), x_gpu.data(), f, 0.4f, 5);
  const std::vector<float> kept_gpu = y_gpu.download();
  for (std::size_t i = 0; i < kept.size(); ++i)
    ASSERT_EQ(kept_gpu[i] == 0.0f, kept[i] == 0.0f) << "dropout mask, value " << i;
  expect_close(kept_gpu, kept, 1e-6f, "dropout");
}

// The caller's non-blocking stream is held for 200 ms, then copies the input up from pinned
// memory; the aggregation is called at once, and the result is copied down on that stream.
// Without the ordering, the aggregation would read the zeros there before, and the copy down
// would not wait for it. A first call builds the operator beforehand (its upload synchronises).
TEST_P(CudaDistributedGraph, CallsAreOrderedWithTheCallersStream) {
  const std::int64_t f = 256;
  const std::vector<float> x = rows_of(*cpu_, f, 2);
  std::vector<float> y(x.size());
  cpu_->aggregate(tessera::Aggregation::Gcn, y.data(), x.data(), f, 0);
  GpuRows x_gpu(n_, f), y_gpu(n_, f);
  x_gpu.upload(std::vector<float>(x.size(), 0.0f));
  gpu_->aggregate(tessera::Aggregation::Gcn, y_gpu.data(), x_gpu.data(), f, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  void* block = nullptr;
  ASSERT_EQ(cudaMallocHost(&block, x.size() * sizeof(float)), cudaSuccess);
  auto* pinned = static_cast<float*>(block);
  std::copy(x.begin(), x.end(), pinned);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  gpu_->set_stream(reinterpret_cast<std::uintptr_t>(stream));
  ASSERT_EQ(cudaLaunchHostFunc(stream, hold_the_stream, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(x_gpu.data(), pinned, x.size() * sizeof(float), cudaMemcpyHostToDevice,
                            stream),
            cudaSuccess);
  gpu_->aggregate(tessera::Aggregation::Gcn, y_gpu.data(), x_gpu.data(), f, 0);
  expect_close(y_gpu.download(stream), y, 1e-5f, "on the caller's stream");
  gpu_->set_stream(0);
  cudaStreamDestroy(stream);
  cudaFreeHost(pinned);
}

TEST_P(CudaDistributedGraph, HostMemoryIsRefused) {
  std::vector<float> x(static_cast<std::size_t>(n_) * 4, 1.0f), y(x.size());
  try {
    gpu_->aggregate(tessera::Aggregation::Gcn, y.data(), x.data(), 4, 0);
    if (n_ > 0) ADD_FAILURE() << "host rows given to a GPU graph were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is not memory of cuda:"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(GpuComm, CudaDistributedGraph, ::testing::Values("nccl", "mpi"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param;
                         });

}  // namespace
