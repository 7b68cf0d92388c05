// SPDX-License-Identifier: Apache-2.0
// make_gpu_communicator: an NcclCommunicator or a StagedCommunicator in builds with the CUDA
// backend, a clear refusal otherwise.
#include "comm/gpu_communicator.h"

#include "comm/mpi_communicator.h"
#include "core/error.h"
#ifdef TESSERA_HAVE_NCCL
#include "comm/agreement.h"
#include "comm/gpu_binding.h"
#include "comm/launch_env.h"
#include "comm/nccl_communicator.h"
#include "comm/staged_communicator.h"
#include "core/cuda/runtime.h"
#endif

namespace tessera {

std::vector<std::string> gpu_comm_names() { return {"nccl", "mpi"}; }

#ifdef TESSERA_HAVE_NCCL
namespace {

// Binds this rank's GPU by the rules of comm/gpu_binding.h, agreed over the job (ranks may
// share a GPU: the staged communicator moves host copies).
int bind_shared_gpu(MpiCommunicator& job, const std::string& device) {
  const LaunchEnv env = detect_launch_env(job, job.rank_on_node(), job.ranks_on_node());
  int index = 0;
  run_agreed(job, "GPU binding (--gpu-comm mpi)", [&] {
    index = bind_local_gpu(env, device, "--device " + device + " needs a GPU",
                           "the staged GPU communicator");
  });
  return index;
}

}  // namespace
#endif

std::unique_ptr<Communicator> make_gpu_communicator(Communicator& job, const std::string& device,
                                                    const std::string& transport, int* device_index,
                                                    int* ranks_on_gpu) {
  TESSERA_CHECK(transport == "nccl" || transport == "mpi", InvalidArgument,
                "--gpu-comm: expected nccl or mpi, got '", transport, "'");
  auto* mpi = dynamic_cast<MpiCommunicator*>(&job);
  TESSERA_CHECK(mpi != nullptr, InvalidArgument,
                "GPU ranks bootstrap over MPI; this job's communicator is not MPI");
#ifdef TESSERA_HAVE_NCCL
  if (transport == "mpi") {
    const int index = bind_shared_gpu(*mpi, device);
    if (device_index != nullptr) *device_index = index;
    const int sharing = ranks_sharing_gpu(*mpi, cuda::device_identity(index));
    if (ranks_on_gpu != nullptr) *ranks_on_gpu = sharing;
    return std::make_unique<StagedCommunicator>(*mpi);
  }
  auto nccl = std::make_unique<NcclCommunicator>(*mpi, job.timeout(), device);
  nccl->count_traffic_in(job);
  if (device_index != nullptr) *device_index = nccl->device();
  if (ranks_on_gpu != nullptr) *ranks_on_gpu = 1;  // NcclCommunicator refuses a shared GPU
  return nccl;
#else
  (void)device;
  (void)device_index;
  (void)ranks_on_gpu;
  TESSERA_FAIL(InvalidArgument,
               "this build of Tessera has no GPU communicator (configure with "
               "TESSERA_CUDA=ON where CUDA and NCCL are installed)");
#endif
}

}  // namespace tessera
