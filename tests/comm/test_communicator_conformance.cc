// SPDX-License-Identifier: Apache-2.0
// The contract of the Communicator interface (comm/communicator.h), stated once and run against
// every implementation under mpiexec: MpiCommunicator always, StagedCommunicator (CUDA builds;
// host buffers here, GPU buffers in StagedOnGpu below where a GPU exists), NcclCommunicator
// (CUDA builds) only where this node has at least one GPU per rank, else skipped with the reason.
// Sums are exact (integer-valued inputs) and give the same bits on every rank; max over int64;
// broadcast from every root; point-to-point rings and all-pairs exchanges of random bytes,
// zero-length and large messages, messages matched in posting order; traffic counted by category
// (ring all-reduce 2 (K-1)/K, broadcast (K-1) on the root, sends raw and sent).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/error.h"
#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "comm/nccl_communicator.h"
#include "comm/staged_communicator.h"
#include "core/cuda/runtime.h"
#endif

namespace tessera {
namespace {

constexpr double kTestTimeoutSeconds = 60.0;  // fail well before CTest's limit

// An implementation under test: how to build it over the bootstrap MPI communicator, and why it
// cannot run here ("" when it can). The reason must be the same on every rank.
struct Implementation {
  std::string name;
  std::function<std::string(MpiCommunicator& bootstrap)> unavailable;
  std::function<std::unique_ptr<Communicator>(MpiCommunicator& bootstrap)> make;
};

std::vector<Implementation> implementations() {
  std::vector<Implementation> out;
  out.push_back({"Mpi", [](MpiCommunicator&) { return std::string(); },
                 [](MpiCommunicator&) -> std::unique_ptr<Communicator> {
                   return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, kTestTimeoutSeconds);
                 }});
#ifdef TESSERA_HAVE_CUDA
  out.push_back({"Staged", [](MpiCommunicator&) { return std::string(); },
                 [](MpiCommunicator& bootstrap) -> std::unique_ptr<Communicator> {
                   return std::make_unique<StagedCommunicator>(bootstrap);
                 }});
  out.push_back({"Nccl",
                 [](MpiCommunicator& bootstrap) {
                   // Agreed: every rank skips when any rank's node lacks a GPU per rank.
                   const bool here = cuda::device_count() >= bootstrap.ranks_on_node();
                   int can_run = here ? 1 : 0;
                   int everywhere = 0;
                   MPI_Allreduce(&can_run, &everywhere, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
                   if (everywhere) return std::string();
                   return detail::concat("NCCL needs one GPU per rank: this node has ",
                                         cuda::device_count(), " GPU(s) for ",
                                         bootstrap.ranks_on_node(), " rank(s)",
                                         cuda::cuda_available()
                                             ? std::string()
                                             : " (" + cuda::unavailable_reason() + ")");
                 },
                 [](MpiCommunicator& bootstrap) -> std::unique_ptr<Communicator> {
                   return std::make_unique<NcclCommunicator>(bootstrap, kTestTimeoutSeconds);
                 }});
#endif
  return out;
}

// Bytes only `rank` and `bytes` (and `salt`) determine, so a receiver can rebuild them.
std::vector<std::byte> random_bytes(int rank, std::size_t bytes, std::uint64_t salt = 0) {
  std::mt19937_64 engine(0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(rank) << 40) ^ bytes ^
                         (salt << 20));
  std::vector<std::byte> out(bytes);
  for (std::byte& b : out) b = static_cast<std::byte>(engine() >> 56);
  return out;
}

std::int64_t first_mismatch(const std::vector<std::byte>& got, const std::vector<std::byte>& want) {
  if (got.size() != want.size()) return 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return static_cast<std::int64_t>(i);
  }
  return -1;
}

