// SPDX-License-Identifier: Apache-2.0
// A 64-bit content hash for fingerprints (datasets, partition plans, halo plans): word-wise
// FNV-1a-style, 8 bytes per step, then a final avalanche (the splitmix64 finaliser). Not
// cryptographic: it tells honest mix-ups apart (another dataset, another partitioning).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace tessera {

class Hasher {
 public:
  void add_word(std::uint64_t word) { state_ = (state_ ^ word) * kPrime; }
  void add_bytes(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    std::size_t words = bytes / 8;
    for (std::size_t i = 0; i < words; ++i) {
      std::uint64_t word;
      std::memcpy(&word, p + 8 * i, 8);
      add_word(word);
    }
    std::uint64_t tail = 0;
    if (bytes % 8) std::memcpy(&tail, p + 8 * words, bytes % 8);
    add_word(tail ^ (static_cast<std::uint64_t>(bytes % 8) << 56));
  }
  // A named section: tag and length first, so that arrays cannot shift into one another.
  template <class T>
  void add_section(std::uint64_t tag, std::span<const T> values) {
    add_word(tag);
    add_word(values.size());
    add_bytes(values.data(), values.size_bytes());
  }
  std::uint64_t finish() const {
    std::uint64_t x = state_;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }

 private:
  static constexpr std::uint64_t kPrime = 0x100000001B3ull;
  std::uint64_t state_ = 0xCBF29CE484222325ull;
};

}  // namespace tessera
