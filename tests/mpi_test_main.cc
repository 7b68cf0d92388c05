// SPDX-License-Identifier: Apache-2.0
// main() for GoogleTest suites run under mpiexec (see tessera_add_mpi_gtest): puts OpenBLAS on
// the best core this CPU runs (as test_main.cc), initialises MPI, runs every test on every rank,
// lets only rank 0 print the full report (other ranks print their failures, prefixed
// "[rank r]"), and returns the worst result over all ranks, so that a failure on any rank fails
// the CTest test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "comm/mpi_communicator.h"
#include "core/cpu/dispatch.h"

namespace {

// Prints failed assertions and failed tests only, each line prefixed with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::printf("[rank %d] %s:%d: Failure\n%s\n", rank_,
                result.file_name() ? result.file_name() : "unknown file", result.line_number(),
                result.message());
    std::fflush(stdout);
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::printf("[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
    std::fflush(stdout);
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  tessera::cpu::use_best_blas_core(argv);  // as every Tessera program: before MPI starts
  tessera::MpiSession session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));  // GoogleTest owns and deletes it
  }
  const int local_result = RUN_ALL_TESTS();
  int worst_result = local_result;
  MPI_Allreduce(&local_result, &worst_result, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int failed_ranks = 0;
  const int this_failed = local_result != 0 ? 1 : 0;
  MPI_Allreduce(&this_failed, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && failed_ranks > 0) {
    std::printf("[rank 0] %d of %d ranks had failures (their \"[rank r]\" lines name them)\n",
                failed_ranks, ranks);
    std::fflush(stdout);
  }
  return worst_result;
}
