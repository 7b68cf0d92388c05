// The single-process communicator and traffic counters.
#include <gtest/gtest.h>

#include <vector>

#include "comm/communicator.h"
#include "engine/core/error.h"

namespace tessera {
namespace {

TEST(TrafficCounter, CountsByCategory) {
  TrafficCounter t;
  t.add(TrafficCategory::HaloForward, 100, 25);
  t.add(TrafficCategory::HaloForward, 100, 25);
  t.add(TrafficCategory::AllReduce, 8, 8);
  EXPECT_EQ(t.raw(TrafficCategory::HaloForward), 200u);
  EXPECT_EQ(t.sent(TrafficCategory::HaloForward), 50u);
  EXPECT_EQ(t.sent(TrafficCategory::HaloBackward), 0u);
  EXPECT_EQ(t.total_sent(), 58u);
  t.reset();
  EXPECT_EQ(t.total_sent(), 0u);
}

TEST(SelfCommunicator, ReductionsAreIdentityAndPeersRefused) {
  SelfCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  std::vector<double> v{1.5, -2.0};
  comm.all_reduce_sum(std::span<double>(v), TrafficCategory::AllReduce);
  EXPECT_EQ(v, (std::vector<double>{1.5, -2.0}));
  std::vector<std::byte> buffer(4);
  EXPECT_THROW(comm.isend(buffer, 1, 0, TrafficCategory::HaloForward), Error);
  EXPECT_THROW(comm.irecv(buffer, 1, 0), Error);
}

}  // namespace
}  // namespace tessera
