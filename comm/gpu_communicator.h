// SPDX-License-Identifier: Apache-2.0
// The communicator of GPU ranks, by --gpu-comm: nccl (the default: NCCL over the job's MPI
// ranks, each rank on a GPU of its own, halos and gradients moved between GPUs on the
// communication stream) or mpi (comm/staged_communicator.h: GPU buffers staged through host
// memory over MPI, so that ranks may share a GPU). Kept apart from both implementations so that
// callers need neither NCCL nor a CUDA build to ask for one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace tessera {

// The values of --gpu-comm: nccl, mpi.
std::vector<std::string> gpu_comm_names();

// A communicator of GPU ranks over the ranks of `job` (an MpiCommunicator, which bootstraps it
// and must outlive it). `transport` is one of gpu_comm_names(). Each rank binds the GPU that
// `device` ("cuda" or "cuda:i") gives it under the rules of comm/gpu_binding.h; *device_index
// receives it, and *ranks_on_gpu (when given) how many ranks of the job run on that GPU, this one
// included (1 under nccl). Under nccl two ranks on one GPU are refused; under mpi they may share
// it. Bytes sent through it are counted in job's traffic counter. Collective over job. Throws
// InvalidArgument in a build without the CUDA backend (NCCL) or when job is not an MPI
// communicator, and an agreed error when a rank has no GPU or asks for one it does not see.
std::unique_ptr<Communicator> make_gpu_communicator(Communicator& job, const std::string& device,
                                                    const std::string& transport, int* device_index,
                                                    int* ranks_on_gpu = nullptr);

}  // namespace tessera