// How many ranks hold bytes other than rank 0's (plain MPI on the world communicator, so that
// the communicator under test counts no extra traffic).
int ranks_differing_from_rank0(std::span<const std::byte> bytes) {
  std::vector<std::byte> rank0(bytes.begin(), bytes.end());
  MPI_Bcast(rank0.data(), static_cast<int>(rank0.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
  int differs = std::memcmp(rank0.data(), bytes.data(), bytes.size()) != 0 ? 1 : 0;
  int total = 0;
  MPI_Allreduce(&differs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

std::uint64_t ring_bytes(std::uint64_t bytes, int ranks) {
  return bytes * 2 * static_cast<std::uint64_t>(ranks - 1) / static_cast<std::uint64_t>(ranks);
}

class CommunicatorConformance : public ::testing::TestWithParam<Implementation> {
 protected:
  void SetUp() override {
    bootstrap_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, kTestTimeoutSeconds);
    const std::string reason = GetParam().unavailable(*bootstrap_);
    if (!reason.empty()) {
      if (bootstrap_->rank() == 0) std::printf("skipping %s: %s\n", GetParam().name.c_str(),
                                               reason.c_str());
      GTEST_SKIP() << reason;
    }
    comm_ = GetParam().make(*bootstrap_);
    comm_->traffic().reset();
    rank = comm_->rank();
    ranks = comm_->size();
    next = (rank + 1) % ranks;
    prev = (rank + ranks - 1) % ranks;
  }
  void TearDown() override {
    comm_.reset();  // before its bootstrap
    bootstrap_.reset();
  }

  Communicator& comm() { return *comm_; }

  // Sends random bytes to the next rank and checks those from the previous one.
  void ring_exchange(std::size_t bytes, int tag) {
    const std::vector<std::byte> out = random_bytes(rank, bytes);
    std::vector<std::byte> in(bytes, std::byte{0xEE});
    std::vector<std::unique_ptr<Request>> requests;
    requests.push_back(comm().irecv(in, prev, tag));
    requests.push_back(comm().isend(out, next, tag, TrafficCategory::HaloForward));
    wait_all(requests);
    EXPECT_EQ(first_mismatch(in, random_bytes(prev, bytes)), -1)
        << bytes << "-byte message from rank " << prev << " to rank " << rank;
  }

  int rank = 0;
  int ranks = 1;
  int next = 0;
  int prev = 0;

 private:
  std::unique_ptr<MpiCommunicator> bootstrap_;
  std::unique_ptr<Communicator> comm_;
};

TEST_P(CommunicatorConformance, RankSizeTimeoutAndBarrier) {
  int world_rank = -1, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  EXPECT_EQ(rank, world_rank);
  EXPECT_EQ(ranks, world_size);
  EXPECT_EQ(error_rank(), rank);
  EXPECT_EQ(comm().timeout(), kTestTimeoutSeconds);
  comm().set_timeout(kTestTimeoutSeconds + 1);
  EXPECT_EQ(comm().timeout(), kTestTimeoutSeconds + 1);
  comm().barrier();
  EXPECT_EQ(comm().traffic().total_sent(), 0u);  // a barrier moves no counted bytes
}

TEST_P(CommunicatorConformance, AllReduceSumFloatIsExact) {
  constexpr std::size_t n = 1000;
  auto value = [](int r, std::size_t i) {  // integers below 2^24: float sums are exact
    return static_cast<double>((r + 1) * static_cast<int>(i % 97) - 3 * static_cast<int>(i % 5));
  };
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(value(rank, i));
  comm().all_reduce_sum(std::span<float>(values), TrafficCategory::AllReduce);
  std::size_t wrong = 0, first_wrong = n;
  for (std::size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < ranks; ++r) want += value(r, i);
    if (values[i] != static_cast<float>(want) && wrong++ == 0) first_wrong = i;
  }
  EXPECT_EQ(wrong, 0u) << "first wrong sum at index " << first_wrong;
  EXPECT_EQ(comm().traffic().sent(TrafficCategory::AllReduce), ring_bytes(n * 4, ranks));
  EXPECT_EQ(comm().traffic().raw(TrafficCategory::AllReduce), ring_bytes(n * 4, ranks));
  EXPECT_EQ(ranks_differing_from_rank0(std::as_bytes(std::span<const float>(values))), 0);
}

TEST_P(CommunicatorConformance, AllReduceSumDoubleIsExact) {
  constexpr std::size_t n = 777;
  auto value = [](int r, std::size_t i) {  // up to ~2^45: exact in double
    return static_cast<double>(static_cast<std::int64_t>(i) * 1'000'003'001LL * (r + 1) -
                               (std::int64_t{1} << 40) * (r % 2));
  };
  std::vector<double> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = value(rank, i);
  comm().all_reduce_sum(std::span<double>(values), TrafficCategory::Pipeline);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < ranks; ++r) want += value(r, i);
    if (values[i] != want) ++wrong;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(comm().traffic().sent(TrafficCategory::Pipeline), ring_bytes(n * 8, ranks));
  EXPECT_EQ(comm().traffic().sent(TrafficCategory::AllReduce), 0u);
}

TEST_P(CommunicatorConformance, AllReduceSumGivesTheSameBitsOnEveryRank) {
  // Non-integer values whose sum depends on the order of additions: every rank must still get
  // bit-identical results (the gradients of every replica must stay equal).
  std::mt19937 engine(1234 + static_cast<unsigned>(rank));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> floats(100'003);  // large enough for a reduce-scatter/all-gather algorithm
  for (float& x : floats) x = uniform(engine) * 1e-3f + uniform(engine);
  std::vector<double> doubles(333);
  for (double& x : doubles) x = static_cast<double>(uniform(engine)) / 3.0;
  comm().all_reduce_sum(std::span<float>(floats), TrafficCategory::AllReduce);
  comm().all_reduce_sum(std::span<double>(doubles), TrafficCategory::AllReduce);
  EXPECT_EQ(ranks_differing_from_rank0(std::as_bytes(std::span<const float>(floats))), 0);
  EXPECT_EQ(ranks_differing_from_rank0(std::as_bytes(std::span<const double>(doubles))), 0);
}

TEST_P(CommunicatorConformance, EmptyReductionsAndBroadcastsAreNoOps) {
  std::vector<float> none_f;
  std::vector<std::int64_t> none_i;
  std::vector<std::byte> none_b;
  comm().all_reduce_sum(std::span<float>(none_f), TrafficCategory::AllReduce);
  comm().all_reduce_max(none_i);
  comm().broadcast(none_b, 0, TrafficCategory::Setup);
  EXPECT_EQ(comm().traffic().total_sent(), 0u);
}

TEST_P(CommunicatorConformance, AllReduceMaxCountsAsSetup) {
  constexpr std::int64_t big = std::int64_t{1} << 50;  // beyond 32 bits
  constexpr std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  std::vector<std::int64_t> values{rank, -rank, big + rank, lowest,
                                   rank == ranks - 1 ? std::int64_t{7} : std::int64_t{-7}};
  comm().all_reduce_max(values);
  EXPECT_EQ(values, (std::vector<std::int64_t>{ranks - 1, 0, big + ranks - 1, lowest, 7}));
  EXPECT_EQ(comm().traffic().sent(TrafficCategory::Setup), ring_bytes(5 * 8, ranks));
  EXPECT_EQ(comm().traffic().total_sent(), ring_bytes(5 * 8, ranks));
}

TEST_P(CommunicatorConformance, BroadcastFromEachRoot) {
  constexpr std::size_t n = 1001;
  std::uint64_t want_sent = 0;
  for (int root = 0; root < ranks; ++root) {
    std::vector<std::byte> buffer =
        rank == root ? random_bytes(root, n) : std::vector<std::byte>(n, std::byte{0xEE});
    comm().broadcast(buffer, root, TrafficCategory::Setup);
    EXPECT_EQ(first_mismatch(buffer, random_bytes(root, n)), -1) << "root " << root;
    if (rank == root) want_sent += static_cast<std::uint64_t>(ranks - 1) * n;
  }
  EXPECT_EQ(comm().traffic().sent(TrafficCategory::Setup), want_sent);
}

TEST_P(CommunicatorConformance, RingMessagesZeroLengthSmallAndLargeArriveExactly) {
  int tag = 100;
  const std::vector<std::size_t> sizes = {0, 1, 1000, 3'000'000, 24u << 20};
  std::uint64_t sent = 0;
  for (std::size_t bytes : sizes) {
    ring_exchange(bytes, tag++);
    sent += bytes;
  }
  EXPECT_EQ(comm().traffic().sent(TrafficCategory::HaloForward), sent);
  EXPECT_EQ(comm().traffic().raw(TrafficCategory::HaloForward), sent);
}

TEST_P(CommunicatorConformance, AllPairsExchangeWithDistinctSizesPolledWithTest) {
  // Every rank sends to every other rank at once (as a halo exchange does), sizes per pair.
  auto size_of = [](int from, int to) { return static_cast<std::size_t>(97 * from + 13 * to + 5); };
  std::vector<std::vector<std::byte>> out(static_cast<std::size_t>(ranks));
  std::vector<std::vector<std::byte>> in(static_cast<std::size_t>(ranks));
  std::vector<std::unique_ptr<Request>> requests;
  std::uint64_t sent = 0;
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank) continue;
    in[static_cast<std::size_t>(peer)].assign(size_of(peer, rank), std::byte{0});
    requests.push_back(comm().irecv(in[static_cast<std::size_t>(peer)], peer, 7));
  }
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank) continue;
    out[static_cast<std::size_t>(peer)] = random_bytes(rank, size_of(rank, peer), peer);
    requests.push_back(comm().isend(out[static_cast<std::size_t>(peer)], peer, 7,
                                    TrafficCategory::HaloBackward, /*raw_bytes=*/4 * size_of(rank, peer)));
    sent += size_of(rank, peer);
  }
  while (!test_all(requests)) {
  }
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank) continue;
    EXPECT_EQ(first_mismatch(in[static_cast<std::size_t>(peer)],
                             random_bytes(peer, size_of(peer, rank), rank)),
              -1)
        << "from rank " << peer;
  }
  EXPECT_EQ(comm().traffic().sent(TrafficCategory::HaloBackward), sent);
  EXPECT_EQ(comm().traffic().raw(TrafficCategory::HaloBackward), 4 * sent);
}

