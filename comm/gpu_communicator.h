// SPDX-License-Identifier: Apache-2.0
// The communicator of GPU ranks: NCCL over the job's MPI ranks, so that halos and gradients move
// between GPUs on the communication stream. Kept apart from nccl_communicator.h so that callers
// need neither NCCL nor a CUDA build to ask for one.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"

namespace tessera {

// An NCCL communicator over the ranks of `job` (an MpiCommunicator, which bootstraps it and must
// outlive it). Each rank binds the GPU that `device` ("cuda" or "cuda:i") gives it under the
// rules of comm/gpu_binding.h; *device_index receives it. Bytes sent through it are counted in
// job's traffic counter. Collective over job. Throws InvalidArgument in a build without NCCL or
// when job is not an MPI communicator, and an agreed error when a rank has no GPU, asks for one
// it does not see, or would share one with another rank.
std::unique_ptr<Communicator> make_gpu_communicator(Communicator& job, const std::string& device,
                                                    int* device_index);

}  // namespace tessera
