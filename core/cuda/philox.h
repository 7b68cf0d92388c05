// SPDX-License-Identifier: Apache-2.0
// Philox4x32-10 exactly as CounterRng::words (core/rng.h), callable from host and device
// code, plus the dropout decision built on it. GPU kernels use these so that a GPU dropout mask
// is bit-identical to the CPU's; tests/cuda checks them against CounterRng on the host.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TESSERA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TESSERA_HOST_DEVICE inline
#endif

namespace tessera::cuda {

struct PhiloxWords {
  std::uint32_t w[4];
};

// Words of block `block` for item `item` under the 64-bit key (CounterRng::key()).
TESSERA_HOST_DEVICE PhiloxWords philox_words(std::uint64_t key, std::uint64_t item,
                                            std::uint32_t block) {
  std::uint32_t c0 = block, c1 = static_cast<std::uint32_t>(item),
                c2 = static_cast<std::uint32_t>(item >> 32), c3 = 0x7E55E7A1u;
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0;
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(p1);
    c3 = static_cast<std::uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// The CPU's dropout decision for one value: kept when to_unit_float(word) >= p. A kept value is
// multiplied by `scale` (the caller passes the host's 1 / (1 - p), so both sides use the same
// float); a dropped one becomes +0 whatever it was (NaN and inf included), as on the CPU.
TESSERA_HOST_DEVICE float dropout_value(float value, std::uint32_t word, float p, float scale) {
  const float unit = static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
  return unit >= p ? value * scale : 0.0f;
}

}  // namespace tessera::cuda
