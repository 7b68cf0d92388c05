// SPDX-License-Identifier: Apache-2.0
// StagedCommunicator: the Communicator of GPU ranks over MPI (--gpu-comm mpi, built only with
// TESSERA_CUDA), for ranks that share a GPU (2-4 ranks on one GPU, so that every multi-rank GPU
// path runs on a single GPU) and for clusters without NCCL. A buffer in GPU memory is staged
// through host memory: a send is copied down after the compute stream's queued work (the
// kernels that produced it) and sent from the copy; a receive lands in host memory and is
// copied up, queued on the compute stream, when its wait or test completes; a reduction or
// broadcast is copied down, done over MPI and copied back. Host buffers go to MPI as they are.
// Messages keep MPI's tags and matching, and every wait keeps MPI's deadline (--comm-timeout).
// Its MPI communicator is split from the job's, so its messages never match the job's own.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"

namespace tessera {

// How GPU memory is told apart from host memory and copied between them: the CUDA runtime's
// (cuda_staging()), or a stand-in that lets the tests check the staging on a CPU.
struct StagingCopies {
  std::function<bool(const void*)> is_device;
  // Device to host after the compute stream's queued work; returns once the bytes arrived.
  std::function<void(void* host, const void* device, std::size_t bytes)> download;
  // Host to device, queued on the compute stream (the source may be freed on return).
  std::function<void(void* device, const void* host, std::size_t bytes)> upload;
};
StagingCopies cuda_staging();

class StagedCommunicator final : public Communicator {
 public:
  // Collective over `job`'s ranks (which must outlive this one). Traffic is counted in job's
  // counter, once per call, as on any other communicator.
  explicit StagedCommunicator(MpiCommunicator& job, StagingCopies copies = cuda_staging());

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  void barrier() override { mpi_->barrier(); }
  [[noreturn]] void abort(int code) override { job_->abort(code); }
  void set_timeout(double seconds) override { mpi_->set_timeout(seconds); }
  double timeout() const override { return mpi_->timeout(); }

 protected:
  void do_all_reduce_sum(std::span<float> values) override;
  void do_all_reduce_sum(std::span<double> values) override;
  void do_all_reduce_max(std::span<std::int64_t> values) override;
  void do_broadcast(std::span<std::byte> buffer, int root) override;
  std::unique_ptr<Request> do_isend(std::span<const std::byte> buffer, int peer, int tag) override;
  std::unique_ptr<Request> do_irecv(std::span<std::byte> buffer, int peer, int tag) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  StagedCommunicator(MpiCommunicator& job, std::unique_ptr<Communicator> mpi, StagingCopies copies);
  // Runs `op` on values in host memory: values themselves, or a staged copy brought back after.
  template <class T, class Op>
  void staged(std::span<T> values, bool download, Op&& op);

  MpiCommunicator* job_;
  std::shared_ptr<const StagingCopies> copies_;  // shared with the requests
  std::unique_ptr<Communicator> mpi_;
  // Where mpi_ counts: the bytes were already counted by this communicator's public call.
  TrafficCounter uncounted_;
};

}  // namespace tessera
