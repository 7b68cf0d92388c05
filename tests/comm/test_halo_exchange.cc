// SPDX-License-Identifier: Apache-2.0
// HaloExchange under mpiexec: forward delivers exactly the owners' rows into every halo block,
// backward adds exactly what every peer sent into the owners' rows, traffic is counted per
// category, and an empty plan sends nothing. Inputs are small integers, so every check is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "comm/halo_exchange.h"
#include "comm/mpi_communicator.h"
#include "core/error.h"
#include "core/kernels.h"
#include "datasets/synthetic.h"
#include "partition/graph_part.h"

namespace tessera {
namespace {

constexpr std::int64_t kWidth = 7;  // odd width on purpose

float forward_value(GlobalId v, std::int64_t f) { return static_cast<float>(v * 10 + f); }
float backward_value(GlobalId v, int from_rank, std::int64_t f) {
  return static_cast<float>((v % 97) + 1000 * from_rank + f);
}

class HaloExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticConfig c;
    c.num_nodes = 600;
    c.num_edges = 2400;
    c.num_features = 4;
    c.num_classes = 3;
    c.seed = 11;
    dataset = generate_synthetic(c);
    graph = training_graph(dataset);
    plan = make_partition(PartitionMethod::Random, graph, dataset.train_idx, comm.size(), 5);
    info = dataset_info(dataset);
    PartBuilder builder(dataset, graph, plan, info);
    for (int p = 0; p < comm.size(); ++p) parts.push_back(builder.build(p));
  }
  const GraphPart& mine() const { return parts[static_cast<std::size_t>(comm.rank())]; }

  MpiCommunicator comm{MPI_COMM_WORLD, 60.0};
  Dataset dataset;
  Csr graph;
  PartitionPlan plan;
  DatasetInfo info;
  std::vector<GraphPart> parts;  // every part (the graph is small): expectations need them all
};

TEST_F(HaloExchangeTest, ForwardFillsHaloBlocksWithOwnersRows) {
  const LocalGraph& g = mine().graph;
  Tensor x(g.num_owned(), kWidth);
  for (std::int64_t i = 0; i < g.num_owned(); ++i)
    for (std::int64_t f = 0; f < kWidth; ++f) x.row<float>(i)[f] = forward_value(g.owned_ids[i], f);
  HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids);
  Tensor halo;
  exchange.start_forward(x, halo, /*layer=*/2);
  exchange.finish_forward(halo);
  ASSERT_EQ(halo.rows(), g.num_halo());
  std::int64_t wrong = 0;
  for (std::int64_t j = 0; j < g.num_halo(); ++j)
    for (std::int64_t f = 0; f < kWidth; ++f)
      wrong += halo.row<float>(j)[f] != forward_value(g.halo_ids[j], f);
  EXPECT_EQ(wrong, 0) << "rank " << comm.rank();
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::HaloForward),
            static_cast<std::uint64_t>(g.halo.num_send() * kWidth * 4));
  // Forward has no unpacking: what was exposed lies inside the exchange's lifetime.
  EXPECT_LE(exchange.times().exposed_s, exchange.times().comm_s + 1e-9);
}

TEST_F(HaloExchangeTest, BackwardAddsEveryPeersGradientIntoTheOwner) {
  const LocalGraph& g = mine().graph;
  Tensor d_halo(g.num_halo(), kWidth);
  for (std::int64_t j = 0; j < g.num_halo(); ++j)
    for (std::int64_t f = 0; f < kWidth; ++f)
      d_halo.row<float>(j)[f] = backward_value(g.halo_ids[j], comm.rank(), f);
  Tensor d_x(g.num_owned(), kWidth);
  for (std::int64_t i = 0; i < d_x.numel(); ++i) d_x.f32()[i] = 0.5f;
  HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids);
  exchange.start_backward(d_halo, /*layer=*/1);
  exchange.finish_backward(d_x);

  // Expected: 0.5 plus, for every other part holding v as a halo node, that part's value.
  std::map<GlobalId, std::vector<float>> expected;
  for (GlobalId v : g.owned_ids) expected[v] = std::vector<float>(kWidth, 0.5f);
  for (const GraphPart& other : parts) {
    for (GlobalId v : other.graph.halo_ids) {
      auto it = expected.find(v);
      if (it == expected.end()) continue;
      for (std::int64_t f = 0; f < kWidth; ++f) it->second[f] += backward_value(v, other.graph.part, f);
    }
  }
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < g.num_owned(); ++i)
    for (std::int64_t f = 0; f < kWidth; ++f)
      wrong += d_x.row<float>(i)[f] != expected[g.owned_ids[i]][f];
  EXPECT_EQ(wrong, 0) << "rank " << comm.rank();
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::HaloBackward),
            static_cast<std::uint64_t>(g.num_halo() * kWidth * 4));
}

