// SPDX-License-Identifier: Apache-2.0
// How the command-line programs answer a command line they cannot use, all alike: --help and
// --version print what CLI11 prints (status 0); any other parse error is one line
// "PROGRAM: error: ..." and a hint, with exit status 2, as argparse does — never CLI11's own
// wording or statuses.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>

namespace tessera_apps {

// A command line that cannot run (tessera::kUsageExitStatus for train_gcn, which checks it).
inline constexpr int kUsageExitStatus = 2;

// The exit status for `e`; prints on stderr when `speak` (rank 0 of a job: every rank parses
// the same arguments and fails the same way).
inline int report_parse_error(const CLI::App& app, const CLI::ParseError& e, const char* program,
                              bool speak) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {  // --help, --version
    std::ostringstream quiet;
    return speak ? app.exit(e) : app.exit(e, quiet, quiet);
  }
  if (speak)
    std::fprintf(stderr, "%s: error: %s\nRun with --help for more information.\n", program,
                 e.what());
  return kUsageExitStatus;
}

}  // namespace tessera_apps
