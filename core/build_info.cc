// SPDX-License-Identifier: Apache-2.0
// build_info(): the version from CMake's project() and the commit from the header that
// cmake/TesseraGitCommit.cmake writes at every build; build_text() adds the CPU kernels in use.
#include "core/build_info.h"

#include "core/cpu/dispatch.h"
#include "core/error.h"
#include "tessera_git_commit.h"

namespace tessera {

const BuildInfo& build_info() {
#ifdef TESSERA_HAVE_CUDA
  constexpr bool kCuda = true;
#else
  constexpr bool kCuda = false;
#endif
  static const BuildInfo info{TESSERA_VERSION_STRING, TESSERA_GIT_COMMIT, kCuda};
  return info;
}

std::string build_text() {
  const BuildInfo& b = build_info();
  std::string cpu;
  try {
    cpu = cpu::cpu_kernels_description();
  } catch (const Error& e) {  // a bad TESSERA_CPU: say so rather than fail --version
    cpu = e.message();
  }
  return "Tessera " + b.version + " (commit " + b.git_commit +
         (b.cuda ? ", CUDA backend)" : ", CPU only)") + "\nCPU kernels: " + cpu;
}

}  // namespace tessera