// Between exchanges the send rows are the caller's scratch: idle_rows lends their memory, which
// reserve sized for the spare rows too, and refuses while an exchange is in flight.
TEST_F(HaloExchangeTest, IdleRowsLendTheSendRowsBetweenExchanges) {
  const LocalGraph& g = mine().graph;
  HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids);
  const std::int64_t spare = g.halo.num_send() + 3;
  exchange.reserve(kWidth, Device::cpu(), spare);
  Tensor idle = exchange.idle_rows(spare, kWidth, Device::cpu());
  ASSERT_EQ(idle.rows(), spare);
  const void* memory = idle.raw();
  Tensor x(g.num_owned(), kWidth), halo;
  x.zero();
  exchange.start_forward(x, halo, 0);
  EXPECT_THROW(exchange.idle_rows(1, kWidth, Device::cpu()), Error) << "in flight";
  exchange.finish_forward(halo);
  EXPECT_EQ(exchange.idle_rows(spare, kWidth, Device::cpu()).raw(), memory) << "no new block";
}

TEST_F(HaloExchangeTest, RepeatedExchangesOfSeveralLayersStayExact) {
  const LocalGraph& g = mine().graph;
  HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids);
  for (int layer = 0; layer < 3; ++layer) {
    const std::int64_t width = 1 + 16 * layer;  // 1, 17, 33
    Tensor x(g.num_owned(), width), halo;
    for (std::int64_t i = 0; i < g.num_owned(); ++i)
      for (std::int64_t f = 0; f < width; ++f)
        x.row<float>(i)[f] = forward_value(g.owned_ids[i], f) + layer;
    exchange.start_forward(x, halo, layer);
    while (!exchange.poll()) {
    }
    exchange.finish_forward(halo);
    std::int64_t wrong = 0;
    for (std::int64_t j = 0; j < g.num_halo(); ++j)
      for (std::int64_t f = 0; f < width; ++f)
        wrong += halo.row<float>(j)[f] != forward_value(g.halo_ids[j], f) + layer;
    EXPECT_EQ(wrong, 0) << "layer " << layer << " rank " << comm.rank();
  }
}

// Forward through a codec: every halo value within the codec's error of the owner's value
// (int8: one quantisation step of the row's range; bf16: relative 2^-8), and traffic counted
// raw (f32) and sent (encoded, headers included).
TEST_F(HaloExchangeTest, EncodedForwardStaysWithinTheCodecError) {
  const LocalGraph& g = mine().graph;
  Tensor x(g.num_owned(), kWidth);
  for (std::int64_t i = 0; i < g.num_owned(); ++i)
    for (std::int64_t f = 0; f < kWidth; ++f) x.row<float>(i)[f] = forward_value(g.owned_ids[i], f);
  for (const CodecKind codec : {CodecKind::Bf16, CodecKind::Int8, CodecKind::Int2}) {
    ExchangeCodecs codecs;
    codecs.forward = codec;
    HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids, codecs);
    exchange.set_noise(3, 1);
    const std::uint64_t sent_before = comm.traffic().sent(TrafficCategory::HaloForward);
    const std::uint64_t raw_before = comm.traffic().raw(TrafficCategory::HaloForward);
    Tensor halo;
    exchange.start_forward(x, halo, 0);
    exchange.finish_forward(halo);
    double worst = 0.0;
    for (std::int64_t j = 0; j < g.num_halo(); ++j) {
      // Row values v*10 + f, f in [0, 7): range 6 over the row.
      for (std::int64_t f = 0; f < kWidth; ++f) {
        const double want = forward_value(g.halo_ids[j], f);
        const double error = std::abs(halo.row<float>(j)[f] - want);
        const double bound = codec == CodecKind::Bf16 ? std::abs(want) / 256.0 + 1e-6
                                                      : 6.0 / ((1 << value_bits(codec)) - 1) + 1e-3;
        worst = std::max(worst, error / bound);
      }
    }
    EXPECT_LE(worst, 1.0) << to_string(codec) << " rank " << comm.rank();
    const std::int64_t messages = [&] {
      std::int64_t m = 0;
      for (int p = 0; p < comm.size(); ++p) m += g.halo.send_count(p) > 0;
      return m;
    }();
    EXPECT_EQ(comm.traffic().raw(TrafficCategory::HaloForward) - raw_before,
              static_cast<std::uint64_t>(g.halo.num_send() * kWidth * 4));
    EXPECT_EQ(comm.traffic().sent(TrafficCategory::HaloForward) - sent_before,
              static_cast<std::uint64_t>(g.halo.num_send()) * encoded_row_bytes(codec, kWidth) +
                  static_cast<std::uint64_t>(messages) * kMessageHeaderBytes);
  }
}

