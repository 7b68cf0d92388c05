// SPDX-License-Identifier: Apache-2.0
// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11): a pure function of a key
// and a counter, so a value depends only on what it is for, never on thread count, rank or
// partitioning. Callers key a stream by (seed, epoch, layer, purpose) and draw for
// (global node id, feature): e.g. dropout masks and stochastic rounding in message codecs.
#pragma once

#include <array>
#include <cstdint>

namespace tessera {

// What a stream of random numbers is used for; keeps e.g. dropout and codec noise independent.
enum class RngPurpose : std::uint32_t {
  Init = 1,
  Dropout = 2,
  CodecForward = 3,
  CodecBackward = 4,
  Synthetic = 5,
  AttentionDropout = 6,
};

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class CounterRng {
 public:
  CounterRng(std::uint64_t seed, std::uint64_t epoch, std::uint64_t layer, RngPurpose purpose)
      : key_(splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^ (layer << 8) ^
                        static_cast<std::uint64_t>(purpose))) {}

  // Four independent uniform 32-bit words for (item, block); e.g. item = global node id and
  // block = feature / 4, word = feature % 4.
  std::array<std::uint32_t, 4> words(std::uint64_t item, std::uint32_t block) const {
    std::uint32_t c0 = block, c1 = static_cast<std::uint32_t>(item),
                  c2 = static_cast<std::uint32_t>(item >> 32), c3 = 0x7E55E7A1u;
    std::uint32_t k0 = static_cast<std::uint32_t>(key_), k1 = static_cast<std::uint32_t>(key_ >> 32);
    for (int round = 0; round < 10; ++round) {
      std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0;
      std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c2;
      std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
      std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<std::uint32_t>(p1);
      c3 = static_cast<std::uint32_t>(p0);
      c0 = n0;
      c2 = n2;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return {c0, c1, c2, c3};
  }

  // Uniform float in [0, 1) for (item, index): 24 random bits.
  float uniform(std::uint64_t item, std::uint64_t index) const {
    std::uint32_t w = words(item, static_cast<std::uint32_t>(index >> 2))[index & 3];
    return static_cast<float>(w >> 8) * (1.0f / 16777216.0f);
  }

  std::uint64_t key() const { return key_; }

 private:
  std::uint64_t key_;
};

// Turns a 32-bit word into a float in [0, 1).
inline float to_unit_float(std::uint32_t w) { return static_cast<float>(w >> 8) * (1.0f / 16777216.0f); }

}  // namespace tessera
