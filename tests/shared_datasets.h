// SPDX-License-Identifier: Apache-2.0
// The real datasets tests read from the shared datasets folder (TESSERA_SHARED_DATASETS, e.g.
// Cora in the OGB raw layout). Where it is absent a test of them skips, saying so — unless the
// build requires them (-DTESSERA_REQUIRE_DATASETS=ON, as scripts/test.sh and so CI build): then
// it fails, so an accuracy bar on real data can never pass by not running.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>

#ifndef TESSERA_REQUIRE_DATASETS
#define TESSERA_REQUIRE_DATASETS 0
#endif

// In a test body or SetUp: returns from it unless `needed` (a file or folder of a shared
// dataset) exists.
#define TESSERA_NEED_SHARED_DATASET(needed)                                                   \
  do {                                                                                        \
    const std::filesystem::path tessera_needed_(needed);                                      \
    if (!std::filesystem::exists(tessera_needed_)) {                                          \
      if (TESSERA_REQUIRE_DATASETS)                                                           \
        FAIL() << tessera_needed_ << " not found: this build requires the shared datasets "   \
               << "(TESSERA_SHARED_DATASETS=" << TESSERA_SHARED_DATASETS << ")";              \
      GTEST_SKIP() << tessera_needed_ << " not found (the shared datasets folder is absent)"; \
    }                                                                                         \
  } while (0)
