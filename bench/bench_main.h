// The main() every benchmark program shares: CLI11 parsing (help and flag errors handled by
// CLI11), then the benchmark; any exception becomes "NAME: error: ..." and exit status 1.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

namespace tessera {

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