// Rows kept in bf16 (--feature-dtype bf16) are gathered widened: every codec, error feedback
// included, delivers exactly what it delivers of the same rows in f32, and counts the same bytes.
TEST_F(HaloExchangeTest, Bf16RowsTravelAsTheirF32Widening) {
  const LocalGraph& g = mine().graph;
  Tensor x(g.num_owned(), kWidth);
  for (std::int64_t i = 0; i < g.num_owned(); ++i)
    for (std::int64_t f = 0; f < kWidth; ++f)
      x.row<float>(i)[f] = std::sin(static_cast<float>(g.owned_ids[i] * kWidth + f)) * 3.0f;
  Tensor x_bf16(g.num_owned(), kWidth, DType::BF16), widened(g.num_owned(), kWidth);
  to_bf16(x_bf16, x);
  to_f32(widened, x_bf16);
  for (const CodecKind codec : {CodecKind::None, CodecKind::Bf16, CodecKind::Int8}) {
    for (const bool feedback : {false, true}) {
      if (feedback && codec == CodecKind::None) continue;
      ExchangeCodecs codecs;
      codecs.forward = codec;
      codecs.error_feedback = feedback;
      Tensor halos[2];
      std::uint64_t sent[2];
      for (int i = 0; i < 2; ++i) {
        HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids, codecs);
        const std::uint64_t before = comm.traffic().sent(TrafficCategory::HaloForward);
        for (int epoch = 1; epoch <= 2; ++epoch) {  // twice: the residual of the first is used
          exchange.set_noise(3, epoch);
          exchange.start_forward(i == 0 ? widened : x_bf16, halos[i], 0);
          exchange.finish_forward(halos[i]);
        }
        sent[i] = comm.traffic().sent(TrafficCategory::HaloForward) - before;
      }
      SCOPED_TRACE(std::string(to_string(codec)) + (feedback ? " with feedback" : ""));
      ASSERT_EQ(halos[1].rows(), g.num_halo());
      EXPECT_EQ(0, std::memcmp(halos[0].raw(), halos[1].raw(), halos[0].bytes()))
          << "rank " << comm.rank();
      EXPECT_EQ(sent[0], sent[1]);
    }
  }
}

// Error feedback: what a message loses is carried into the next one, so the sum of T decoded
// messages of the same rows stays within one residual (at most a quantisation step, here with
// a margin for the residual widening the row's range) of T times the rows, instead of drifting
// like sqrt(T) steps.
TEST_F(HaloExchangeTest, ErrorFeedbackKeepsTheSumOfMessagesExact) {
  const LocalGraph& g = mine().graph;
  ExchangeCodecs codecs;
  codecs.forward = CodecKind::Int2;
  codecs.error_feedback = true;
  HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids, codecs);
  Tensor x(g.num_owned(), kWidth), halo;
  for (std::int64_t i = 0; i < g.num_owned(); ++i)
    for (std::int64_t f = 0; f < kWidth; ++f) x.row<float>(i)[f] = static_cast<float>(f % 3) * 0.37f;
  constexpr int kEpochs = 20;
  Tensor sum = Tensor::zeros(g.num_halo(), kWidth);
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    exchange.set_noise(1, epoch);
    exchange.start_forward(x, halo, 0);
    exchange.finish_forward(halo);
    axpy(sum, 1.0f, halo);
  }
  // Rows span [0, 0.74]: a 2-bit step is 0.25; the residual can widen the range to ~2x.
  double worst = 0.0;
  for (std::int64_t j = 0; j < g.num_halo(); ++j)
    for (std::int64_t f = 0; f < kWidth; ++f)
      worst = std::max(worst, std::abs(sum.row<float>(j)[f] - kEpochs * (f % 3) * 0.37));
  EXPECT_LE(worst, 0.5) << "rank " << comm.rank();
}

