// SPDX-License-Identifier: Apache-2.0
// StagedCommunicator: GPU buffers staged through host memory over an MPI communicator split
// from the job's (comm/staged_communicator.h).
#include "comm/staged_communicator.h"

#include <vector>

#include "core/cuda/runtime.h"

namespace tessera {
namespace {

// A message whose GPU buffer is staged: the host copy lives as long as the MPI request; a
// receive is copied up to the GPU once, when it completes.
class StagedRequest final : public Request {
 public:
  StagedRequest(std::shared_ptr<const StagingCopies> copies, std::vector<std::byte> host,
                std::byte* device_destination)
      : copies_(std::move(copies)),
        host_(std::move(host)),
        device_destination_(device_destination) {}
  void start(std::unique_ptr<Request> request) { request_ = std::move(request); }
  std::span<std::byte> host() { return host_; }

  void wait() override {
    request_->wait();
    finish();
  }
  bool test() override {
    if (!request_->test()) return false;
    finish();
    return true;
  }

 private:
  void finish() {
    if (device_destination_ == nullptr) return;
    copies_->upload(device_destination_, host_.data(), host_.size());
    device_destination_ = nullptr;
  }

  std::shared_ptr<const StagingCopies> copies_;
  std::vector<std::byte> host_;
  std::byte* device_destination_;  // a staged receive's GPU buffer until copied up, else null
  std::unique_ptr<Request> request_;
};

}  // namespace

StagingCopies cuda_staging() {
  return {
      [](const void* ptr) { return cuda::is_device_memory(ptr); },
      [](void* host, const void* device, std::size_t bytes) {
        cuda::download(host, device, bytes);
      },
      [](void* device, const void* host, std::size_t bytes) { cuda::upload(device, host, bytes); }};
}

StagedCommunicator::StagedCommunicator(MpiCommunicator& job, StagingCopies copies)
    : StagedCommunicator(job, job.split(0, job.rank()), std::move(copies)) {}

StagedCommunicator::StagedCommunicator(MpiCommunicator& job, std::unique_ptr<Communicator> mpi,
                                       StagingCopies copies)
    : job_(&job),
      copies_(std::make_shared<const StagingCopies>(std::move(copies))),
      mpi_(std::move(mpi)) {
  count_traffic_in(job);
  mpi_->count_traffic_in(uncounted_);
  mpi_->set_timeout(job.timeout());
}

template <class T, class Op>
void StagedCommunicator::staged(std::span<T> values, bool download, Op&& op) {
  if (values.empty() || !copies_->is_device(values.data())) {
    op(values);
    return;
  }
  std::vector<T> host(values.size());
  if (download) copies_->download(host.data(), values.data(), values.size_bytes());
  op(std::span<T>(host));
  copies_->upload(values.data(), host.data(), values.size_bytes());
}

void StagedCommunicator::do_all_reduce_sum(std::span<float> values) {
  staged(values, true,
         [&](std::span<float> v) { mpi_->all_reduce_sum(v, TrafficCategory::AllReduce); });
}

void StagedCommunicator::do_all_reduce_sum(std::span<double> values) {
  staged(values, true,
         [&](std::span<double> v) { mpi_->all_reduce_sum(v, TrafficCategory::AllReduce); });
}

void StagedCommunicator::do_all_reduce_max(std::span<std::int64_t> values) {
  staged(values, true, [&](std::span<std::int64_t> v) { mpi_->all_reduce_max(v); });
}

void StagedCommunicator::do_broadcast(std::span<std::byte> buffer, int root) {
  // Only the root's bytes matter: the others receive into their copy.
  staged(buffer, rank() == root,
         [&](std::span<std::byte> b) { mpi_->broadcast(b, root, TrafficCategory::Setup); });
}

std::unique_ptr<Request> StagedCommunicator::do_isend(std::span<const std::byte> buffer, int peer,
                                                      int tag) {
  if (buffer.empty() || !copies_->is_device(buffer.data()))
    return mpi_->isend(buffer, peer, tag, TrafficCategory::Setup);
  auto request =
      std::make_unique<StagedRequest>(copies_, std::vector<std::byte>(buffer.size()), nullptr);
  copies_->download(request->host().data(), buffer.data(), buffer.size());
  request->start(mpi_->isend(request->host(), peer, tag, TrafficCategory::Setup));
  return request;
}

std::unique_ptr<Request> StagedCommunicator::do_irecv(std::span<std::byte> buffer, int peer,
                                                      int tag) {
  if (buffer.empty() || !copies_->is_device(buffer.data())) return mpi_->irecv(buffer, peer, tag);
  auto request = std::make_unique<StagedRequest>(copies_, std::vector<std::byte>(buffer.size()),
                                                 buffer.data());
  request->start(mpi_->irecv(request->host(), peer, tag));
  return request;
}

std::unique_ptr<Communicator> StagedCommunicator::do_split(int color, int key) {
  return std::unique_ptr<Communicator>(
      new StagedCommunicator(*job_, mpi_->split(color, key), *copies_));
}

}  // namespace tessera