TEST_P(CommunicatorConformance, MessagesBetweenTwoRanksMatchInPostingOrder) {
  // Two messages to the same peer, posted in the same order on both sides (the only order an
  // implementation without tags, such as NCCL, can match).
  const std::vector<std::byte> first = random_bytes(rank, 64, 1), second = random_bytes(rank, 4096, 2);
  std::vector<std::byte> got_first(64), got_second(4096);
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(comm().irecv(got_first, prev, 21));
  requests.push_back(comm().irecv(got_second, prev, 22));
  requests.push_back(comm().isend(first, next, 21, TrafficCategory::Pipeline));
  requests.push_back(comm().isend(second, next, 22, TrafficCategory::Pipeline));
  wait_all(requests);
  EXPECT_EQ(first_mismatch(got_first, random_bytes(prev, 64, 1)), -1);
  EXPECT_EQ(first_mismatch(got_second, random_bytes(prev, 4096, 2)), -1);
  EXPECT_EQ(comm().traffic().sent(TrafficCategory::Pipeline), 64u + 4096u);
}

#ifdef TESSERA_HAVE_CUDA
// A stand-in for GPU memory on the CPU: blocks it hands out count as "device" memory, and the
// copies in and out of them are counted, so that the staging logic has a test without a GPU.
class FakeDevice {
 public:
  std::span<std::byte> allocate(const std::vector<std::byte>& contents) {
    blocks_.push_back(contents);
    return blocks_.back();
  }
  StagingCopies copies() {
    return {[this](const void* p) {
              for (const auto& b : blocks_)
                if (p >= b.data() && p < b.data() + b.size()) return true;
              return false;
            },
            [this](void* host, const void* device, std::size_t bytes) {
              ++downloads;
              std::memcpy(host, device, bytes);
            },
            [this](void* device, const void* host, std::size_t bytes) {
              ++uploads;
              std::memcpy(device, host, bytes);
            }};
  }
  int downloads = 0;
  int uploads = 0;

