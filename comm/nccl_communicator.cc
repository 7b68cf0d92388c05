// SPDX-License-Identifier: Apache-2.0
// NcclCommunicator: MPI bootstrap (agreed GPU binding, unique id broadcast, a non-blocking
// communicator: ncclCommInitRankConfig with blocking = 0), collectives and grouped
// point-to-point on the communication stream, host buffers staged through pooled device buffers
// (after the compute stream's queued work, so that a recycled block is not overwritten), and
// waits that poll events and ncclCommGetAsyncError against a deadline. Every NCCL call that
// answers ncclInProgress (creation, a group's end, a collective) is polled until NCCL has
// enqueued it, against the same deadline, so no call blocks without a timeout; a timeout or a
// failure marks the communicator failed (it is aborted, not destroyed). Receives into host
// memory are copied back only after their group completed.
#include "comm/nccl_communicator.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "comm/agreement.h"
#include "comm/gpu_binding.h"
#include "comm/launch_env.h"
#include "comm/stall_injection.h"
#include "comm/wait.h"
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
    require_issued();
    comm_->check_async_error(describe());
    if (!op_->done->done()) return false;
    finish();
    return true;
  }

  void wait() override {
    if (!op_) return;
    comm_->start();
    require_issued();
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
  // A group that failed to issue leaves its operations without an event: an error, not a wait.
  void require_issued() const {
    TESSERA_CHECK(op_->done != nullptr, Nccl, describe(),
                  " was never issued: its NCCL group failed (the communicator must be aborted)");
  }
  std::string describe() const {
    return detail::concat(op_->kind == detail::NcclPending::Kind::Send ? "NCCL send to rank "
                                                                       : "NCCL receive from rank ",
                          op_->peer, " (", op_->bytes, " bytes)");
  }

  NcclCommunicator* comm_;
  std::shared_ptr<detail::NcclPending> op_;  // null: a zero-byte message, complete at once
};

int bind_local_gpu(const LaunchEnv& env, const std::string& device, const std::string& lead,
                   const char* user) {
  TESSERA_CHECK(cuda::cuda_available(), Cuda, lead, ", but no usable CUDA GPU was found (",
                cuda::unavailable_reason(), ")");
  const int index = choose_gpu(requested_gpu(device), env.local_rank, cuda::device_count(),
                               std::getenv("CUDA_VISIBLE_DEVICES"));
  cuda::require_device(index, user);
  return index;
}

NcclCommunicator::NcclCommunicator(MpiCommunicator& bootstrap, double timeout_s,
                                   std::string device)
    : bootstrap_(&bootstrap), rank_(bootstrap.rank()), size_(bootstrap.size()),
      device_text_(std::move(device)), timeout_s_(timeout_s) {
  const LaunchEnv env =
      detect_launch_env(bootstrap, bootstrap.rank_on_node(), bootstrap.ranks_on_node());
  ncclUniqueId id{};
  std::string identity;
  run_agreed(bootstrap, "NCCL set-up (GPU binding)", [&] {
    device_ = bind_local_gpu(env, device_text_, "NcclCommunicator needs one GPU per rank",
                             "NcclCommunicator");
    identity = cuda::device_identity(device_);
    (void)cuda::comm_stream();
    if (rank_ == 0) TESSERA_NCCL_CHECK(ncclGetUniqueId(&id));
  });
  require_one_gpu_per_rank(bootstrap, identity, device_text_);
  bootstrap.broadcast(std::as_writable_bytes(std::span<ncclUniqueId>(&id, 1)), 0,
                      TrafficCategory::Setup);
  // A non-blocking communicator: its creation, and later every group end and collective, is
  // polled against the timeout instead of blocking inside NCCL.
  run_agreed(bootstrap, "NCCL set-up (ncclCommInitRank)", [&] {
    stall_if_injected(rank_, "creating the NCCL communicator");  // for the tests of deadlines
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    settle(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), "ncclCommInitRankConfig");
  });
}

