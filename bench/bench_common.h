// What every benchmark program shares: its main() (CLI11 parsing, then the benchmark; any
// exception becomes "NAME: error: ..." and exit status 1) and a scratch directory that is
// removed with its contents when the benchmark ends.
#pragma once

#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>

#include "engine/core/error.h"

namespace tessera {

// A directory made with mkdtemp under `parent`, removed with everything in it on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::filesystem::path& parent) {
    std::string pattern = (parent / "tessera_bench_XXXXXX").string();
    TESSERA_CHECK(::mkdtemp(pattern.data()) != nullptr, Io, "cannot create a directory in ",
                  parent.string(), ": ", std::strerror(errno));
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};


template <class Flags, class AddFlags, class Run>
int bench_main(int argc, char** argv, const char* name, const std::string& description,
               AddFlags add_flags, Run run) {
  CLI::App app{std::string(name) + ": " + description};
  Flags flags;
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
  }
  return 1;
}

}  // namespace tessera
