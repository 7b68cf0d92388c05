// SPDX-License-Identifier: Apache-2.0
// The content hash's sections given in pieces (what streaming writers hash) against the same
// sections given whole, for every way of cutting them, and sections that must differ.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/hash.h"

namespace tessera {
namespace {

template <class T>
std::uint64_t whole(const std::vector<T>& values) {
  Hasher h;
  h.add_word(42);
  h.add_section(3, std::span<const T>(values));
  h.add_word(7);
  return h.finish();
}

template <class T>
std::uint64_t in_pieces(const std::vector<T>& values, std::size_t first, std::size_t second) {
  Hasher h;
  h.add_word(42);
  h.begin_section(3, values.size());
  const std::span<const T> all(values);
  h.add_piece(all.subspan(0, first));
  h.add_piece(all.subspan(first, second - first));
  h.add_piece(all.subspan(second));
  h.end_section();
  h.add_word(7);
  return h.finish();
}

TEST(Hasher, SectionsInPiecesHashAsWholeSections) {
  for (std::size_t n : {0u, 1u, 2u, 3u, 5u, 8u, 17u}) {
    std::vector<std::int32_t> ints(n);
    std::vector<std::int64_t> longs(n);
    for (std::size_t i = 0; i < n; ++i) {
      ints[i] = static_cast<std::int32_t>(i * 2654435761u);
      longs[i] = static_cast<std::int64_t>(i * 0x9E3779B97F4A7C15ull);
    }
    for (std::size_t a = 0; a <= n; ++a) {
      for (std::size_t b = a; b <= n; ++b) {
        EXPECT_EQ(in_pieces(ints, a, b), whole(ints)) << n << " int32 cut at " << a << ", " << b;
        EXPECT_EQ(in_pieces(longs, a, b), whole(longs)) << n << " int64 cut at " << a << ", " << b;
      }
    }
  }
}

TEST(Hasher, ContentsAndLengthsChangeTheHash) {
  const std::vector<std::int32_t> a = {1, 2, 3}, b = {1, 2, 4}, c = {1, 2, 3, 0};
  EXPECT_NE(whole(a), whole(b));
  EXPECT_NE(whole(a), whole(c));  // a zero appended is another section
}

}  // namespace
}  // namespace tessera
