// SPDX-License-Identifier: Apache-2.0
// NcclCommunicator: MPI bootstrap (agreed GPU binding, unique id broadcast, ncclCommInitRank),
// collectives and grouped point-to-point on the communication stream, host buffers staged
// through pooled device buffers, and waits that poll events and ncclCommGetAsyncError against
// a deadline. Receives into host memory are copied back only after their group completed, so
// no call blocks without a timeout.
#include "comm/nccl_communicator.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "comm/agreement.h"
#include "comm/gpu_binding.h"
#include "comm/launch_env.h"
#include "core/cuda/allocator.h"
#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/error.h"

namespace tessera {
namespace detail {

struct NcclPending {
  enum class Kind { Send, Receive } kind = Kind::Send;
  int peer = 0;
  std::size_t bytes = 0;
  void* device_ptr = nullptr;          // what NCCL reads or writes
  std::byte* host_receive = nullptr;   // host destination of a staged receive, else null
  cuda::DeviceBuffer staging;          // for host buffers
  std::shared_ptr<cuda::Event> done;   // recorded after the group; null until issued
  bool copied_back = false;
};

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

// The communication stream waits for the work already queued on the compute stream (which may
// be producing the data about to be sent or reduced).
void order_after_compute() {
  cuda::Event computed;
  computed.record(cuda::compute_stream());
  computed.wait_on(cuda::comm_stream());
}

}  // namespace

class NcclRequest final : public Request {
 public:
  NcclRequest(NcclCommunicator* comm, std::shared_ptr<detail::NcclPending> op)
      : comm_(comm), op_(std::move(op)) {}

  bool test() override {
    if (!op_) return true;
    comm_->start();
    comm_->check_async_error(describe());
    if (!op_->done->done()) return false;
    finish();
    return true;
  }

  void wait() override {
    if (!op_) return;
    comm_->start();
    comm_->wait_for(op_->done.get(), describe());
    finish();
  }

 private:
  void finish() {
    if (op_->host_receive && !op_->copied_back) {
      TESSERA_CUDA_CHECK(cudaMemcpy(op_->host_receive, op_->device_ptr, op_->bytes,
                                    cudaMemcpyDeviceToHost));
      op_->copied_back = true;
    }
  }
  std::string describe() const {
    return detail::concat(op_->kind == detail::NcclPending::Kind::Send ? "NCCL send to rank "
                                                                       : "NCCL receive from rank ",
                          op_->peer, " (", op_->bytes, " bytes)");
  }

  NcclCommunicator* comm_;
  std::shared_ptr<detail::NcclPending> op_;  // null: a zero-byte message, complete at once
};

NcclCommunicator::NcclCommunicator(MpiCommunicator& bootstrap, double timeout_s,
                                   std::string device)
    : bootstrap_(&bootstrap), rank_(bootstrap.rank()), size_(bootstrap.size()),
      device_text_(std::move(device)), timeout_s_(timeout_s) {
  const LaunchEnv env =
      detect_launch_env(bootstrap, bootstrap.rank_on_node(), bootstrap.ranks_on_node());
  ncclUniqueId id{};
  std::string identity;
  run_agreed(bootstrap, "NCCL set-up (GPU binding)", [&] {
    TESSERA_CHECK(cuda::cuda_available(), Cuda, "NcclCommunicator needs one GPU per rank, but "
                  "no usable CUDA GPU was found (", cuda::unavailable_reason(), ")");
    device_ = choose_gpu(requested_gpu(device_text_), env.local_rank, cuda::device_count(),
                         std::getenv("CUDA_VISIBLE_DEVICES"));
    cuda::require_device(device_, "NcclCommunicator");
    identity = cuda::device_identity(device_);
    (void)cuda::comm_stream();
    if (rank_ == 0) TESSERA_NCCL_CHECK(ncclGetUniqueId(&id));
  });
  require_one_gpu_per_rank(bootstrap, identity, device_text_);
  bootstrap.broadcast(std::as_writable_bytes(std::span<ncclUniqueId>(&id, 1)), 0,
                      TrafficCategory::Setup);
  // Blocking initialisation: every rank reached this point with a usable GPU (agreed above).
  run_agreed(bootstrap, "NCCL set-up (ncclCommInitRank)",
             [&] { TESSERA_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_)); });
}

