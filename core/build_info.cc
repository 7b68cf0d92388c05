// SPDX-License-Identifier: Apache-2.0
// build_info(): the version from CMake's project() and the commit from the header that
// cmake/TesseraGitCommit.cmake writes at every build.
#include "core/build_info.h"

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
  return "Tessera " + b.version + " (commit " + b.git_commit +
         (b.cuda ? ", CUDA backend)" : ", CPU only)");
}

}  // namespace tessera