// Adaptive: after a re-plan, sender and receiver agree on every message's bits (a mismatch
// would fail the receiver's header check), and the plan names this rank's messages.
TEST_F(HaloExchangeTest, AdaptivePlansAgreeAcrossRanks) {
  const LocalGraph& g = mine().graph;
  ExchangeCodecs codecs;
  codecs.adaptive = true;
  codecs.bit_budget = 4.0;
  codecs.num_layers = 2;
  HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids, codecs);
  Tensor x(g.num_owned(), kWidth), halo, d_x(g.num_owned(), kWidth);
  for (int epoch = 1; epoch <= 3; ++epoch) {
    exchange.set_noise(5, epoch);
    if (epoch > 1) {
      const std::string plan = exchange.replan();
      if (g.halo.num_send() > 0) {
        EXPECT_NE(plan.find("bits"), std::string::npos) << plan;
      }
    }
    for (int layer = 0; layer < 2; ++layer) {
      // Layer 1's rows have a 1000x wider range than layer 0's: they should get more bits.
      for (std::int64_t i = 0; i < x.numel(); ++i)
        x.f32()[i] = static_cast<float>((i % 13) * (layer == 0 ? 0.001 : 1.0));
      exchange.start_forward(x, halo, layer);
      exchange.finish_forward(halo);
      Tensor d_halo = halo.clone();
      d_x.zero();
      exchange.start_backward(d_halo, layer);
      exchange.finish_backward(d_x);
    }
  }
}

// Adaptive: within one message, rows of a wide range get more bits than rows of a narrow one,
// the budget holds (mean bits per value at most 4), and the blocks of every width decode into
// the right halo rows (each row within its own width's error bound).
TEST_F(HaloExchangeTest, AdaptiveGivesWideRowsMoreBitsWithinAMessage) {
  const LocalGraph& g = mine().graph;
  ExchangeCodecs codecs;
  codecs.adaptive = true;
  codecs.bit_budget = 4.0;
  codecs.num_layers = 1;
  HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids, codecs);
  // Rows of even global id span [0, 1000), odd ones [0, 0.01): a 10^5 ratio of ranges.
  auto value = [](GlobalId v, std::int64_t f) {
    return static_cast<float>(((v * 7 + f * 3) % 11) / 11.0 * (v % 2 == 0 ? 1000.0 : 0.01));
  };
  Tensor x(g.num_owned(), kWidth), halo;
  for (std::int64_t r = 0; r < g.num_owned(); ++r)
    for (std::int64_t f = 0; f < kWidth; ++f) x.row<float>(r)[f] = value(g.owned_ids[r], f);
  std::string plan;
  for (int epoch = 1; epoch <= 2; ++epoch) {
    exchange.set_noise(3, epoch);
    if (epoch == 2) plan = exchange.replan();
    exchange.start_forward(x, halo, 0);
    exchange.finish_forward(halo);
  }
  double bits_sum = 0.0, rows = 0.0;
  for (std::size_t at = plan.find("bits ("); at != std::string::npos; at = plan.find("bits (", at + 1)) {
    unsigned long n8 = 0, n4 = 0, n2 = 0;
    ASSERT_EQ(std::sscanf(plan.c_str() + at, "bits (8: %lu, 4: %lu, 2: %lu)", &n8, &n4, &n2), 3);
    bits_sum += 8.0 * n8 + 4.0 * n4 + 2.0 * n2;
    rows += static_cast<double>(n8 + n4 + n2);
  }
  if (g.halo.num_send() > 0) {
    ASSERT_GT(rows, 0.0) << plan;
    EXPECT_LE(bits_sum / rows, 4.0 + 1e-9) << plan;
    EXPECT_EQ(plan.find("(8: 0,"), std::string::npos) << "some message has no 8-bit row: " << plan;
    EXPECT_EQ(plan.find("2: 0)"), std::string::npos) << "some message has no 2-bit row: " << plan;
  }
  // With half the rows narrow, the plan puts them at 2 bits and spends the rest on the wide ones
  // (4 or 8 bits): wide rows (even ids) arrive within 4-bit error, narrow ones within 2-bit.
  for (std::int64_t h = 0; h < g.halo.num_halo(); ++h) {
    const GlobalId v = g.halo_ids[h];
    for (std::int64_t f = 0; f < kWidth; ++f) {
      const double range = v % 2 == 0 ? 1000.0 : 0.01;
      const double bound = v % 2 == 0 ? range / 15.0 * 1.01 : range / 3.0 * 1.01;
      EXPECT_LE(std::abs(halo.row<float>(h)[f] - value(v, f)), bound)
          << "rank " << comm.rank() << " halo row of node " << v;
    }
  }
}

