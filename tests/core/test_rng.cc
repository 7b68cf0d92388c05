// SPDX-License-Identifier: Apache-2.0
// Tests of CounterRng: a pure function of (key, item, block); distinct keys, purposes and
// epochs give distinct streams; uniform draws lie in [0, 1) with mean 1/2.
#include <gtest/gtest.h>

#include <bit>
#include <set>

#include "core/rng.h"

namespace tessera {
namespace {

TEST(CounterRng, WordsAreDeterministic) {
  const CounterRng a(42, 3, 1, RngPurpose::Dropout);
  const CounterRng b(42, 3, 1, RngPurpose::Dropout);
  EXPECT_EQ(a.key(), b.key());
  for (std::uint64_t item : {0ull, 1ull, 123456789ull, (1ull << 40) + 7}) {
    for (std::uint32_t block : {0u, 1u, 1000u})
      EXPECT_EQ(a.words(item, block), b.words(item, block));
  }
}

TEST(CounterRng, KeysDifferBySeedEpochLayerAndPurpose) {
  std::set<std::uint64_t> keys;
  for (std::uint64_t seed : {0ull, 1ull, 2ull}) {
    for (std::uint64_t epoch : {0ull, 1ull, 2ull}) {
      for (std::uint64_t layer : {0ull, 1ull, 2ull}) {
        for (RngPurpose purpose : {RngPurpose::Dropout, RngPurpose::CodecForward,
                                   RngPurpose::CodecBackward, RngPurpose::Init}) {
          keys.insert(CounterRng(seed, epoch, layer, purpose).key());
        }
      }
    }
  }
  EXPECT_EQ(keys.size(), 3u * 3u * 3u * 4u);
}

TEST(CounterRng, StreamsDifferByKeyItemAndBlock) {
  const CounterRng dropout(7, 0, 0, RngPurpose::Dropout);
  const CounterRng codec(7, 0, 0, RngPurpose::CodecForward);
  const CounterRng next_epoch(7, 1, 0, RngPurpose::Dropout);
  EXPECT_NE(dropout.words(5, 0), codec.words(5, 0));
  EXPECT_NE(dropout.words(5, 0), next_epoch.words(5, 0));
  EXPECT_NE(dropout.words(5, 0), dropout.words(6, 0));
  EXPECT_NE(dropout.words(5, 0), dropout.words(5, 1));
  // The high half of a 64-bit item id matters too.
  EXPECT_NE(dropout.words(5, 0), dropout.words(5 + (1ull << 32), 0));
}

TEST(CounterRng, UniformIsWordOfItsBlock) {
  const CounterRng rng(1, 2, 3, RngPurpose::Dropout);
  for (std::uint64_t f = 0; f < 37; ++f) {
    const auto words = rng.words(99, static_cast<std::uint32_t>(f / 4));
    EXPECT_EQ(rng.uniform(99, f), to_unit_float(words[f % 4])) << "f = " << f;
  }
}

TEST(CounterRng, UniformInRangeWithMeanHalf) {
  const CounterRng rng(2024, 0, 0, RngPurpose::Synthetic);
  constexpr int kDraws = 200000;
  double sum = 0.0;
  int below_tenth = 0;
  for (int i = 0; i < kDraws; ++i) {
    const float u =
        rng.uniform(static_cast<std::uint64_t>(i / 16), static_cast<std::uint64_t>(i % 16));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    below_tenth += u < 0.1f;
  }
  // Standard error of the mean of U(0, 1): 0.2887 / sqrt(2e5) = 6.5e-4; allow 5 of them.
  EXPECT_NEAR(sum / kDraws, 0.5, 5 * 6.5e-4);
  // Binomial(2e5, 0.1): standard deviation 134 draws; allow 5 of them.
  EXPECT_NEAR(below_tenth, 0.1 * kDraws, 5 * 134.0);
}

TEST(CounterRng, WordBitsAreBalanced) {
  const CounterRng rng(5, 0, 0, RngPurpose::Dropout);
  constexpr int kCalls = 20000;
  long ones = 0;
  for (int i = 0; i < kCalls; ++i) {
    for (std::uint32_t w : rng.words(static_cast<std::uint64_t>(i), 0)) ones += std::popcount(w);
  }
  const double bits = kCalls * 4.0 * 32.0;
  // Binomial(2.56e6, 1/2): standard deviation 800 bits; allow 5 of them.
  EXPECT_NEAR(static_cast<double>(ones), bits / 2, 5 * 800.0);
}

}  // namespace
}  // namespace tessera
