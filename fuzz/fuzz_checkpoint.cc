// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: tessera::fuzz::read_checkpoint (fuzz_inputs.h says what an input is).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tessera::fuzz::refuse_or_accept(tessera::fuzz::read_checkpoint, {data, size});
}