 private:
  std::list<std::vector<std::byte>> blocks_;  // stable addresses
};

// The staging itself, on "device" buffers of a FakeDevice: a send is copied down once when
// posted; a receive lands in host memory and reaches its device buffer only when its wait or
// test completes, once however often it is tested; sums and broadcasts go down and up once
// (a broadcast's non-roots only up); host buffers are not copied; splits stage too; every byte
// is counted once, in the job's counter.
TEST(StagedOnFakeDevice, DeviceBuffersAreCopiedDownAndUpExactlyOnce) {
  MpiCommunicator bootstrap(MPI_COMM_WORLD, kTestTimeoutSeconds);
  FakeDevice device;
  StagedCommunicator comm(bootstrap, device.copies());
  bootstrap.traffic().reset();
  const int rank = comm.rank(), ranks = comm.size();
  const int next = (rank + 1) % ranks, prev = (rank + ranks - 1) % ranks;
  std::span<std::byte> out = device.allocate(random_bytes(rank, 5000));
  std::span<std::byte> in = device.allocate(std::vector<std::byte>(5000, std::byte{0xEE}));
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(comm.irecv(in, prev, 3));
  requests.push_back(comm.isend(out, next, 3, TrafficCategory::HaloForward));
  EXPECT_EQ(device.downloads, 1);
  MPI_Barrier(MPI_COMM_WORLD);  // every send posted: only the staging keeps `in` untouched
  EXPECT_EQ(in[0], std::byte{0xEE});
  EXPECT_EQ(device.uploads, 0);
  while (!test_all(requests)) {
  }
  EXPECT_TRUE(test_all(requests));  // tested again: not copied up again
  wait_all(requests);
  EXPECT_EQ(device.uploads, 1);
  EXPECT_EQ(first_mismatch(std::vector<std::byte>(in.begin(), in.end()), random_bytes(prev, 5000)),
            -1);
  EXPECT_EQ(bootstrap.traffic().sent(TrafficCategory::HaloForward), 5000u);

  std::vector<float> values(300);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(rank + i % 7);
  const auto bytes_of = [](const std::vector<float>& v) {
    const auto b = std::as_bytes(std::span<const float>(v));
    return std::vector<std::byte>(b.begin(), b.end());
  };
  std::span<std::byte> sums = device.allocate(bytes_of(values));
  comm.all_reduce_sum(std::span<float>(reinterpret_cast<float*>(sums.data()), values.size()),
                      TrafficCategory::AllReduce);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(ranks * (ranks - 1) / 2 + ranks * static_cast<int>(i % 7));
  EXPECT_EQ(first_mismatch(std::vector<std::byte>(sums.begin(), sums.end()), bytes_of(values)), -1);
  EXPECT_EQ(device.downloads, 2);
  EXPECT_EQ(device.uploads, 2);
  EXPECT_EQ(bootstrap.traffic().sent(TrafficCategory::AllReduce), ring_bytes(1200, ranks));

  const int root = std::min(1, ranks - 1);  // rank 1, or 0 when it runs alone
  std::span<std::byte> shared =
      device.allocate(rank == root ? random_bytes(root, 999) : std::vector<std::byte>(999));
  comm.broadcast(shared, root, TrafficCategory::Setup);
  EXPECT_EQ(
      first_mismatch(std::vector<std::byte>(shared.begin(), shared.end()), random_bytes(root, 999)),
      -1);
  EXPECT_EQ(device.downloads, rank == root ? 3 : 2);  // only the root's bytes go down
  EXPECT_EQ(device.uploads, 3);

  std::vector<float> host(10, 1.0f);  // host memory: straight to MPI
  comm.all_reduce_sum(std::span<float>(host), TrafficCategory::AllReduce);
  EXPECT_EQ(host[0], static_cast<float>(ranks));
  std::unique_ptr<Communicator> half = comm.split(rank % 2, rank);
  std::span<std::byte> one = device.allocate(bytes_of(std::vector<float>{1.0f}));
  half->all_reduce_sum(std::span<float>(reinterpret_cast<float*>(one.data()), 1),
                       TrafficCategory::AllReduce);
  EXPECT_EQ(device.downloads, (rank == root ? 3 : 2) + 1);
  EXPECT_EQ(device.uploads, 4);
  EXPECT_EQ(*reinterpret_cast<float*>(one.data()), static_cast<float>(half->size()));
}

