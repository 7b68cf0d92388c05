// SPDX-License-Identifier: Apache-2.0
// The inputs on which a fuzz target of fuzz/ once found a crash, a sanitizer report or an
// escaping exception (tests/fuzz/inputs/<target>/<what went wrong>), each replayed through the
// same reader: it must read the input or refuse it with a tessera::Error, and nothing else.
// Under the sanitizer build (scripts/sanitize.sh) a memory error there fails the test too.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_inputs.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const fs::path kInputs = fs::path(TESSERA_SOURCE_DIR) / "tests" / "fuzz" / "inputs";

std::vector<std::uint8_t> read_input(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(FuzzInputs, EveryFolderNamesATarget) {
  for (const fs::directory_entry& entry : fs::directory_iterator(kInputs)) {
    bool known = false;
    for (const fuzz::Target& target : fuzz::targets())
      known |= entry.path().filename() == target.name;
    EXPECT_TRUE(known) << entry.path() << ": no fuzz target of that name";
  }
}

TEST(FuzzInputs, EachCrashingInputIsRefusedCleanly) {
  int replayed = 0;
  for (const fuzz::Target& target : fuzz::targets()) {
    const fs::path folder = kInputs / std::string(target.name);
    if (!fs::is_directory(folder)) continue;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
      SCOPED_TRACE(entry.path().string());
      const std::vector<std::uint8_t> input = read_input(entry.path());
      ASSERT_FALSE(input.empty());
      try {
        target.read(input);  // accepted: fine too (what crashed may have been well-formed)
      } catch (const Error& error) {
        EXPECT_NE(error.category(), ErrorCategory::Internal) << error.what();
        EXPECT_FALSE(error.message().empty());
      } catch (const std::exception& error) {
        ADD_FAILURE() << typeid(error).name() << " escaped the reader: " << error.what();
      }
      ++replayed;
    }
  }
  EXPECT_GT(replayed, 0) << "no inputs under " << kInputs;
}

}  // namespace
}  // namespace tessera
