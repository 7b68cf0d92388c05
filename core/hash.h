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
  // add_section(tag, values) for values that arrive in pieces: begin_section with the total
  // count, add_piece for each piece in order, end_section; the same state as one add_section.
  void begin_section(std::uint64_t tag, std::uint64_t count) {
    add_word(tag);
    add_word(count);
    pending_bytes_ = 0;
    section_bytes_ = 0;
  }
  template <class T>
  void add_piece(std::span<const T> values) {
    const auto* p = reinterpret_cast<const unsigned char*>(values.data());
    std::size_t bytes = values.size_bytes();
    section_bytes_ += bytes;
    while (bytes > 0 && (pending_bytes_ > 0 || bytes < 8)) {  // complete a pending word first
      pending_[pending_bytes_++] = *p++;
      --bytes;
      if (pending_bytes_ == 8) {
        std::uint64_t word;
        std::memcpy(&word, pending_, 8);
        add_word(word);
        pending_bytes_ = 0;
      }
    }
    for (; bytes >= 8; bytes -= 8, p += 8) {
      std::uint64_t word;
      std::memcpy(&word, p, 8);
      add_word(word);
    }
    for (; bytes > 0; --bytes) pending_[pending_bytes_++] = *p++;
  }
  void end_section() {
    std::uint64_t tail = 0;
    if (pending_bytes_) std::memcpy(&tail, pending_, pending_bytes_);
    add_word(tail ^ (static_cast<std::uint64_t>(section_bytes_ % 8) << 56));
    pending_bytes_ = 0;
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
  unsigned char pending_[8] = {};  // a section's bytes not yet a whole word
  std::size_t pending_bytes_ = 0;
  std::uint64_t section_bytes_ = 0;
};

}  // namespace tessera
