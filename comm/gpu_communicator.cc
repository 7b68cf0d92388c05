// SPDX-License-Identifier: Apache-2.0
// make_gpu_communicator: an NcclCommunicator in builds with NCCL, a clear refusal otherwise.
#include "comm/gpu_communicator.h"

#include "comm/mpi_communicator.h"
#include "core/error.h"
#ifdef TESSERA_HAVE_NCCL
#include "comm/nccl_communicator.h"
#endif

namespace tessera {

std::unique_ptr<Communicator> make_gpu_communicator(Communicator& job, const std::string& device,
                                                    int* device_index) {
  auto* mpi = dynamic_cast<MpiCommunicator*>(&job);
  TESSERA_CHECK(mpi != nullptr, InvalidArgument,
                "GPU ranks bootstrap NCCL over MPI; this job's communicator is not MPI");
#ifdef TESSERA_HAVE_NCCL
  auto nccl = std::make_unique<NcclCommunicator>(*mpi, job.timeout(), device);
  nccl->count_traffic_in(job);
  if (device_index != nullptr) *device_index = nccl->device();
  return nccl;
#else
  (void)device;
  (void)device_index;
  TESSERA_FAIL(InvalidArgument, "this build of Tessera has no NCCL communicator (configure with "
                                "TESSERA_CUDA=ON where NCCL is installed)");
#endif
}

}  // namespace tessera