void NcclCommunicator::settle(ncclResult_t rc, const std::string& what) {
  if (rc != ncclSuccess && rc != ncclInProgress) {
    failed_ = true;
    TESSERA_FAIL(Nccl, what, " failed: ", ncclGetErrorString(rc), " (ncclResult ",
                 static_cast<int>(rc), ")");
  }
  if (rc == ncclSuccess || comm_ == nullptr) return;
  ncclResult_t state = ncclInProgress;
  try {
    poll_until(
        what, timeout_s_, "a peer did not take part; the communicator must be aborted",
        [&] {
          TESSERA_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
          return state != ncclInProgress;
        },
        [&] { bootstrap_->check_notices(what); });
  } catch (...) {
    failed_ = true;
    throw;
  }
  check_async_error(what);
}

std::unique_ptr<Communicator> NcclCommunicator::do_split(int color, int key) {
  std::unique_ptr<Communicator> bootstrap = bootstrap_->split(color, key);
  // The split's ranks keep their GPUs (its local ranks are not the job's).
  auto split = std::make_unique<NcclCommunicator>(static_cast<MpiCommunicator&>(*bootstrap),
                                                  timeout_s_, "cuda:" + std::to_string(device_));
  split->owned_bootstrap_ = std::move(bootstrap);
  return split;
}

// A healthy communicator is finalised (its issued work flushed, polled against the timeout, as
// a non-blocking communicator must be) and then destroyed; a failed one, or one that does not
// quiesce in time, is aborted, so that no destructor waits on a peer that is gone.
NcclCommunicator::~NcclCommunicator() {
  if (!comm_) return;
  if (!failed_) {
    const ncclResult_t finalizing = ncclCommFinalize(comm_);
    ncclResult_t state = finalizing;
    const Deadline deadline(timeout_s_);
    WaitPacer pacer;
    while (state == ncclInProgress && !deadline.passed()) {
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
      pacer.pause();
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm_);
      return;
    }
  }
  ncclCommAbort(comm_);
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
  try {
    poll_until(
        what, timeout_s_, "a peer did not take part; the communicator must be aborted",
        [&] { return done.done(); },
        [&] {
          check_async_error(what);
          bootstrap_->check_notices(what);  // another rank ends the job
        });
  } catch (...) {  // a timeout, NCCL's error or another rank ending the job: abort, not destroy
    failed_ = true;
    throw;
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
  ncclResult_t failed = ncclSuccess;  // the first call that failed; the group is closed anyway
  for (const auto& op : ops) {
    const ncclResult_t rc =
        op->kind == detail::NcclPending::Kind::Send
            ? ncclSend(op->device_ptr, op->bytes, ncclUint8, op->peer, comm_, stream)
            : ncclRecv(op->device_ptr, op->bytes, ncclUint8, op->peer, comm_, stream);
    if (rc != ncclSuccess && rc != ncclInProgress) {
      failed = rc;
      break;
    }
  }
  const ncclResult_t ended = ncclGroupEnd();
  if (failed != ncclSuccess) {
    failed_ = true;  // the operations keep no event: their waits report the failure
    TESSERA_FAIL(Nccl, "posting ", ops.size(),
                 " NCCL sends and receives failed: ", ncclGetErrorString(failed), " (ncclResult ",
                 static_cast<int>(failed), ")");
  }
  settle(ended, detail::concat("ncclGroupEnd of ", ops.size(), " sends and receives"));
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
    order_after_compute();  // the pool may have just recycled the block from compute work
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
  order_after_compute();  // before the staging copy: the pool may have just recycled its block
  if (!on_device) {
    staging = cuda::DeviceBuffer(values.size_bytes());
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(staging.get(), values.data(), values.size_bytes(),
                                       cudaMemcpyHostToDevice, stream));
    data = staging.as<T>();
  }
  settle(ncclAllReduce(data, data, values.size(), type, op, comm_, stream), what);
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
  order_after_compute();  // before the staging copy: the pool may have just recycled its block
  if (!on_device) {
    staging = cuda::DeviceBuffer(buffer.size());
    if (rank_ == root) {
      TESSERA_CUDA_CHECK(cudaMemcpyAsync(staging.get(), buffer.data(), buffer.size(),
                                         cudaMemcpyHostToDevice, stream));
    }
    data = staging.get();
  }
  settle(ncclBroadcast(data, data, buffer.size(), ncclUint8, root, comm_, stream), "ncclBroadcast");
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
