// SPDX-License-Identifier: Apache-2.0
// agree_on_status / run_agreed under mpiexec (1, 2 and 4 ranks): no failure returns everywhere;
// one failing rank makes every rank throw the same AgreedError with its category and message;
// of several failing ranks the lowest is reported; non-Tessera exceptions become Internal.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "comm/agreement.h"
#include "comm/mpi_communicator.h"

namespace tessera {
namespace {

// How many ranks hold a different string than rank 0 (plain MPI on the world communicator).
int ranks_differing_from_rank0(const std::string& text) {
  long long length = static_cast<long long>(text.size());
  MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  std::string rank0(static_cast<std::size_t>(length), '\0');
  if (text.size() == rank0.size()) rank0 = text;
  MPI_Bcast(rank0.data(), static_cast<int>(length), MPI_CHAR, 0, MPI_COMM_WORLD);
  int differs = rank0 != text ? 1 : 0;
  int total = 0;
  MPI_Allreduce(&differs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class AgreementTest : public ::testing::Test {
 protected:
  MpiCommunicator comm{MPI_COMM_WORLD, 60.0};
  const int rank = comm.rank();
  const int ranks = comm.size();

  // Runs `fn` agreed in phase "load" and returns the AgreedError this rank got (fails the test
  // when none was thrown).
  template <class F>
  AgreedError expect_agreed_error(F fn) {
    try {
      run_agreed(comm, "load", fn);
    } catch (const AgreedError& e) {
      return e;
    }
    ADD_FAILURE() << "run_agreed returned normally on rank " << rank;
    return AgreedError(ErrorCategory::Internal, "none", -1, __FILE__, __LINE__);
  }
};

TEST_F(AgreementTest, NoFailureReturnsEverywhereWithOneAllReduce) {
  const int value = run_agreed(comm, "load", [&] { return 40 + rank; });
  EXPECT_EQ(value, 40 + rank);  // each rank keeps its own result
  bool ran = false;
  run_agreed(comm, "partition", [&] { ran = true; });
  EXPECT_TRUE(ran);
  agree_on_status(comm, "set-up", nullptr);
  // Three agreements, each one all-reduce of one int64 and nothing else.
  const std::uint64_t per_agreement =
      ranks > 1 ? 8u * 2 * static_cast<std::uint64_t>(ranks - 1) / static_cast<std::uint64_t>(ranks)
                : 0u;
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::Setup), 3 * per_agreement);
  EXPECT_EQ(comm.traffic().total_sent(), 3 * per_agreement);
}

TEST_F(AgreementTest, OneFailingRankFailsEveryRankWithItsMessage) {
  if (ranks < 2) GTEST_SKIP() << "needs rank 1";
  const AgreedError e = expect_agreed_error([&] {
    if (rank == 1) TESSERA_FAIL(InvalidInput, "bad file x");
  });
  EXPECT_EQ(e.category(), ErrorCategory::InvalidInput);
  EXPECT_EQ(e.failed_rank(), 1);
  // The origin's file:line travels with the message.
  EXPECT_TRUE(starts_with(e.message(), "rank 1 failed during load: bad file x (test_agreement.cc:"))
      << e.message();
  EXPECT_TRUE(contains(e.what(), "rank 1")) << e.what();
  EXPECT_TRUE(contains(e.what(), "bad file x")) << e.what();
  EXPECT_EQ(ranks_differing_from_rank0(e.message()), 0);
  // Only the failing rank broadcast (header and message); every rank voted once.
  const auto others = static_cast<std::uint64_t>(ranks - 1);
  const std::uint64_t vote = 8u * 2 * others / static_cast<std::uint64_t>(ranks);
  // The broadcast text is the message after "rank 1 failed during load: ".
  const std::size_t text = e.message().size() - std::string("rank 1 failed during load: ").size();
  const std::uint64_t broadcasts = rank == 1 ? others * (16 + text) : 0;
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::Setup), vote + broadcasts);
}

TEST_F(AgreementTest, LowestOfSeveralFailingRanksIsReported) {
  if (ranks < 2) GTEST_SKIP() << "needs two ranks to fail";
  const int lowest = ranks - 2;  // ranks K-2 and K-1 fail, with different categories
  const AgreedError e = expect_agreed_error([&] {
    if (rank == ranks - 1) TESSERA_FAIL(Io, "cannot open part ", rank);
    if (rank == lowest) TESSERA_FAIL(InvalidArgument, "bad flag on rank ", rank);
  });
  EXPECT_EQ(e.failed_rank(), lowest);
  EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
  const std::string lowest_text = std::to_string(lowest);
  EXPECT_TRUE(starts_with(e.message(), "rank " + lowest_text +
                                           " failed during load: bad flag on rank " +
                                           lowest_text + " (test_agreement.cc:"))
      << e.message();
  EXPECT_EQ(ranks_differing_from_rank0(e.message()), 0);
}

TEST_F(AgreementTest, AgreedErrorFromANestedPhasePassesThroughUnchanged) {
  if (ranks < 2) GTEST_SKIP() << "needs rank 1";
  const AgreedError e = expect_agreed_error([&] {
    run_agreed(comm, "inner", [&] {
      if (rank == 1) TESSERA_FAIL(Io, "missing part");
    });
  });
  EXPECT_TRUE(starts_with(e.message(), "rank 1 failed during inner: missing part")) << e.message();
  EXPECT_EQ(e.category(), ErrorCategory::Io);
}

TEST_F(AgreementTest, OtherExceptionsAreReportedAsInternal) {
  const AgreedError standard = expect_agreed_error([&] {
    if (rank == ranks - 1) throw std::out_of_range("index 12 past the end");
  });
  EXPECT_EQ(standard.category(), ErrorCategory::Internal);
  EXPECT_EQ(standard.failed_rank(), ranks - 1);
  EXPECT_TRUE(contains(standard.message(), "index 12 past the end")) << standard.message();

  const AgreedError unknown = expect_agreed_error([&] {
    if (rank == 0) throw 42;
  });
  EXPECT_EQ(unknown.category(), ErrorCategory::Internal);
  EXPECT_EQ(unknown.message(), "rank 0 failed during load: unknown exception");
}

TEST_F(AgreementTest, EmptyMessageIsAgreedToo) {
  const AgreedError e = expect_agreed_error([&] {
    if (rank == 0) throw Error(ErrorCategory::Io, "", __FILE__, __LINE__);
  });
  EXPECT_EQ(e.category(), ErrorCategory::Io);
  EXPECT_TRUE(starts_with(e.message(), "rank 0 failed during load:  (test_agreement.cc:"))
      << e.message();
}

TEST(AgreementSelf, SingleProcessFailureBecomesAgreedError) {
  SelfCommunicator self;
  try {
    run_agreed(self, "partition", [] { TESSERA_FAIL(InvalidArgument, "parts must be > 0"); });
    ADD_FAILURE() << "run_agreed returned normally";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
    EXPECT_EQ(e.failed_rank(), 0);
    EXPECT_TRUE(starts_with(e.message(),
                            "rank 0 failed during partition: parts must be > 0 (test_agreement.cc:"))
        << e.message();
  }
  EXPECT_EQ(run_agreed(self, "load", [] { return std::string("ok"); }), "ok");
  EXPECT_EQ(self.traffic().total_sent(), 0u);
}

}  // namespace
}  // namespace tessera
