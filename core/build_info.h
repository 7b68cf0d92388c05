// SPDX-License-Identifier: Apache-2.0
// What this build of Tessera is: its version, the source commit it was built from, and whether
// it has the CUDA backend; one line of it for every program's --version and the summaries.
#pragma once

#include <string>

namespace tessera {

struct BuildInfo {
  std::string version;     // "0.2.0" (the project's version)
  std::string git_commit;  // "5f9d58b3c2a1" (+ "-dirty"), or "unknown" outside a git checkout
  bool cuda = false;       // the CUDA backend is built in
};
const BuildInfo& build_info();
// "Tessera 0.2.0 (commit 5f9d58b3c2a1, CUDA backend)", then a line with the CPU kernels in use
// and the BLAS's ("CPU kernels: avx512 (built: baseline, avx, avx2, avx512); BLAS: ...").
std::string build_text();

}  // namespace tessera
