// SPDX-License-Identifier: Apache-2.0
// GPU binding rules (comm/gpu_binding.h).
#include "comm/gpu_binding.h"

#include <algorithm>
#include <map>
#include <vector>

#include "comm/agreement.h"
#include "comm/launch_env.h"
#include "core/error.h"

namespace tessera {

int requested_gpu(std::string_view device) {
  if (device == "cuda") return -1;
  const std::string_view digits = device.substr(device.rfind("cuda:", 0) == 0 ? 5 : 0);
  TESSERA_CHECK(device.rfind("cuda:", 0) == 0 && !digits.empty() && digits.size() <= 4 &&
                    digits.find_first_not_of("0123456789") == std::string_view::npos,
                InvalidArgument, "--device ", std::string(device),
                ": expected cuda or cuda:<index> for a GPU rank");
  return std::stoi(std::string(digits));
}

int choose_gpu(int requested, int local_rank, int visible, const char* visible_list) {
  const std::string seen =
      visible_list == nullptr ? std::string("CUDA_VISIBLE_DEVICES unset")
                              : std::string("CUDA_VISIBLE_DEVICES=") + visible_list;
  TESSERA_CHECK(visible > 0, Cuda, "no CUDA GPU is visible to this rank (", seen,
                "); use --device cpu, or ask the scheduler for GPUs (e.g. srun --gpus-per-task=1)");
  TESSERA_CHECK(local_rank >= 0, Internal, "choose_gpu: local rank ", local_rank);
  if (requested < 0) return local_rank % visible;
  TESSERA_CHECK(requested < visible, InvalidArgument, "--device cuda:", requested,
                ": this rank sees ", visible, visible == 1 ? " GPU" : " GPUs", " (", seen,
                ", so cuda:0 to cuda:", visible - 1,
                "); with one GPU per task every rank's GPU is cuda:0, or use --device cuda "
                "(local rank modulo the visible GPUs)");
  return requested;
}

std::optional<std::pair<int, int>> first_shared_gpu(std::span<const std::string> identities) {
  std::map<std::string, int> first;
  for (int r = 0; r < static_cast<int>(identities.size()); ++r) {
    const auto [at, fresh] = first.emplace(identities[static_cast<std::size_t>(r)], r);
    if (!fresh) return std::make_pair(at->second, r);
  }
  return std::nullopt;
}

void refuse_shared_gpu(std::pair<int, int> ranks, const std::string& identity,
                       std::string_view device) {
  const std::string way_out =
      device == "cuda"
          ? "give every rank a GPU of its own: as many GPUs as ranks per node (srun "
            "--gpus-per-task=1, or --gpus-per-node equal to --ntasks-per-node)"
          : "--device " + std::string(device) +
                " puts every rank of a node on that GPU; use --device cuda (local rank modulo "
                "the visible GPUs) with a GPU per rank";
  TESSERA_FAIL(InvalidArgument, "ranks ", ranks.first, " and ", ranks.second, " would share GPU ",
               identity, ", and NCCL needs one GPU per rank: ", way_out,
               "; or let ranks share a GPU with --gpu-comm mpi (messages staged through host "
               "memory over MPI)");
}

namespace {

constexpr std::size_t kIdentitySlot = 48;  // "GPU-" and 32 hex digits fit

}  // namespace

int ranks_on_gpu(std::span<const std::string> identities, int rank) {
  const std::string& mine = identities[static_cast<std::size_t>(rank)];
  return static_cast<int>(std::count(identities.begin(), identities.end(), mine));
}

int ranks_sharing_gpu(Communicator& comm, const std::string& identity) {
  const std::vector<std::string> identities = all_gather_strings(comm, identity, kIdentitySlot);
  return ranks_on_gpu(identities, comm.rank());
}

void require_one_gpu_per_rank(Communicator& comm, const std::string& identity,
                              std::string_view device) {
  const std::vector<std::string> identities = all_gather_strings(comm, identity, kIdentitySlot);
  run_agreed(comm, "checking one GPU per rank", [&] {
    const auto shared = first_shared_gpu(identities);
    if (shared && shared->second == comm.rank())
      refuse_shared_gpu(*shared, identities[static_cast<std::size_t>(shared->first)], device);
  });
}

}  // namespace tessera
