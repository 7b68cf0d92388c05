// SPDX-License-Identifier: Apache-2.0
// Launch helpers shared by the .cu files: grid sizes for element-wise and row-wise kernels.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"

namespace tessera::cuda::detail {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535LL * 32;  // grid-stride loops cover the rest

inline unsigned blocks_for(std::int64_t work) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1,
                                                        kMaxBlocks));
}

}  // namespace tessera::cuda::detail