std::unique_ptr<Communicator> NcclCommunicator::do_split(int color, int key) {
  std::unique_ptr<Communicator> bootstrap = bootstrap_->split(color, key);
  // The split's ranks keep their GPUs (its local ranks are not the job's).
  auto split = std::make_unique<NcclCommunicator>(static_cast<MpiCommunicator&>(*bootstrap),
                                                  timeout_s_, "cuda:" + std::to_string(device_));
  split->owned_bootstrap_ = std::move(bootstrap);
  return split;
}

NcclCommunicator::~NcclCommunicator() {
  if (!comm_) return;
  if (failed_) {
    ncclCommAbort(comm_);
  } else {
    ncclCommDestroy(comm_);
  }
}

void NcclCommunicator::check_async_error(const std::string& what) {
  ncclResult_t async = ncclSuccess;
  TESSERA_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
  if (async != ncclSuccess && async != ncclInProgress) {
    failed_ = true;
    TESSERA_FAIL(Nccl, what, " failed: ", ncclGetErrorString(async), " (",
                 ncclGetLastError(comm_), ")");
  }
}

void NcclCommunicator::wait_for(const void* event, const std::string& what) {
  const auto& done = *static_cast<const cuda::Event*>(event);
  const bool forever = timeout_s_ <= 0.0;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(forever ? 0.0 : std::min(timeout_s_, 1e9)));
  while (!done.done()) {
    check_async_error(what);
    bootstrap_->check_notices(what);  // another rank ends the job
    if (!forever && Clock::now() > deadline) {
      failed_ = true;
      TESSERA_FAIL(Timeout, what, " did not complete within ", timeout_s_,
                   " s (a peer did not take part; the communicator must be aborted)");
    }
    std::this_thread::yield();
  }
}

void NcclCommunicator::start() {
  if (pending_.empty()) return;
  TESSERA_CUDA_CHECK(cudaSetDevice(device_));
  std::vector<std::shared_ptr<detail::NcclPending>> ops;
  ops.swap(pending_);
  order_after_compute();
  cudaStream_t stream = cuda::comm_stream();
  TESSERA_NCCL_CHECK(ncclGroupStart());
  for (const auto& op : ops) {
    if (op->kind == detail::NcclPending::Kind::Send) {
      TESSERA_NCCL_CHECK(ncclSend(op->device_ptr, op->bytes, ncclUint8, op->peer, comm_, stream));
    } else {
      TESSERA_NCCL_CHECK(ncclRecv(op->device_ptr, op->bytes, ncclUint8, op->peer, comm_, stream));
    }
  }
  TESSERA_NCCL_CHECK(ncclGroupEnd());
  auto done = std::make_shared<cuda::Event>();
  done->record(stream);
  for (const auto& op : ops) op->done = done;
}

std::unique_ptr<Request> NcclCommunicator::do_isend(std::span<const std::byte> buffer, int peer,
                                                    int) {
  if (buffer.empty()) return std::make_unique<NcclRequest>(this, nullptr);
  auto op = std::make_shared<detail::NcclPending>();
  op->kind = detail::NcclPending::Kind::Send;
  op->peer = peer;
  op->bytes = buffer.size();
  if (cuda::is_device_memory(buffer.data())) {
    op->device_ptr = const_cast<std::byte*>(buffer.data());
  } else {  // copied now: the caller may reuse its host buffer only after completion anyway
    TESSERA_CUDA_CHECK(cudaSetDevice(device_));
    op->staging = cuda::DeviceBuffer(buffer.size());
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(op->staging.get(), buffer.data(), buffer.size(),
                                       cudaMemcpyHostToDevice, cuda::comm_stream()));
    op->device_ptr = op->staging.get();
  }
  pending_.push_back(op);
  return std::make_unique<NcclRequest>(this, std::move(op));
}

