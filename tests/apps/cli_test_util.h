// SPDX-License-Identifier: Apache-2.0
// What the command-line suites share: a scratch folder per test process (removed after the last
// test), reading a file whole, and running a command line under a guard that turns a hang into
// a failure, with its output and exit status.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tessera::cli_test {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string output;  // the command line, then stdout and stderr together
  double seconds = 0;
};

// <temp>/<prefix>_<pid>, made empty on first use and removed once every test has run.
inline fs::path work_dir(const std::string& prefix) {
  static const fs::path dir = [&] {
    fs::path d = fs::temp_directory_path() / (prefix + "_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    struct Cleanup : ::testing::Environment {
      explicit Cleanup(fs::path p) : path(std::move(p)) {}
      void TearDown() override { fs::remove_all(path); }
      fs::path path;
    };
    ::testing::AddGlobalTestEnvironment(new Cleanup(d));
    return d;
  }();
  return dir;
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `command` with `env` (NAME=VALUE ...) and one OpenMP/BLAS thread per process (up to 4
// ranks share 2 cores) under a 120 s guard; the output goes through `log`.
inline Result run(const std::string& command, const fs::path& log, const std::string& env = "") {
  const std::string line = "env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 " + env +
                           " timeout 120 " + command + " > " + log.string() + " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(line.c_str());
  Result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.output = "$ " + env + (env.empty() ? "" : " ") + command + "\n" + read_text(log);
  return r;
}

}  // namespace tessera::cli_test
