// SPDX-License-Identifier: Apache-2.0
// Which GPU a rank binds (comm/nccl_communicator.cc), as pure functions of what the rank asked
// for (--device cuda or cuda:i), where it stands on its node (LaunchEnv's local rank) and how
// many devices it sees, so that the rules have tests without a GPU:
//   --device cuda     local rank modulo the visible devices. Both ways clusters launch work:
//                     one GPU per task (srun --gpus-per-task=1 --gpu-bind=single:1: every
//                     task sees its own GPU as device 0) and every GPU visible to every task
//                     (local rank i binds device i).
//   --device cuda:i   device i on every rank, refused past the visible devices.
// NCCL needs one physical GPU per rank: the ranks' device identities (UUIDs) are gathered and
// two ranks on one GPU are refused, naming both and what to change.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "comm/communicator.h"

namespace tessera {

// -1 for "cuda" (automatic), i for "cuda:i"; InvalidArgument for anything else.
int requested_gpu(std::string_view device);

// The device index this rank binds (see above). `visible` is the rank's device count and
// `visible_list` the CUDA_VISIBLE_DEVICES it runs under (null: unset), for the messages.
// Throws Cuda when no device is visible and InvalidArgument when cuda:i is not one of them.
int choose_gpu(int requested, int local_rank, int visible, const char* visible_list);

// The first two ranks (in rank order) whose GPU identities are equal, if any.
std::optional<std::pair<int, int>> first_shared_gpu(std::span<const std::string> identities);

// The refusal of two ranks on one GPU under NCCL (InvalidArgument), naming the ranks, the GPU
// and the way out for the device string that was asked for.
[[noreturn]] void refuse_shared_gpu(std::pair<int, int> ranks, const std::string& identity,
                                    std::string_view device);

// How many ranks (`rank` included) have the GPU identity of `rank`.
int ranks_on_gpu(std::span<const std::string> identities, int rank);

// Collective over comm: how many ranks (this one included) run on this rank's GPU, from every
// rank's GPU identity (--gpu-comm mpi lets several share one: they share its memory too).
int ranks_sharing_gpu(Communicator& comm, const std::string& identity);

// Collective over comm: gathers every rank's GPU identity and, when two ranks share one, throws
// AgreedError on every rank (refuse_shared_gpu's message, from the later of the two).
void require_one_gpu_per_rank(Communicator& comm, const std::string& identity,
                              std::string_view device);

}  // namespace tessera