// Adaptive: the receivers' aggregation weights travel back to the owners and steer the forward
// plan. Every receiver weighs the rows it gets much more heavily on rank 0 than elsewhere, so
// each other rank's forward messages to rank 0 get more bits than its messages to the others,
// although all carry rows of the same range.
TEST_F(HaloExchangeTest, ReceiverWeightsSteerTheForwardPlan) {
  if (comm.size() != 4) GTEST_SKIP() << "written for 4 ranks";
  const LocalGraph& g = mine().graph;
  ExchangeCodecs codecs;
  codecs.adaptive = true;
  codecs.bit_budget = 5.0;
  codecs.num_layers = 1;
  HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids, codecs);
  std::vector<double> wrong(static_cast<std::size_t>(g.halo.num_halo()) + 1, 1.0);
  EXPECT_THROW(exchange.set_receiver_weights(wrong), Error);
  const std::vector<double> weights(static_cast<std::size_t>(g.halo.num_halo()),
                                    comm.rank() == 0 ? 1000.0 : 0.001);
  exchange.set_receiver_weights(weights);
  Tensor x(g.num_owned(), kWidth), halo;
  for (std::int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = static_cast<float>(i % 13);
  exchange.set_noise(5, 1);
  exchange.start_forward(x, halo, 0);
  exchange.finish_forward(halo);
  const std::string plan = exchange.replan();
  if (comm.rank() == 0) return;
  std::map<int, double> bits;  // mean forward bits by receiving rank
  for (int p = 0; p < 4; ++p) {
    const std::string key = "layer 0 fwd -> rank " + std::to_string(p) + ": ";
    const std::size_t at = plan.find(key);
    if (at != std::string::npos) bits[p] = std::stod(plan.substr(at + key.size()));
  }
  ASSERT_TRUE(bits.count(0)) << plan;
  for (const auto& [p, b] : bits) {
    if (p != 0) {
      EXPECT_GT(bits[0], b) << "rank " << comm.rank() << ": " << plan;
    }
  }
}

// A message whose header does not match what the receiver expects (here: rank 0 sends a raw
// f32 block where rank 1 expects an int8 message) is refused on the receiving rank with a
// message naming the sender and the layer; nothing is decoded from it.
TEST_F(HaloExchangeTest, MismatchedMessageIsRefusedByTheReceiver) {
  if (comm.size() != 2) GTEST_SKIP() << "written for 2 ranks";
  const LocalGraph& g = mine().graph;
  if (g.halo.recv_count(1 - comm.rank()) == 0) GTEST_SKIP() << "no halo between the two parts";
  ExchangeCodecs codecs;
  codecs.forward = CodecKind::Int8;
  HaloExchange exchange(comm, g.halo, g.owned_ids, g.halo_ids, codecs);
  Tensor x = Tensor::zeros(g.num_owned(), kWidth), halo;
  if (comm.rank() == 0) {
    // Rank 0 plays a broken peer: the right tag, the right size, garbage for a header.
    const std::size_t bytes = kMessageHeaderBytes +
        static_cast<std::size_t>(g.halo.send_count(1)) * encoded_row_bytes(CodecKind::Int8, kWidth);
    std::vector<std::byte> garbage(bytes, std::byte{0x5A}), incoming(
        kMessageHeaderBytes + static_cast<std::size_t>(g.halo.recv_count(1)) *
                                  encoded_row_bytes(CodecKind::Int8, kWidth));
    auto receive = comm.irecv(incoming, 1, /*tag of layer 0 forward=*/0);
    comm.isend(garbage, 1, 0, TrafficCategory::HaloForward)->wait();
    receive->wait();
  } else {
    exchange.start_forward(x, halo, 0);
    try {
      exchange.finish_forward(halo);
      ADD_FAILURE() << "a garbage message was decoded";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidInput);
      EXPECT_NE(e.message().find("halo forward from rank 0, layer 0"), std::string::npos)
          << e.message();
    }
  }
}

TEST(HaloPlan, ValidateRefusesBrokenPlans) {
  HaloPlan plan;
  plan.send_offsets = {0, 0, 2};
  plan.send_rows = {0, 1};
  plan.recv_offsets = {0, 0, 3};
  EXPECT_NO_THROW(plan.validate(2, 0, "plan"));
  EXPECT_THROW(plan.validate(1, 0, "plan"), Error);  // row 1 not owned
  EXPECT_THROW(plan.validate(2, 1, "plan"), Error);  // part 1 would send to itself
  plan.recv_offsets = {0, 2, 1};
  EXPECT_THROW(plan.validate(2, 0, "plan"), Error);  // decreasing offsets
}

}  // namespace
}  // namespace tessera
