// SPDX-License-Identifier: Apache-2.0
// abort_probe: run under mpiexec by run_abort_probe.cmake. Rank 1 throws a tessera::Error in the
// middle of a loop of all-reduces while the other ranks keep all-reducing (and so wait for it);
// main logs the error with the rank and aborts the communicator, which must end every rank —
// after every rank has unwound (abort notices): each holds a marker file in the working folder
// that its destructor removes, and the checker finds none left. --two: the last rank fails at
// the same iteration as rank 1.
// Modes for the checker's own tests: --succeed (nobody fails), --silent (abort without a log).
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/error.h"

namespace {

constexpr int kIterations = 200;
constexpr int kFailingIteration = 20;

// A file that exists while the loop runs, as a streamed output does: removed when unwinding.
class Marker {
 public:
  explicit Marker(int rank) : path_("rank-" + std::to_string(rank) + ".marker") {
    std::ofstream(path_) << "running\n";
  }
  ~Marker() { std::remove(path_.c_str()); }
  Marker(const Marker&) = delete;
  Marker& operator=(const Marker&) = delete;

 private:
  std::string path_;
};

void all_reduce_loop(tessera::Communicator& comm, bool fail, bool two) {
  const Marker marker(comm.rank());
  std::vector<float> values(16, 1.0f);
  const bool failing = comm.rank() == 1 || (two && comm.rank() == comm.size() - 1);
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    if (fail && failing && iteration == kFailingIteration) {
      TESSERA_FAIL(InvalidInput, "abort_probe: rank ", comm.rank(),
                   " fails on purpose at iteration ", iteration);
    }
    comm.all_reduce_sum(std::span<float>(values), tessera::TrafficCategory::AllReduce);
    for (float& v : values) v /= static_cast<float>(comm.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool succeed = argc > 1 && std::strcmp(argv[1], "--succeed") == 0;
  const bool silent = argc > 1 && std::strcmp(argv[1], "--silent") == 0;
  const bool two = argc > 1 && std::strcmp(argv[1], "--two") == 0;
  tessera::MpiSession session(&argc, &argv);
  // A long timeout: the abort, not a timeout, must be what ends the waiting ranks.
  tessera::MpiCommunicator comm(MPI_COMM_WORLD, /*timeout_s=*/120.0);
  try {
    all_reduce_loop(comm, !succeed, two);
  } catch (const std::exception& e) {
    if (!silent) std::fprintf(stderr, "abort_probe: error: %s\n", e.what());
    std::fflush(stderr);
    comm.abort(1);
  }
  return 0;
}
