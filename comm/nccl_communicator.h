// SPDX-License-Identifier: Apache-2.0
// NcclCommunicator: the Communicator over NCCL, for ranks that each own one GPU (built only with
// TESSERA_CUDA). Bootstrapped over MPI: rank 0 makes the NCCL unique id and broadcasts it, each
// rank binds its GPU by the rules of comm/gpu_binding.h (local rank modulo the visible devices,
// or --device cuda:i; SLURM_LOCALID under srun, else MPI's shared-memory split), and two ranks on
// one physical GPU are refused.
// Collectives run on the communication stream; isend/irecv are collected and issued as one
// NCCL group (ncclGroupStart, ncclSend/ncclRecv..., ncclGroupEnd) at the first wait, test,
// start() or collective after them, so a halo exchange posted before the inner-row SpMM runs
// on the communication stream while the SpMM runs on the compute stream. Every wait polls the
// operation's event and ncclCommGetAsyncError against the communicator's timeout. The
// communicator is non-blocking (ncclConfig_t::blocking = 0): its creation, group ends and
// collectives are polled until NCCL has enqueued them, against the same timeout.
//
// Buffers may be device memory (used in place; the communication stream first waits for the
// compute stream's queued work) or host memory (staged through device buffers). NCCL has no
// tags: messages between two ranks match in the order they were posted, so both sides must post
// them in the same order (the halo exchange does); zero-byte messages complete at once on both
// sides. Requests must not outlive their communicator.
#pragma once

#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"

namespace tessera {

namespace detail {
struct NcclPending;  // a posted, not yet issued point-to-point operation
}

struct LaunchEnv;  // comm/launch_env.h

// The GPU this rank binds by the rules of comm/gpu_binding.h (its local rank in `env`, `device`
// "cuda" or "cuda:i"), made current; throws Error(Cuda) "<lead>, but no usable CUDA GPU was
// found (...)" without one. `user` names the caller in require_device's errors. Used by both GPU
// communicators (NCCL, and the staged one of --gpu-comm mpi).
int bind_local_gpu(const LaunchEnv& env, const std::string& device, const std::string& lead,
                   const char* user);

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`'s ranks, which must stay alive as long as this communicator.
  // `device`: "cuda" or "cuda:i" (comm/gpu_binding.h). Throws AgreedError on every rank, naming
  // the rank and the reason, when a rank sees no GPU, asks for one it does not see, or would
  // share its GPU with another rank.
  explicit NcclCommunicator(MpiCommunicator& bootstrap, double timeout_s = 900.0,
                            std::string device = "cuda");
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // The GPU this rank uses.
  int device() const { return device_; }
  void barrier() override;
  // ncclCommAbort (so that no GPU kernel waits forever), then MPI_Abort through the bootstrap.
  [[noreturn]] void abort(int code) override;
  void set_timeout(double seconds) override { timeout_s_ = seconds; }
  double timeout() const override { return timeout_s_; }
  // Issues every posted isend/irecv now, as one NCCL group (no-op when none is pending).
  void start();
  ncclComm_t handle() const { return comm_; }

 protected:
  void do_all_reduce_sum(std::span<float> values) override;
  void do_all_reduce_sum(std::span<double> values) override;
  void do_all_reduce_max(std::span<std::int64_t> values) override;
  void do_broadcast(std::span<std::byte> buffer, int root) override;
  std::unique_ptr<Request> do_isend(std::span<const std::byte> buffer, int peer,
                                    int tag) override;
  std::unique_ptr<Request> do_irecv(std::span<std::byte> buffer, int peer, int tag) override;
  // A new NCCL communicator bootstrapped over the matching split of the MPI bootstrap (which it
  // owns): a fresh unique id per color.
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  friend class NcclRequest;
  template <class T>
  void all_reduce(std::span<T> values, ncclDataType_t type, ncclRedOp_t op, const char* what);
  // Waits for `event` (recorded on the communication stream) with the timeout, polling NCCL's
  // asynchronous error; `what` names the operation in errors.
  void wait_for(const void* event, const std::string& what);
  void check_async_error(const std::string& what);
  // Checks an NCCL call's result; ncclInProgress (a non-blocking communicator still enqueuing)
  // is polled through ncclCommGetAsyncError until done, against the timeout.
  void settle(ncclResult_t rc, const std::string& what);

  MpiCommunicator* bootstrap_;
  std::unique_ptr<Communicator> owned_bootstrap_;  // a split's MPI communicator
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  std::string device_text_;  // --device, for the splits
  double timeout_s_ = 900.0;
  bool failed_ = false;
  std::vector<std::shared_ptr<detail::NcclPending>> pending_;
};

// Checks an NCCL result; throws Error(Nccl) with NCCL's error string and the call.
#define TESSERA_NCCL_CHECK(call)                                                             \
  do {                                                                                       \
    const ncclResult_t tessera_nccl_rc_ = (call);                                            \
    if (tessera_nccl_rc_ != ncclSuccess) [[unlikely]] {                                      \
      TESSERA_FAIL(Nccl, #call, " failed: ", ncclGetErrorString(tessera_nccl_rc_),          \
                   " (ncclResult ", static_cast<int>(tessera_nccl_rc_), ")");                \
    }                                                                                        \
  } while (0)

}  // namespace tessera
