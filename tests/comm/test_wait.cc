// SPDX-License-Identifier: Apache-2.0
// The deadline rules every communicator's waits follow (comm/wait.h), without peers or a GPU:
// poll_until returns once its operation is done, checks between polls, gives up with
// Error(Timeout) naming the operation and the reason after the timeout (never when it is <= 0),
// lets the check's error through, and completes a finished operation even past its deadline.
#include "comm/wait.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/error.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using test::throws_error;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(Wait, ReturnsOnceDoneAndChecksBetweenPolls) {
  int polls = 0, checks = 0;
  poll_until(
      "the operation", 5.0, "why", [&] { return ++polls == 40; }, [&] { ++checks; });
  EXPECT_EQ(polls, 40);
  EXPECT_EQ(checks, 39);
}

TEST(Wait, GivesUpAtTheTimeoutNamingTheOperationAndTheReason) {
  const auto start = Clock::now();
  int checks = 0;
  EXPECT_TRUE(throws_error(
      [&] {
        poll_until(
            "NCCL send to rank 1", 0.2, "a peer did not take part", [] { return false; },
            [&] { ++checks; });
      },
      ErrorCategory::Timeout,
      "NCCL send to rank 1 did not complete within 0.2 s (a peer did not take part)"));
  const double took = seconds_since(start);
  EXPECT_GE(took, 0.2);
  EXPECT_LT(took, 2.0);  // paced polls: a nap of 50 us at most past the deadline, plus noise
  EXPECT_GT(checks, 0);
}

TEST(Wait, TheCheckEndsTheWait) {
  int polls = 0;
  EXPECT_TRUE(throws_error(
      [&] {
        poll_until(
            "a wait", 60.0, "why", [&] { return ++polls > 1000; },
            [&] {
              if (polls == 3) TESSERA_FAIL(Remote, "rank 2 ended the job");
            });
      },
      ErrorCategory::Remote, "rank 2 ended the job"));
  EXPECT_EQ(polls, 3);
}

TEST(Wait, NoTimeoutWhenItIsZeroOrLess) {
  for (const double timeout : {0.0, -1.0}) {
    const auto start = Clock::now();
    poll_until(
        "a long wait", timeout, "why", [&] { return seconds_since(start) > 0.3; }, [] {});
    EXPECT_GE(seconds_since(start), 0.3);
  }
}

TEST(Wait, AFinishedOperationCompletesPastItsDeadline) {
  poll_until(
      "done already", 1e-9, "why", [] { return true; }, [] { FAIL() << "no check needed"; });
  const Deadline past(1e-9), never(0.0), far(1e300);  // a huge timeout must not overflow
  const auto start = Clock::now();
  while (seconds_since(start) < 0.01) {
  }
  EXPECT_TRUE(past.passed());
  EXPECT_FALSE(never.passed());
  EXPECT_FALSE(far.passed());
}

}  // namespace
}  // namespace tessera
