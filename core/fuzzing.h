// SPDX-License-Identifier: Apache-2.0
// Fuzzing builds (cmake -DTESSERA_FUZZ=ON, fuzz/) define TESSERA_FUZZING: the readers then skip
// comparing stored checksums and fingerprints with the contents (HDF5's chunk checksums, a
// checkpoint's checksum, a dataset file's fingerprint), so that a fuzzer's mutations reach the
// parsers behind those comparisons. Every other check stays. Never set in a normal build.
#pragma once

namespace tessera {

#ifdef TESSERA_FUZZING
inline constexpr bool kVerifyChecksums = false;
#else
inline constexpr bool kVerifyChecksums = true;
#endif

}  // namespace tessera