// A GPU allocation holding `bytes` (host vector in, host vector out).
class DeviceBytes {
 public:
  explicit DeviceBytes(const std::vector<std::byte>& host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<std::size_t>(size_, 1)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), size_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBytes() { cudaFree(ptr_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  std::span<std::byte> span() { return {static_cast<std::byte*>(ptr_), size_}; }
  std::vector<std::byte> host() const {
    cuda::synchronize_compute();  // staged receives are copied up on the compute stream
    std::vector<std::byte> out(size_);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr_, size_, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

// StagedCommunicator with GPU buffers (the ranks may share one GPU): messages, sums and
// broadcasts arrive exactly in GPU memory, and the traffic is counted once, in the job's counter.
TEST(StagedOnGpu, GpuBuffersArriveExactlyAndAreCountedOnce) {
  if (!cuda::cuda_available()) GTEST_SKIP() << "no usable CUDA GPU: " << cuda::unavailable_reason();
  MpiCommunicator bootstrap(MPI_COMM_WORLD, kTestTimeoutSeconds);
  cuda::require_device(0, "StagedOnGpu");
  StagedCommunicator comm(bootstrap);
  bootstrap.traffic().reset();
  const int rank = comm.rank(), ranks = comm.size();
  const int next = (rank + 1) % ranks, prev = (rank + ranks - 1) % ranks;
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1000}, std::size_t{3'000'000}}) {
    DeviceBytes out(random_bytes(rank, bytes));
    DeviceBytes in(std::vector<std::byte>(bytes, std::byte{0xEE}));
    std::vector<std::unique_ptr<Request>> requests;
    requests.push_back(comm.irecv(in.span(), prev, 5));
    requests.push_back(comm.isend(out.span(), next, 5, TrafficCategory::HaloForward));
    while (!test_all(requests)) {
    }
    EXPECT_EQ(first_mismatch(in.host(), random_bytes(prev, bytes)), -1) << bytes << " bytes";
  }
  EXPECT_EQ(bootstrap.traffic().sent(TrafficCategory::HaloForward), 3'001'000u);
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(rank * 7 + i % 13);
  const auto as_bytes = [](const std::vector<float>& v) {
    const auto b = std::as_bytes(std::span<const float>(v));
    return std::vector<std::byte>(b.begin(), b.end());
  };
  DeviceBytes sums(as_bytes(values));
  comm.all_reduce_sum(std::span<float>(reinterpret_cast<float*>(sums.span().data()), values.size()),
                      TrafficCategory::AllReduce);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(7 * ranks * (ranks - 1) / 2 + ranks * static_cast<int>(i % 13));
  EXPECT_EQ(first_mismatch(sums.host(), as_bytes(values)), -1);
  EXPECT_EQ(bootstrap.traffic().sent(TrafficCategory::AllReduce), ring_bytes(4000, ranks));
  DeviceBytes broadcast(rank == 0 ? random_bytes(0, 777) : std::vector<std::byte>(777));
  comm.broadcast(broadcast.span(), 0, TrafficCategory::Setup);
  EXPECT_EQ(first_mismatch(broadcast.host(), random_bytes(0, 777)), -1);
}
#endif

INSTANTIATE_TEST_SUITE_P(Implementations, CommunicatorConformance,
                         ::testing::ValuesIn(implementations()),
                         [](const ::testing::TestParamInfo<Implementation>& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
}  // namespace tessera
