// SPDX-License-Identifier: Apache-2.0
// Single-process tests of comm/communicator.h: traffic counters, the traffic formulas of the
// non-virtual Communicator calls (on a fake K-rank communicator and on K = 1), wait_all/test_all
// and SelfCommunicator.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"

namespace tessera {
namespace {

TEST(TrafficCounter, CountsByCategory) {
  TrafficCounter t;
  t.add(TrafficCategory::HaloForward, 100, 25);
  t.add(TrafficCategory::HaloForward, 100, 25);
  t.add(TrafficCategory::AllReduce, 8, 8);
  t.add(TrafficCategory::Setup, 16, 16);
  EXPECT_EQ(t.raw(TrafficCategory::HaloForward), 200u);
  EXPECT_EQ(t.sent(TrafficCategory::HaloForward), 50u);
  EXPECT_EQ(t.sent(TrafficCategory::HaloBackward), 0u);
  EXPECT_EQ(t.sent(TrafficCategory::Setup), 16u);
  EXPECT_EQ(t.total_sent(), 74u);
  t.reset();
  EXPECT_EQ(t.total_sent(), 0u);
  EXPECT_EQ(t.raw(TrafficCategory::HaloForward), 0u);
}

TEST(TrafficCounter, CategoryNames) {
  EXPECT_EQ(to_string(TrafficCategory::HaloForward), "halo_forward");
  EXPECT_EQ(to_string(TrafficCategory::HaloBackward), "halo_backward");
  EXPECT_EQ(to_string(TrafficCategory::Pipeline), "pipeline");
  EXPECT_EQ(to_string(TrafficCategory::AllReduce), "all_reduce");
  EXPECT_EQ(to_string(TrafficCategory::Setup), "setup");
}

// A request that completes after `polls_needed` calls to test(); counts wait() calls.
class FakeRequest final : public Request {
 public:
  explicit FakeRequest(int polls_needed) : polls_left_(polls_needed) {}
  void wait() override {
    ++waits;
    polls_left_ = 0;
  }
  bool test() override {
    if (polls_left_ > 0) --polls_left_;
    return polls_left_ == 0;
  }
  int waits = 0;

 private:
  int polls_left_;
};

TEST(WaitAll, SkipsNullAndWaitsEachOnce) {
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(nullptr);
  requests.push_back(std::make_unique<FakeRequest>(0));
  requests.push_back(nullptr);
  requests.push_back(std::make_unique<FakeRequest>(3));
  wait_all(requests);
  EXPECT_EQ(static_cast<FakeRequest&>(*requests[1]).waits, 1);
  EXPECT_EQ(static_cast<FakeRequest&>(*requests[3]).waits, 1);
  EXPECT_TRUE(test_all(requests));
  wait_all(std::span<const std::unique_ptr<Request>>{});  // empty: nothing to do
}

TEST(TestAll, TrueOnlyWhenEveryRequestCompleted) {
  std::vector<std::unique_ptr<Request>> requests;
  EXPECT_TRUE(test_all(requests));  // empty
  requests.push_back(nullptr);
  EXPECT_TRUE(test_all(requests));  // null entries count as complete
  requests.push_back(std::make_unique<FakeRequest>(0));
  requests.push_back(std::make_unique<FakeRequest>(2));
  requests.push_back(std::make_unique<FakeRequest>(1));
  EXPECT_FALSE(test_all(requests));  // polls 2 -> 1 and 1 -> 0: every request was tested
  EXPECT_TRUE(test_all(requests));
}

// A K-rank communicator whose operations move nothing: checks the wrappers' traffic formulas.
class CountingCommunicator final : public Communicator {
 public:
  CountingCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
  void set_timeout(double) override {}
  double timeout() const override { return 0.0; }
  int hook_calls = 0;

 protected:
  void do_all_reduce_sum(std::span<float>) override { ++hook_calls; }
  void do_all_reduce_sum(std::span<double>) override { ++hook_calls; }
  void do_all_reduce_max(std::span<std::int64_t>) override { ++hook_calls; }
  void do_broadcast(std::span<std::byte>, int) override { ++hook_calls; }
  std::unique_ptr<Request> do_isend(std::span<const std::byte>, int, int) override {
    ++hook_calls;
    return std::make_unique<FakeRequest>(0);
  }
  std::unique_ptr<Request> do_irecv(std::span<std::byte>, int, int) override {
    ++hook_calls;
    return std::make_unique<FakeRequest>(0);
  }
  std::unique_ptr<Communicator> do_split(int, int) override {
    ++hook_calls;
    return std::make_unique<CountingCommunicator>(0, 1);
  }

 private:
  int rank_;
  int size_;
};

TEST(CommunicatorTraffic, SplitCountsInTheParentsCounter) {
  CountingCommunicator comm(/*rank=*/1, /*size=*/4);
  std::unique_ptr<Communicator> part = comm.split(/*color=*/0, /*key=*/1);
  std::vector<std::byte> bytes(40);
  part->isend(bytes, 0, 1, TrafficCategory::Pipeline, 160)->wait();
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::Pipeline), 40u);
  EXPECT_EQ(comm.traffic().raw(TrafficCategory::Pipeline), 160u);
  EXPECT_EQ(&part->traffic(), &comm.traffic());
  EXPECT_THROW(comm.split(-1, 0), Error);
}