std::unique_ptr<Request> NcclCommunicator::do_irecv(std::span<std::byte> buffer, int peer, int) {
  if (buffer.empty()) return std::make_unique<NcclRequest>(this, nullptr);
  auto op = std::make_shared<detail::NcclPending>();
  op->kind = detail::NcclPending::Kind::Receive;
  op->peer = peer;
  op->bytes = buffer.size();
  if (cuda::is_device_memory(buffer.data())) {
    op->device_ptr = buffer.data();
  } else {
    TESSERA_CUDA_CHECK(cudaSetDevice(device_));
    op->staging = cuda::DeviceBuffer(buffer.size());
    op->device_ptr = op->staging.get();
    op->host_receive = buffer.data();
  }
  pending_.push_back(op);
  return std::make_unique<NcclRequest>(this, std::move(op));
}

// One collective on the communication stream: host data staged through a device buffer, the
// wait bounded by the timeout, the result copied back to the host only once it is complete.
template <class T>
void NcclCommunicator::all_reduce(std::span<T> values, ncclDataType_t type, ncclRedOp_t op,
                                  const char* what) {
  if (values.empty()) return;
  start();  // point-to-point posted earlier goes first, in posting order on every rank
  TESSERA_CUDA_CHECK(cudaSetDevice(device_));
  const bool on_device = cuda::is_device_memory(values.data());
  cuda::DeviceBuffer staging;
  T* data = values.data();
  cudaStream_t stream = cuda::comm_stream();
  if (!on_device) {
    staging = cuda::DeviceBuffer(values.size_bytes());
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(staging.get(), values.data(), values.size_bytes(),
                                       cudaMemcpyHostToDevice, stream));
    data = staging.as<T>();
  }
  order_after_compute();
  TESSERA_NCCL_CHECK(ncclAllReduce(data, data, values.size(), type, op, comm_, stream));
  cuda::Event done;
  done.record(stream);
  wait_for(&done, detail::concat(what, " of ", values.size(), " values"));
  if (!on_device) {
    TESSERA_CUDA_CHECK(cudaMemcpy(values.data(), data, values.size_bytes(),
                                  cudaMemcpyDeviceToHost));
  }
}

void NcclCommunicator::do_all_reduce_sum(std::span<float> values) {
  all_reduce(values, ncclFloat32, ncclSum, "all_reduce_sum");
}
void NcclCommunicator::do_all_reduce_sum(std::span<double> values) {
  all_reduce(values, ncclFloat64, ncclSum, "all_reduce_sum");
}
void NcclCommunicator::do_all_reduce_max(std::span<std::int64_t> values) {
  all_reduce(values, ncclInt64, ncclMax, "all_reduce_max");
}

void NcclCommunicator::do_broadcast(std::span<std::byte> buffer, int root) {
  if (buffer.empty()) return;
  start();
  TESSERA_CUDA_CHECK(cudaSetDevice(device_));
  const bool on_device = cuda::is_device_memory(buffer.data());
  cuda::DeviceBuffer staging;
  void* data = buffer.data();
  cudaStream_t stream = cuda::comm_stream();
  if (!on_device) {
    staging = cuda::DeviceBuffer(buffer.size());
    if (rank_ == root) {
      TESSERA_CUDA_CHECK(cudaMemcpyAsync(staging.get(), buffer.data(), buffer.size(),
                                         cudaMemcpyHostToDevice, stream));
    }
    data = staging.get();
  }
  order_after_compute();
  TESSERA_NCCL_CHECK(ncclBroadcast(data, data, buffer.size(), ncclUint8, root, comm_, stream));
  cuda::Event done;
  done.record(stream);
  wait_for(&done, detail::concat("broadcast of ", buffer.size(), " bytes from rank ", root));
  if (!on_device && rank_ != root) {
    TESSERA_CUDA_CHECK(cudaMemcpy(buffer.data(), data, buffer.size(), cudaMemcpyDeviceToHost));
  }
}

void NcclCommunicator::barrier() {
  std::int64_t token = 0;
  do_all_reduce_max(std::span<std::int64_t>(&token, 1));
}

void NcclCommunicator::abort(int code) {
  if (comm_) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  bootstrap_->abort(code);
}

}  // namespace tessera