TEST(CommunicatorTraffic, RingAllReduceAndBroadcastFormulas) {
  CountingCommunicator comm(/*rank=*/1, /*size=*/4);
  std::vector<float> floats(1000);
  comm.all_reduce_sum(std::span<float>(floats), TrafficCategory::AllReduce);
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::AllReduce), 4000u * 2 * 3 / 4);  // 6000
  EXPECT_EQ(comm.traffic().raw(TrafficCategory::AllReduce), 6000u);
  std::vector<double> doubles(10);
  comm.all_reduce_sum(std::span<double>(doubles), TrafficCategory::Pipeline);
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::Pipeline), 80u * 2 * 3 / 4);  // 120
  std::vector<std::int64_t> maxima(2);
  comm.all_reduce_max(maxima);
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::Setup), 16u * 2 * 3 / 4);  // 24
  std::vector<std::byte> bytes(100);
  comm.broadcast(bytes, /*root=*/0, TrafficCategory::Setup);  // not the root: nothing sent
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::Setup), 24u);
  comm.broadcast(bytes, /*root=*/1, TrafficCategory::Setup);  // the root sends to 3 ranks
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::Setup), 24u + 300u);
  EXPECT_EQ(comm.hook_calls, 5);
}

TEST(CommunicatorTraffic, RingFormulaRoundsDownOnThreeRanks) {
  CountingCommunicator comm(0, 3);
  std::vector<std::int64_t> one(1);  // 8 bytes * 4 / 3 = 10.67 -> 10
  comm.all_reduce_max(one);
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::Setup), 10u);
}

TEST(CommunicatorTraffic, IsendCountsSentAndRawBytes) {
  CountingCommunicator comm(0, 2);
  std::vector<std::byte> encoded(250);
  auto plain = comm.isend(encoded, 1, 7, TrafficCategory::HaloForward);
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::HaloForward), 250u);
  EXPECT_EQ(comm.traffic().raw(TrafficCategory::HaloForward), 250u);  // raw_bytes 0: raw = sent
  auto coded = comm.isend(encoded, 1, 8, TrafficCategory::HaloBackward, /*raw_bytes=*/1000);
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::HaloBackward), 250u);
  EXPECT_EQ(comm.traffic().raw(TrafficCategory::HaloBackward), 1000u);
  auto received = comm.irecv(encoded, 1, 7);  // receives are counted by their sender
  EXPECT_EQ(comm.traffic().total_sent(), 500u);
}

TEST(CommunicatorTraffic, PeersAndRootsOutsideTheCommunicatorAreRefused) {
  CountingCommunicator comm(0, 2);
  std::vector<std::byte> bytes(4);
  for (int bad : {-1, 2}) {
    EXPECT_THROW(comm.isend(bytes, bad, 0, TrafficCategory::HaloForward), Error);
    EXPECT_THROW(comm.irecv(bytes, bad, 0), Error);
    EXPECT_THROW(comm.broadcast(bytes, bad, TrafficCategory::Setup), Error);
  }
  EXPECT_EQ(comm.hook_calls, 0);
  EXPECT_EQ(comm.traffic().total_sent(), 0u);
  try {
    comm.isend(bytes, 2, 0, TrafficCategory::HaloForward);
    ADD_FAILURE() << "isend to rank 2 of 2 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
    EXPECT_NE(e.message().find("[0, 2)"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("got 2"), std::string::npos) << e.message();
  }
}

TEST(SelfCommunicator, ReductionsAndBroadcastAreIdentityAndCountNothing) {
  SelfCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  std::vector<double> v{1.5, -2.0};
  comm.all_reduce_sum(std::span<double>(v), TrafficCategory::AllReduce);
  EXPECT_EQ(v, (std::vector<double>{1.5, -2.0}));
  std::vector<float> f{0.25f, 3.0f};
  comm.all_reduce_sum(std::span<float>(f), TrafficCategory::AllReduce);
  EXPECT_EQ(f, (std::vector<float>{0.25f, 3.0f}));
  std::vector<std::int64_t> m{-7, 9};
  comm.all_reduce_max(m);
  EXPECT_EQ(m, (std::vector<std::int64_t>{-7, 9}));
  std::vector<std::byte> b{std::byte{1}, std::byte{2}};
  comm.broadcast(b, 0, TrafficCategory::Setup);
  EXPECT_EQ(b, (std::vector<std::byte>{std::byte{1}, std::byte{2}}));
  comm.barrier();
  // K = 1: a ring all-reduce and a broadcast send nothing.
  EXPECT_EQ(comm.traffic().total_sent(), 0u);
  EXPECT_EQ(comm.traffic().raw(TrafficCategory::AllReduce), 0u);
  EXPECT_EQ(comm.traffic().raw(TrafficCategory::Setup), 0u);
}

TEST(SelfCommunicator, PeersAndOtherRootsRefused) {
  SelfCommunicator comm;
  std::vector<std::byte> buffer(4);
  for (int peer : {0, 1, -1}) {
    try {
      comm.isend(buffer, peer, 0, TrafficCategory::HaloForward);
      ADD_FAILURE() << "isend to rank " << peer << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << e.what();
    }
    try {
      comm.irecv(buffer, peer, 0);
      ADD_FAILURE() << "irecv from rank " << peer << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << e.what();
    }
  }
  EXPECT_THROW(comm.broadcast(buffer, 1, TrafficCategory::Setup), Error);
  EXPECT_EQ(comm.traffic().total_sent(), 0u);  // refused messages are not counted
}

TEST(SelfCommunicator, TimeoutIsStored) {
  SelfCommunicator comm;
  comm.set_timeout(2.5);
  EXPECT_EQ(comm.timeout(), 2.5);
}

TEST(SelfCommunicatorDeathTest, AbortExitsWithTheCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SelfCommunicator comm;
  EXPECT_EXIT(comm.abort(3), ::testing::ExitedWithCode(3), "");
}

}  // namespace
}  // namespace tessera
