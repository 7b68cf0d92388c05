// SPDX-License-Identifier: Apache-2.0
// Pipeline building blocks in one process: the layer balance and the rank layout with their
// refusals (InvalidArgument naming the flag), METIS chunks, the chunk-ordered operator, the
// historical buffers of a chunk's aggregation (fresh rows of chunks already done this epoch,
// stale rows of the others, halo rows and remote gradients) on hand-checkable graphs, the stage
// memory estimate and the traffic model formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "engine/chunk_graph.h"
#include "engine/pipeline.h"
#include "engine/pipeline_mode.h"
#include "engine/traffic_model.h"
#include "engine/train_config.h"
#include "layers/propagator.h"

namespace tessera {
namespace {

using Dense = std::vector<std::vector<float>>;  // (rows, cols)

// Expects `f` to throw tessera::Error of `category` whose message holds every piece.
template <class F>
void expect_error(F&& f, ErrorCategory category, const std::vector<std::string>& pieces) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one holding '" << pieces.front() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), category) << e.what();
    for (const std::string& piece : pieces)
      EXPECT_NE(e.message().find(piece), std::string::npos)
          << "'" << piece << "' not in: " << e.message();
  }
}

Dense to_dense(const Csr& a) {
  Dense d(static_cast<std::size_t>(a.num_rows()),
          std::vector<float>(static_cast<std::size_t>(a.num_cols()), 0.0f));
  for (std::int64_t r = 0; r < a.num_rows(); ++r)
    for (EdgeOffset e = a.indptr()[r]; e < a.indptr()[r + 1]; ++e)
      d[r][a.indices()[e]] += a.has_values() ? a.values()[e] : 1.0f;
  return d;
}

// A CSR from (row, col, weight) triples (rows sorted by column here).
Csr csr_of(std::int64_t rows, std::int64_t cols,
           std::vector<std::tuple<NodeId, NodeId, float>> entries) {
  std::sort(entries.begin(), entries.end());
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(rows) + 1, 0);
  std::vector<NodeId> indices;
  std::vector<float> values;
  for (const auto& [r, c, w] : entries) {
    ++indptr[static_cast<std::size_t>(r) + 1];
    indices.push_back(c);
    values.push_back(w);
  }
  std::partial_sum(indptr.begin(), indptr.end(), indptr.begin());
  return Csr(rows, cols, std::move(indptr), std::move(indices), std::move(values));
}

Tensor column(const std::vector<float>& values) {
  Tensor t(static_cast<std::int64_t>(values.size()), 1);
  std::copy(values.begin(), values.end(), t.f32());
  return t;
}

std::vector<float> values_of(const Tensor& t) { return {t.f32(), t.f32() + t.numel()}; }

// A chunk layout given by the owned rows of every chunk (increasing inside a chunk).
ChunkLayout layout_of(const std::vector<std::vector<NodeId>>& chunks) {
  ChunkLayout l;
  for (const auto& rows : chunks) {
    l.offsets.push_back(l.offsets.back() + static_cast<std::int64_t>(rows.size()));
    l.order.insert(l.order.end(), rows.begin(), rows.end());
  }
  l.position.resize(l.order.size());
  for (std::size_t p = 0; p < l.order.size(); ++p) l.position[l.order[p]] = static_cast<NodeId>(p);
  return l;
}

// ---------------------------------------------------------------------------------------------
// Layer balance and layout.

TEST(BalanceLayers, HandCheckedSplits) {
  const std::vector<double> four(4, 1.0), eight(8, 1.0);
  EXPECT_EQ(balance_layers(four, 1), (std::vector<int>{0, 4}));
  EXPECT_EQ(balance_layers(four, 2), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(balance_layers(eight, 4), (std::vector<int>{0, 2, 4, 6, 8}));
  // 4 equal layers on 3 stages: the costliest stage holds 2 whatever the split; the earliest
  // cuts win ties, so the last stage gets the pair.
  EXPECT_EQ(balance_layers(four, 3), (std::vector<int>{0, 1, 2, 4}));
  // One expensive layer gets a stage to itself; the cheap ones share the rest.
  const std::vector<double> first_heavy = {10, 1, 1, 1}, last_heavy = {1, 1, 1, 10},
                            middle_heavy = {1, 10, 1, 1};
  EXPECT_EQ(balance_layers(first_heavy, 2), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(balance_layers(last_heavy, 2), (std::vector<int>{0, 3, 4}));
  EXPECT_EQ(balance_layers(middle_heavy, 3), (std::vector<int>{0, 1, 2, 4}));
  // Stages == layers: one layer each, whatever the costs.
  const std::vector<double> uneven = {5, 1, 7};
  EXPECT_EQ(balance_layers(uneven, 3), (std::vector<int>{0, 1, 2, 3}));
  // Costs 6 1 2 3 4 on 3 stages: the only split with no stage above 6 is 6 | 1 2 3 | 4.
  const std::vector<double> mixed = {6, 1, 2, 3, 4};
  EXPECT_EQ(balance_layers(mixed, 3), (std::vector<int>{0, 1, 4, 5}));
}

TEST(BalanceLayers, RefusesMoreStagesThanLayersAndNoStage) {
  const std::vector<double> three(3, 1.0);
  expect_error([&] { balance_layers(three, 4); }, ErrorCategory::InvalidArgument,
               {"--stages 4", "--num-layers 3"});
  expect_error([&] { balance_layers(three, 0); }, ErrorCategory::InvalidArgument, {"--stages 0"});
  expect_error([&] { balance_layers(three, -1); }, ErrorCategory::InvalidArgument,
               {"--stages -1"});
}

TEST(LayerCosts, HandComputed) {
  // GCN 10 -> 4 -> 3 on 5 nodes and 7 operator entries: 2 nnz min(F_in, F_out) + 2 N F_in F_out.
  EXPECT_EQ(layer_costs(ModelKind::Gcn, 2, 10, 4, 3, 5, 7),
            (std::vector<double>{2.0 * 7 * 4 + 2.0 * 5 * 10 * 4, 2.0 * 7 * 3 + 2.0 * 5 * 4 * 3}));
  // SAGE has a second (root) weight: twice the GEMM.
  EXPECT_EQ(layer_costs(ModelKind::Sage, 2, 10, 4, 3, 5, 7),
            (std::vector<double>{56.0 + 800.0, 42.0 + 240.0}));
  // Cora-like (1433 features): the first layer is the costliest, so 2 stages of an 8-layer model
  // give the first stage fewer layers.
  const std::vector<double> cost = layer_costs(ModelKind::ResGcn, 8, 1433, 64, 7, 2708, 13264);
  const std::vector<int> first = balance_layers(cost, 2);
  EXPECT_LT(first[1], 4);
  EXPECT_GE(first[1], 1);
}

TrainConfig layout_config(ParallelMode mode, int layers, int stages, int chunks) {
  TrainConfig c;
  c.parallel = to_string(mode);
  c.num_layers = layers;
  c.stages = stages;
  c.chunks = chunks;
  return c;
}

PipelineLayout layout_for(const TrainConfig& c, int rank, int ranks) {
  const std::vector<double> cost(static_cast<std::size_t>(c.num_layers), 1.0);
  return pipeline_layout(c, rank, ranks, cost);
}

TEST(PipelineLayoutTest, RefusesEveryBadInputNamingTheFlag) {
  using M = ParallelMode;
  const auto bad = [](const TrainConfig& c, int ranks, std::vector<std::string> pieces) {
    SCOPED_TRACE(pieces.front());
    expect_error([&] { layout_for(c, 0, ranks); }, ErrorCategory::InvalidArgument, pieces);
  };
  // More stages than layers (pipeline: one stage per rank; hybrid: --stages).
  bad(layout_config(M::Pipeline, 3, 0, 0), 4, {"--stages 4", "--num-layers 3"});
  bad(layout_config(M::Hybrid, 3, 4, 0), 4, {"--stages 4", "--num-layers 3"});
  // Hybrid: more stages than ranks; ranks not a multiple of the stages; no stage.
  bad(layout_config(M::Hybrid, 8, 4, 0), 2, {"--stages 4", "2 ranks"});
  bad(layout_config(M::Hybrid, 8, 3, 0), 4, {"--stages 3", "multiple"});
  bad(layout_config(M::Hybrid, 8, 0, 0), 4, {"--stages 0"});
  // Pipeline: --stages must equal the ranks.
  bad(layout_config(M::Pipeline, 8, 3, 0), 2, {"--stages 3", "2 ranks", "--parallel pipeline"});
  bad(layout_config(M::Pipeline, 8, 1, 0), 2, {"--stages 1", "2 ranks"});
  // Fewer chunks than stages.
  bad(layout_config(M::Pipeline, 8, 0, 1), 2, {"--chunks 1", "--stages 2"});
  bad(layout_config(M::Hybrid, 8, 2, 1), 4, {"--chunks 1", "--stages 2"});
}

TEST(PipelineLayoutTest, RanksMapToGroupAndStage) {
  // Pipeline: K stages over one part; --stages 0 means the ranks; chunks default to the stages.
  for (int r = 0; r < 4; ++r) {
    const PipelineLayout l = layout_for(layout_config(ParallelMode::Pipeline, 8, 0, 0), r, 4);
    EXPECT_EQ(l.mode, ParallelMode::Pipeline);
    EXPECT_EQ(l.groups, 1);
    EXPECT_EQ(l.stages, 4);
    EXPECT_EQ(l.group, 0);
    EXPECT_EQ(l.stage, r);
    EXPECT_EQ(l.chunks, 4);
    EXPECT_EQ(l.stage_first, (std::vector<int>{0, 2, 4, 6, 8}));
    EXPECT_EQ(l.first_layer(), 2 * r);
    EXPECT_EQ(l.num_layers(), 2);
    EXPECT_EQ(l.first_stage(), r == 0);
    EXPECT_EQ(l.last_stage(), r == 3);
  }
  // Hybrid 6 = 2 parts x 3 stages, 5 chunks: rank -> (rank / S, rank % S).
  for (int r = 0; r < 6; ++r) {
    const PipelineLayout l = layout_for(layout_config(ParallelMode::Hybrid, 6, 3, 5), r, 6);
    EXPECT_EQ(l.mode, ParallelMode::Hybrid);
    EXPECT_EQ(l.groups, 2);
    EXPECT_EQ(l.stages, 3);
    EXPECT_EQ(l.group, r / 3) << "rank " << r;
    EXPECT_EQ(l.stage, r % 3) << "rank " << r;
    EXPECT_EQ(l.chunks, 5);
    EXPECT_EQ(l.stage_first, (std::vector<int>{0, 2, 4, 6}));
  }
  // Hybrid with one stage is graph parallelism over K parts; pipeline on one rank is one stage.
  const PipelineLayout h = layout_for(layout_config(ParallelMode::Hybrid, 3, 1, 0), 2, 4);
  EXPECT_EQ(h.groups, 4);
  EXPECT_EQ(h.group, 2);
  EXPECT_EQ(h.stage, 0);
  const PipelineLayout one = layout_for(layout_config(ParallelMode::Pipeline, 3, 0, 3), 0, 1);
  EXPECT_EQ(one.stages, 1);
  EXPECT_EQ(one.chunks, 3);
  EXPECT_EQ(one.stage_first, (std::vector<int>{0, 3}));
}

TEST(PipelineLayoutTest, ValidateRefusesWhatPipelinesCannotDo) {
  const auto bad = [](TrainConfig c, std::vector<std::string> pieces) {
    SCOPED_TRACE(pieces.front());
    expect_error([&] { validate(c); }, ErrorCategory::InvalidArgument, pieces);
  };
  TrainConfig graph;
  graph.stages = 2;
  bad(graph, {"--stages"});
  graph.stages = 0;
  graph.chunks = 2;
  bad(graph, {"--chunks"});
  TrainConfig c = layout_config(ParallelMode::Pipeline, 4, 0, 0);
  c.batch_norm = true;
  bad(c, {"--batch-norm"});
  c = layout_config(ParallelMode::Pipeline, 4, 0, 0);
  c.codec = "adaptive";
  bad(c, {"--codec adaptive"});
  c = layout_config(ParallelMode::Hybrid, 4, 2, 0);
  c.error_feedback = true;
  bad(c, {"--error-feedback"});
  bad(layout_config(ParallelMode::Hybrid, 4, 0, 0), {"--stages"});
  bad(layout_config(ParallelMode::Hybrid, 4, 2, 1), {"--chunks 1", "--stages 2"});
  c = layout_config(ParallelMode::Pipeline, 4, 0, 0);
  c.memory_budget = -1.0;
  bad(c, {"--memory-budget"});
  // The fixed codecs apply to the streams; checkpoints and model files hold the whole model.
  c = layout_config(ParallelMode::Pipeline, 4, 0, 0);
  c.codec = "int8";
  c.checkpoint_dir = "/tmp/x";
  c.save_model = "/tmp/x.h5";
  EXPECT_NO_THROW(validate(c));
}

// ---------------------------------------------------------------------------------------------
// Chunks and the chunk-ordered operator.

// A 10 x 6 grid (owned, 60 nodes) plus 5 halo columns hanging off some rows: (60, 65).
Csr grid_with_halo() {
  std::vector<std::tuple<NodeId, NodeId, float>> e;
  const int w = 10, h = 6;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const NodeId v = y * w + x;
      if (x + 1 < w) e.emplace_back(v, v + 1, 1.0f), e.emplace_back(v + 1, v, 1.0f);
      if (y + 1 < h) e.emplace_back(v, v + w, 1.0f), e.emplace_back(v + w, v, 1.0f);
    }
  }
  for (NodeId k = 0; k < 5; ++k) e.emplace_back(k * 11, 60 + k, 1.0f);
  return csr_of(60, 65, std::move(e));
}

void expect_valid_layout(const ChunkLayout& l, std::int64_t n, int chunks) {
  ASSERT_EQ(l.num_chunks(), chunks);
  ASSERT_EQ(l.offsets.size(), static_cast<std::size_t>(chunks) + 1);
  EXPECT_EQ(l.offsets.front(), 0);
  EXPECT_EQ(l.offsets.back(), n);
  ASSERT_EQ(l.order.size(), static_cast<std::size_t>(n));
  ASSERT_EQ(l.position.size(), static_cast<std::size_t>(n));
  for (int c = 0; c < chunks; ++c) {
    EXPECT_GT(l.size(c), 0) << "chunk " << c << " is empty";
    EXPECT_EQ(l.begin(c) + l.size(c), l.offsets[static_cast<std::size_t>(c) + 1]);
    for (std::int64_t p = l.begin(c) + 1; p < l.begin(c) + l.size(c); ++p)
      EXPECT_LT(l.order[p - 1], l.order[p]) << "chunk " << c << " is not in increasing order";
  }
  std::vector<int> seen(static_cast<std::size_t>(n), 0);
  for (std::int64_t p = 0; p < n; ++p) {
    const NodeId v = l.order[static_cast<std::size_t>(p)];
    ASSERT_GE(v, 0);
    ASSERT_LT(v, n);
    ++seen[static_cast<std::size_t>(v)];
    EXPECT_EQ(l.position[static_cast<std::size_t>(v)], p) << "order and position disagree";
  }
  for (std::int64_t v = 0; v < n; ++v) EXPECT_EQ(seen[v], 1) << "row " << v;
}

TEST(MakeChunks, PartitionsEveryRowIntoIncreasingBlocks) {
  const Csr a = grid_with_halo();
  std::vector<NodeId> train(30);
  std::iota(train.begin(), train.end(), 0);
  for (int chunks : {1, 2, 3, 4, 7, 60}) {
    SCOPED_TRACE("chunks " + std::to_string(chunks));
    const ChunkLayout l = make_chunks(a, train, chunks, /*seed=*/5);
    expect_valid_layout(l, 60, chunks);
    if (chunks == 1) {
      std::vector<NodeId> identity(60);
      std::iota(identity.begin(), identity.end(), 0);
      EXPECT_EQ(l.order, identity);
      EXPECT_EQ(l.position, identity);
    }
    // The same seed gives the same chunks.
    const ChunkLayout again = make_chunks(a, train, chunks, 5);
    EXPECT_EQ(again.order, l.order);
    EXPECT_EQ(again.offsets, l.offsets);
  }
  // METIS keeps grid neighbours together: 2 chunks cut far fewer than the 208 directed
  // owned entries (a straight cut of the 10 x 6 grid crosses 12).
  const ChunkLayout two = make_chunks(a, train, 2, 5);
  std::int64_t cut = 0;
  for (std::int64_t v = 0; v < 60; ++v)
    for (EdgeOffset e = a.indptr()[v]; e < a.indptr()[v + 1]; ++e) {
      const NodeId u = a.indices()[e];
      if (u < 60 && (two.position[v] < two.offsets[1]) != (two.position[u] < two.offsets[1])) ++cut;
    }
  EXPECT_LE(cut, 40);
}

TEST(MakeChunks, RefusesMoreChunksThanRows) {
  const Csr a = grid_with_halo();
  expect_error([&] { make_chunks(a, {}, 61, 0); }, ErrorCategory::InvalidArgument,
               {"--chunks 61", "60 nodes"});
  expect_error([&] { make_chunks(a, {}, 0, 0); }, ErrorCategory::InvalidArgument, {"--chunks 0"});
}

// A (5, 7): 5 owned rows, 2 halo columns, weighted and not symmetric.
Csr small_operator() {
  return csr_of(5, 7, {{0, 0, 1.0f}, {0, 1, 2.0f}, {0, 5, 3.0f},
                       {1, 0, 4.0f}, {1, 3, 5.0f},
                       {2, 2, 6.0f}, {2, 4, 7.0f}, {2, 6, 8.0f},
                       {3, 1, 9.0f}, {3, 4, 10.0f},
                       {4, 2, 11.0f}, {4, 5, 12.0f}, {4, 6, 13.0f}});
}

TEST(ChunkedOperatorTest, BlocksReassembleTheOperatorInChunkOrder) {
  const Csr a = small_operator();
  const Dense ad = to_dense(a);
  const ChunkLayout l = layout_of({{1, 3}, {0, 2, 4}});  // order 1 3 0 2 4
  const std::int64_t n = 5, h = 2;
  const ChunkedOperator op(a, MatrixSymmetry::General, l);
  ASSERT_EQ(op.num_owned(), n);
  ASSERT_EQ(op.num_halo(), h);
  // whole() = P A P^T on the owned columns, halo columns unchanged.
  const Dense whole = to_dense(op.whole());
  for (std::int64_t p = 0; p < n; ++p) {
    for (std::int64_t q = 0; q < n; ++q)
      EXPECT_EQ(whole[p][q], ad[l.order[p]][l.order[q]]) << "(" << p << ", " << q << ")";
    for (std::int64_t k = n; k < n + h; ++k) EXPECT_EQ(whole[p][k], ad[l.order[p]][k]);
  }
  // Per chunk: owned (n_c, N), halo (n_c, H) and owned_t (rows of the owned block's transpose).
  for (int c = 0; c < l.num_chunks(); ++c) {
    const Dense owned = to_dense(op.owned(c)), halo = to_dense(op.halo(c)),
                owned_t = to_dense(op.owned_t(c));
    ASSERT_EQ(static_cast<std::int64_t>(owned.size()), l.size(c));
    ASSERT_EQ(op.owned(c).num_cols(), n);
    ASSERT_EQ(op.halo(c).num_cols(), h);
    ASSERT_EQ(op.owned_t(c).num_cols(), n);
    for (std::int64_t i = 0; i < l.size(c); ++i) {
      const std::int64_t p = l.begin(c) + i;
      for (std::int64_t q = 0; q < n; ++q) {
        EXPECT_EQ(owned[i][q], whole[p][q]) << "chunk " << c;
        EXPECT_EQ(owned_t[i][q], whole[q][p]) << "chunk " << c;
      }
      for (std::int64_t k = 0; k < h; ++k) EXPECT_EQ(halo[i][k], whole[p][n + k]);
    }
  }
  // halo_t (H, N) = the halo block transposed.
  const Dense halo_t = to_dense(op.halo_t());
  ASSERT_EQ(op.halo_t().num_rows(), h);
  for (std::int64_t k = 0; k < h; ++k)
    for (std::int64_t p = 0; p < n; ++p) EXPECT_EQ(halo_t[k][p], whole[p][n + k]);
  // Symmetric: owned_t is the owned block itself.
  const ChunkedOperator sym(a, MatrixSymmetry::Symmetric, l);
  EXPECT_EQ(&sym.owned_t(1), &sym.owned(1));
}

// ---------------------------------------------------------------------------------------------
// The historical buffers.

// The 6-cycle 0-1-2-3-4-5-0 with unit weights and two halo nodes: h0 (column 6) next to node 1,
// h1 (column 7) next to node 4. Chunk 0 = {0, 1, 2}, chunk 1 = {3, 4, 5}. The owned block is
// symmetric.
Csr cycle_with_halo() {
  std::vector<std::tuple<NodeId, NodeId, float>> e;
  for (NodeId v = 0; v < 6; ++v) {
    e.emplace_back(v, (v + 1) % 6, 1.0f);
    e.emplace_back(v, (v + 5) % 6, 1.0f);
  }
  e.emplace_back(1, 6, 1.0f);
  e.emplace_back(4, 7, 1.0f);
  return csr_of(6, 8, std::move(e));
}

// Global ids of an operator's columns in chunk order: 100 + position, halo rows 200 + k.
struct Ids {
  std::vector<GlobalId> owned, halo;
};
Ids ids_of(const ChunkedOperator& op) {
  Ids ids;
  for (std::int64_t p = 0; p < op.num_owned(); ++p) ids.owned.push_back(100 + p);
  for (std::int64_t k = 0; k < op.num_halo(); ++k) ids.halo.push_back(200 + k);
  return ids;
}

TEST(ChunkPropagatorTest, ForwardReadsFreshRowsOfDoneChunksAndStaleRowsOfTheRest) {
  const ChunkLayout l = layout_of({{0, 1, 2}, {3, 4, 5}});
  const ChunkedOperator op(cycle_with_halo(), MatrixSymmetry::Symmetric, l);
  History history(6, 2, /*first_layer=*/2, /*num_layers=*/1);
  const int layer = 2;
  // Last epoch's inputs: 10 (v + 1); the halo rows from the last refresh: 1000, 2000.
  History::Layer& h = history.sized(layer, 1);
  for (int v = 0; v < 6; ++v) h.inputs.f32()[v] = 10.0f * static_cast<float>(v + 1);
  h.halo_inputs.f32()[0] = 1000.0f;
  h.halo_inputs.f32()[1] = 2000.0f;
  const Ids ids = ids_of(op);
  ChunkPropagator chunk0(op, history, l, 0, ids.owned, ids.halo),
      chunk1(op, history, l, 1, ids.owned, ids.halo);
  EXPECT_EQ(chunk0.num_rows(), 3);
  // This epoch's inputs: v + 1.
  Tensor out0, out1;
  chunk0.forward(out0, column({1, 2, 3}), layer);
  // node 0: x1 + stale x5 = 2 + 60; node 1: x0 + x2 + h0 = 1 + 3 + 1000; node 2: x1 + stale x3.
  EXPECT_EQ(values_of(out0), (std::vector<float>{62, 1004, 42}));
  chunk1.forward(out1, column({4, 5, 6}), layer);
  // node 3: fresh x2 + x4 = 3 + 5; node 4: x3 + x5 + h1 = 4 + 6 + 2000; node 5: x4 + fresh x0.
  EXPECT_EQ(values_of(out1), (std::vector<float>{8, 2010, 6}));
  // The buffer now holds this epoch's inputs: the next epoch's chunk 0 reads them.
  EXPECT_EQ(values_of(history.layer(layer).inputs), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  chunk0.forward(out0, column({-1, -2, -3}), layer);
  EXPECT_EQ(values_of(out0), (std::vector<float>{-2 + 6, -1 - 3 + 1000, -2 + 4}));
}

TEST(ChunkPropagatorTest, BackwardReadsFreshGradientsOfDoneChunksAndStaleOnesOfTheRest) {
  const ChunkLayout l = layout_of({{0, 1, 2}, {3, 4, 5}});
  const ChunkedOperator op(cycle_with_halo(), MatrixSymmetry::Symmetric, l);
  History history(6, 2, 0, 1);
  History::Layer& h = history.sized(0, 1);
  // Last epoch's output gradients: 10 (v + 1); what the other parts sent back: 1000 to node 1,
  // 2000 to node 4.
  for (int v = 0; v < 6; ++v) h.grads.f32()[v] = 10.0f * static_cast<float>(v + 1);
  h.remote_grads.f32()[1] = 1000.0f;
  h.remote_grads.f32()[4] = 2000.0f;
  EXPECT_FALSE(h.backward_used);
  const Ids ids = ids_of(op);
  ChunkPropagator chunk0(op, history, l, 0, ids.owned, ids.halo),
      chunk1(op, history, l, 1, ids.owned, ids.halo);
  Tensor d_x0, d_x1;
  chunk0.backward(d_x0, column({1, 2, 3}), 0);
  // node 0: g1 + stale g5 = 2 + 60; node 1: g0 + g2 + remote = 1 + 3 + 1000; node 2: g1 + stale g3.
  EXPECT_EQ(values_of(d_x0), (std::vector<float>{62, 1004, 42}));
  chunk1.backward(d_x1, column({4, 5, 6}), 0);
  // node 3: fresh g2 + g4; node 4: g3 + g5 + remote 2000; node 5: g4 + fresh g0.
  EXPECT_EQ(values_of(d_x1), (std::vector<float>{8, 2010, 6}));
  EXPECT_TRUE(history.layer(0).backward_used);
  EXPECT_EQ(values_of(history.layer(0).grads), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // A new run starts from zero buffers.
  history.clear();
  chunk0.backward(d_x0, column({1, 2, 3}), 0);
  EXPECT_EQ(values_of(d_x0), (std::vector<float>{2, 4, 2}));
}

// One epoch of 3 chunks (permuted order, weighted, not symmetric, width 3) against a dense
// reference of the same fresh/stale rule, forward then backward in chunk order.
TEST(ChunkPropagatorTest, ThreeChunksMatchTheDenseStalenessRule) {
  const std::int64_t n = 9, halo = 3, f = 3;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> weight(0.25f, 2.0f), value(-1.0f, 1.0f);
  std::vector<std::tuple<NodeId, NodeId, float>> e;
  for (NodeId v = 0; v < n; ++v)
    for (NodeId u = 0; u < n + halo; ++u)
      if ((v * 5 + u * 3) % 4 == 0) e.emplace_back(v, u, weight(gen));
  const Csr a = csr_of(n, n + halo, e);
  const Dense ad = to_dense(a);
  const ChunkLayout l = layout_of({{2, 5, 7}, {0, 4}, {1, 3, 6, 8}});
  const ChunkedOperator op(a, MatrixSymmetry::General, l);
  History history(n, halo, 0, 1);
  History::Layer& h = history.sized(0, f);
  Dense stale_x(n, std::vector<float>(f)), stale_g(n, std::vector<float>(f)),
      halo_x(halo, std::vector<float>(f)), remote(n, std::vector<float>(f)), x(n, std::vector<float>(f)),
      g(n, std::vector<float>(f));
  // The buffers are in chunk order: position p holds owned row l.order[p].
  for (std::int64_t p = 0; p < n; ++p) {
    const NodeId v = l.order[p];
    for (std::int64_t j = 0; j < f; ++j) {
      h.inputs.row<float>(p)[j] = stale_x[v][j] = value(gen);
      h.grads.row<float>(p)[j] = stale_g[v][j] = value(gen);
      h.remote_grads.row<float>(p)[j] = remote[v][j] = value(gen);
      x[v][j] = value(gen);
      g[v][j] = value(gen);
    }
  }
  for (std::int64_t k = 0; k < halo; ++k)
    for (std::int64_t j = 0; j < f; ++j) h.halo_inputs.row<float>(k)[j] = halo_x[k][j] = value(gen);
  std::vector<int> chunk_of(n);
  for (int c = 0; c < l.num_chunks(); ++c)
    for (std::int64_t p = l.begin(c); p < l.begin(c) + l.size(c); ++p) chunk_of[l.order[p]] = c;
  const Ids ids = ids_of(op);

  for (const bool backward : {false, true}) {
    for (int c = 0; c < l.num_chunks(); ++c) {
      SCOPED_TRACE(std::string(backward ? "backward" : "forward") + " chunk " + std::to_string(c));
      ChunkPropagator prop(op, history, l, c, ids.owned, ids.halo);
      const Dense& fresh = backward ? g : x;
      const Dense& stale = backward ? stale_g : stale_x;
      Tensor in(l.size(c), f), out;
      for (std::int64_t i = 0; i < l.size(c); ++i)
        for (std::int64_t j = 0; j < f; ++j) in.row<float>(i)[j] = fresh[l.order[l.begin(c) + i]][j];
      backward ? prop.backward(out, in, 0) : prop.forward(out, in, 0);
      ASSERT_EQ(out.rows(), l.size(c));
      for (std::int64_t i = 0; i < l.size(c); ++i) {
        const NodeId v = l.order[l.begin(c) + i];
        for (std::int64_t j = 0; j < f; ++j) {
          double want = 0.0;
          for (NodeId u = 0; u < n; ++u) {
            // Rows of chunks up to this one are this epoch's, the rest last epoch's.
            const double val = chunk_of[u] <= c ? fresh[u][j] : stale[u][j];
            want += (backward ? ad[u][v] : ad[v][u]) * val;
          }
          if (backward) {
            want += remote[v][j];
          } else {
            for (std::int64_t k = 0; k < halo; ++k) want += ad[v][n + k] * halo_x[k][j];
          }
          EXPECT_NEAR(out.row<float>(i)[j], want, 1e-5) << "row " << v << ", column " << j;
        }
      }
    }
  }
}

// The attention path (HaloAccess): a chunk's pattern is its rows over its own columns and then
// the other chunks' and halo columns it reads; forward reads those rows from the history (fresh
// for chunks done this epoch, stale for the rest, halo rows from the last refresh), backward
// pushes their gradients into it and takes what the other chunks pushed to the chunk's rows.
TEST(ChunkPropagatorTest, AttentionPathPushesGradientsUnderTheStalenessRule) {
  const ChunkLayout l = layout_of({{0, 1, 2}, {3, 4, 5}});
  const ChunkedOperator op(cycle_with_halo(), MatrixSymmetry::Symmetric, l);
  History history(6, 2, /*first_layer=*/1, /*num_layers=*/1);
  const int layer = 1;
  history.layer(layer).pushed = true;
  History::Layer& h = history.sized(layer, 1);
  for (int v = 0; v < 6; ++v) h.inputs.f32()[v] = 10.0f * static_cast<float>(v + 1);  // stale
  h.halo_inputs.f32()[0] = 1000.0f;
  h.halo_inputs.f32()[1] = 2000.0f;
  const Ids ids = ids_of(op);
  ChunkPropagator chunk0(op, history, l, 0, ids.owned, ids.halo),
      chunk1(op, history, l, 1, ids.owned, ids.halo);
  HaloAccess& a0 = *chunk0.halo_access();
  HaloAccess& a1 = *chunk1.halo_access();
  // Chunk 0 = rows 0, 1, 2 reads 3 (from 2), 5 (from 0) and halo 0 (from 1): columns 3, 4, 5.
  ASSERT_EQ(a0.pattern().num_rows(), 3);
  ASSERT_EQ(a0.pattern().num_cols(), 6);
  EXPECT_EQ(to_dense(a0.pattern()), (Dense{{0, 1, 0, 0, 1, 0}, {1, 0, 1, 0, 0, 1}, {0, 1, 0, 1, 0, 0}}));
  EXPECT_EQ(std::vector<GlobalId>(a0.column_ids().begin(), a0.column_ids().end()),
            (std::vector<GlobalId>{100, 101, 102, 103, 105, 200}));
  EXPECT_TRUE(a0.inner_rows().empty());
  EXPECT_EQ(a0.boundary_rows().size(), 3u);
  // Chunk 1 = rows 3, 4, 5 reads 0 (from 5), 2 (from 3) and halo 1 (from 4).
  EXPECT_EQ(std::vector<GlobalId>(a1.column_ids().begin(), a1.column_ids().end()),
            (std::vector<GlobalId>{103, 104, 105, 100, 102, 201}));

  // Forward: this epoch's rows are v + 1.
  Tensor rows0 = column({1, 2, 3, -7, -7, -7});
  a0.start_forward(rows0, layer);
  a0.finish_forward(rows0);
  EXPECT_EQ(values_of(rows0), (std::vector<float>{1, 2, 3, 40, 60, 1000}));  // stale 3 and 5
  Tensor rows1 = column({4, 5, 6, -7, -7, -7});
  a1.start_forward(rows1, layer);
  a1.finish_forward(rows1);
  EXPECT_EQ(values_of(rows1), (std::vector<float>{4, 5, 6, 1, 3, 2000}));  // fresh 0 and 2
  EXPECT_EQ(values_of(h.inputs), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  // Backward. Pushed to rows 0-2 last epoch (by chunk 1): 0.5, 0.25, 0.125; the other parts
  // sent 1000 to row 1 and 2000 to row 4.
  h.grads.f32()[0] = 0.5f;
  h.grads.f32()[1] = 0.25f;
  h.grads.f32()[2] = 0.125f;
  h.remote_grads.f32()[1] = 1000.0f;
  h.remote_grads.f32()[4] = 2000.0f;
  Tensor d0 = column({1, 2, 3, 10, 20, 30});  // own rows, then pushes to 3, 5 and halo 0
  a0.start_backward(d0, layer);
  a0.finish_backward(d0);
  EXPECT_EQ(values_of(d0).at(0), 1.5f);
  EXPECT_EQ(values_of(d0).at(1), 1002.25f);
  EXPECT_EQ(values_of(d0).at(2), 3.125f);
  EXPECT_TRUE(h.backward_used);
  Tensor d1 = column({4, 5, 6, 7, 8, 9});  // own rows, then pushes to 0, 2 and halo 1
  a1.start_backward(d1, layer);
  a1.finish_backward(d1);
  // Fresh pushes of chunk 0 (10 to row 3, 20 to row 5) and the other parts' 2000 to row 4.
  EXPECT_EQ(values_of(d1), (std::vector<float>{14, 2005, 26, 7, 8, 9}));
  // Left for the next epoch: chunk 1's pushes to rows 0 and 2; to the halo rows: 30 and 9.
  EXPECT_EQ(values_of(h.grads), (std::vector<float>{7, 0, 8, 0, 0, 0}));
  EXPECT_EQ(values_of(h.halo_grads), (std::vector<float>{30, 9}));
}

// One chunk and no halo: the attention pattern is the operator, the columns the rows.
TEST(ChunkPropagatorTest, OneChunkAttentionPathIsTheOperator) {
  const ChunkLayout l = layout_of({{0, 1, 2, 3, 4, 5}});
  const Csr a = cycle_with_halo();
  const ChunkedOperator op(a, MatrixSymmetry::Symmetric, l);
  History history(6, 2, 0, 1);
  const Ids ids = ids_of(op);
  ChunkPropagator chunk(op, history, l, 0, ids.owned, ids.halo);
  const HaloAccess& access = *chunk.halo_access();
  EXPECT_EQ(to_dense(access.pattern()), to_dense(a));
  EXPECT_EQ(access.column_ids().size(), 8u);
  EXPECT_EQ(access.column_ids()[7], 201);
  EXPECT_EQ(access.boundary_rows().size(), 2u);  // rows 1 and 4 read a halo row
  EXPECT_EQ(access.inner_rows().size(), 4u);
}

// One chunk and no halo: the chunk propagator is the plain SpMM, bit for bit.
TEST(ChunkPropagatorTest, OneChunkEqualsLocalPropagatorExactly) {
  const std::int64_t n = 50;
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> weight(0.1f, 1.0f), value(-1.0f, 1.0f);
  std::vector<std::tuple<NodeId, NodeId, float>> e;
  for (NodeId v = 0; v < n; ++v)
    for (NodeId u = 0; u < n; ++u)
      if ((v * 7 + u * 13) % 9 == 0 || u == v) e.emplace_back(v, u, weight(gen));
  const Csr a = csr_of(n, n, e);
  std::vector<NodeId> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  const ChunkLayout l = layout_of({identity});
  for (const std::int64_t f : {1, 7, 33}) {
    const ChunkedOperator op(a, MatrixSymmetry::General, l);
    History history(n, 0, 0, 1);
    const Ids ids = ids_of(op);
    ChunkPropagator chunk(op, history, l, 0, ids.owned, ids.halo);
    LocalPropagator local(a, MatrixSymmetry::General);
    Tensor x(n, f);
    for (std::int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = value(gen);
    Tensor y_chunk, y_local, d_chunk, d_local;
    chunk.forward(y_chunk, x, 0);
    local.forward(y_local, x, 0);
    chunk.backward(d_chunk, x, 0);
    local.backward(d_local, x, 0);
    ASSERT_TRUE(y_chunk.same_shape(y_local));
    ASSERT_TRUE(d_chunk.same_shape(d_local));
    EXPECT_EQ(std::memcmp(y_chunk.f32(), y_local.f32(), y_local.bytes()), 0) << "F = " << f;
    EXPECT_EQ(std::memcmp(d_chunk.f32(), d_local.f32(), d_local.bytes()), 0) << "F = " << f;
  }
}

// ---------------------------------------------------------------------------------------------
// Memory estimate and traffic model.

PipelineLayout stage_layout(int stages, int stage, int layers) {
  PipelineLayout l;
  l.stages = stages;
  l.stage = stage;
  l.chunks = stages;
  l.stage_first = balance_layers(std::vector<double>(static_cast<std::size_t>(layers), 1.0), stages);
  return l;
}

std::uint64_t largest_stage(int stages, std::int64_t nodes, std::int64_t halo, std::int64_t nnz) {
  std::uint64_t most = 0;
  for (int s = 0; s < stages; ++s)
    most = std::max(most, estimate_stage_memory(stage_layout(stages, s, 8), ModelKind::ResGcn, 128,
                                                256, 40, nodes, halo, nnz)
                              .bytes);
  return most;
}

TEST(StageMemory, GrowsWithNodesAndShrinksWithStagesAndParts) {
  const std::int64_t n = 100000, nnz = 12 * n;
  const StageMemory m =
      estimate_stage_memory(stage_layout(2, 0, 8), ModelKind::ResGcn, 128, 256, 40, n, 0, nnz);
  EXPECT_EQ(m.nodes, n);
  EXPECT_EQ(m.nnz, nnz);
  EXPECT_EQ(m.features, n * 128);  // the first stage holds the features
  EXPECT_EQ(estimate_stage_memory(stage_layout(2, 1, 8), ModelKind::ResGcn, 128, 256, 40, n, 0,
                                  nnz).features,
            0);
  // At least the features and one (N, hidden) buffer per layer of the stage.
  EXPECT_GT(m.bytes, static_cast<std::uint64_t>(4 * n * (128 + 4 * 256)));
  // More nodes (and entries), more bytes; more halo nodes too.
  EXPECT_LT(m.bytes, estimate_stage_memory(stage_layout(2, 0, 8), ModelKind::ResGcn, 128, 256, 40,
                                           2 * n, 0, 2 * nnz).bytes);
  EXPECT_LT(m.bytes, estimate_stage_memory(stage_layout(2, 0, 8), ModelKind::ResGcn, 128, 256, 40,
                                           n, n / 10, nnz).bytes);
  // More stages: the costliest stage holds fewer layers.
  const std::uint64_t s1 = largest_stage(1, n, 0, nnz), s2 = largest_stage(2, n, 0, nnz),
                      s4 = largest_stage(4, n, 0, nnz), s8 = largest_stage(8, n, 0, nnz);
  EXPECT_GT(s1, s2);
  EXPECT_GT(s2, s4);
  EXPECT_GT(s4, s8);
  // More parts (hybrid): each rank holds N / G nodes (plus some halo), so less.
  const std::uint64_t g2 = largest_stage(2, n / 2, n / 20, nnz / 2 + n / 20),
                      g4 = largest_stage(2, n / 4, n / 20, nnz / 4 + n / 20);
  EXPECT_GT(s2, g2);
  EXPECT_GT(g2, g4);
  std::printf("largest stage, 100k nodes, 8-layer resgcn 256 hidden: S=1 %.1f MiB, S=2 %.1f, "
              "S=4 %.1f, S=8 %.1f; S=2 with G=2 %.1f, G=4 %.1f\n",
              s1 / 1048576.0, s2 / 1048576.0, s4 / 1048576.0, s8 / 1048576.0, g2 / 1048576.0,
              g4 / 1048576.0);
}

// The budget a stage is checked against: the one given, else the memory divided among the ranks
// that use it (the ranks of the node, or of the GPU under --gpu-comm mpi).
TEST(StageMemory, TheDefaultBudgetIsSharedByTheRanksOnTheMemory) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  EXPECT_DOUBLE_EQ(stage_memory_budget(0.0, 24 * gib, 4), 6 * gib);
  EXPECT_DOUBLE_EQ(stage_memory_budget(0.0, 80 * gib, 1), 80 * gib);
  EXPECT_DOUBLE_EQ(stage_memory_budget(2.5, 80 * gib, 4), 2.5 * gib)
      << "a given budget is per rank";
}

// An attention layer keeps heads and source terms (H·D + H wide) and per-edge weights: more than
// a GCN layer of the same widths, and more heads, more memory.
TEST(StageMemory, AttentionCountsItsHeadsAndEdges) {
  const std::int64_t n = 100000, nnz = 12 * n;
  LayerHyper hyper;
  hyper.gat_heads = 8;
  const auto bytes = [&](ModelKind kind, const LayerHyper& h) {
    return estimate_stage_memory(stage_layout(2, 1, 4), kind, 128, 256, 40, n, n / 10, nnz, h)
        .bytes;
  };
  EXPECT_GT(bytes(ModelKind::Gat, hyper), bytes(ModelKind::Gcn, hyper));
  LayerHyper more = hyper;
  more.gat_heads = 32;
  EXPECT_GT(bytes(ModelKind::Gat, more), bytes(ModelKind::Gat, hyper));
}

TEST(TrafficModel, ExchangedWidthsByHand) {
  // F_in > H: the first layer transforms first (exchanges H, and sends gradients back); the last
  // layer is narrower and transforms first too (exchanges C).
  ExchangedWidths w = exchanged_widths(3, 100, 16, 7);
  EXPECT_EQ(w.forward, (std::vector<std::int64_t>{16, 16, 7}));
  EXPECT_EQ(w.backward, (std::vector<std::int64_t>{16, 16, 7}));
  // F_in == H: the first layer aggregates its input, which gets no gradient.
  w = exchanged_widths(3, 16, 16, 7);
  EXPECT_EQ(w.forward, (std::vector<std::int64_t>{16, 16, 7}));
  EXPECT_EQ(w.backward, (std::vector<std::int64_t>{0, 16, 7}));
  // F_in < H, and a last layer wider than H (aggregates first, exchanges H).
  w = exchanged_widths(3, 8, 16, 32);
  EXPECT_EQ(w.forward, (std::vector<std::int64_t>{8, 16, 16}));
  EXPECT_EQ(w.backward, (std::vector<std::int64_t>{0, 16, 16}));
  // One layer.
  w = exchanged_widths(1, 100, 16, 7);
  EXPECT_EQ(w.forward, (std::vector<std::int64_t>{7}));
  EXPECT_EQ(w.backward, (std::vector<std::int64_t>{7}));
  // SAGE and the residual GCN aggregate like GCN.
  for (const ModelKind kind : {ModelKind::Sage, ModelKind::ResGcn}) {
    w = exchanged_widths(3, 16, 16, 7, kind);
    EXPECT_EQ(w.backward, (std::vector<std::int64_t>{0, 16, 7})) << to_string(kind);
  }
  // GCNII: nothing in the dense ends, H both ways in between.
  w = exchanged_widths(4, 100, 16, 7, ModelKind::Gcnii);
  EXPECT_EQ(w.forward, (std::vector<std::int64_t>{0, 16, 16, 0}));
  EXPECT_EQ(w.backward, (std::vector<std::int64_t>{0, 16, 16, 0}));
  // GAT: 4 heads of 4 (16 + 4) in the hidden layers, 2 averaged heads of 7 (14 + 2) at the end.
  LayerHyper hyper;
  hyper.gat_heads = 4;
  hyper.gat_output_heads = 2;
  w = exchanged_widths(3, 100, 16, 7, ModelKind::Gat, hyper);
  EXPECT_EQ(w.forward, (std::vector<std::int64_t>{20, 20, 16}));
  EXPECT_EQ(w.backward, (std::vector<std::int64_t>{20, 20, 16}));
}

TEST(TrafficModel, BytesByHand) {
  EXPECT_EQ(encoded_bytes(CodecKind::None, 10, 16), 640.0);
  EXPECT_EQ(encoded_bytes(CodecKind::Bf16, 10, 16), 320.0);
  EXPECT_EQ(encoded_bytes(CodecKind::Fp16, 10, 16), 320.0);
  EXPECT_EQ(encoded_bytes(CodecKind::Int8, 10, 16), 10.0 * (16 + 8));  // + scale and offset
  EXPECT_EQ(encoded_bytes(CodecKind::Int4, 10, 16), 10.0 * (8 + 8));
  EXPECT_EQ(encoded_bytes(CodecKind::Int2, 10, 7), 10.0 * (2 + 8));     // 14 bits -> 2 bytes
  // Graph mode: M = 10 halo nodes; 4 bytes a value; forward and backward.
  const ExchangedWidths wide = exchanged_widths(3, 100, 16, 7), same = exchanged_widths(3, 16, 16, 7);
  EXPECT_EQ(graph_mode_bytes(10, wide, CodecKind::None, CodecKind::None), 10.0 * 4 * 39 * 2);
  EXPECT_EQ(graph_mode_bytes(10, same, CodecKind::None, CodecKind::None), 10.0 * 4 * (39 + 23));
  EXPECT_EQ(graph_mode_bytes(10, wide, CodecKind::Int8, CodecKind::None),
            10.0 * ((16 + 8) + (16 + 8) + (7 + 8)) + 10.0 * 4 * 39);
  EXPECT_EQ(graph_mode_bytes(0, wide, CodecKind::None, CodecKind::None), 0.0);
  // Pipeline mode: 2 (S - 1) N H b.
  EXPECT_EQ(pipeline_mode_bytes(4, 100, 16, CodecKind::None, CodecKind::None), 2.0 * 3 * 100 * 16 * 4);
  EXPECT_EQ(pipeline_mode_bytes(4, 100, 16, CodecKind::Int8, CodecKind::None),
            3.0 * (100 * (16 + 8) + 100 * 64));
  EXPECT_EQ(pipeline_mode_bytes(1, 100, 16, CodecKind::None, CodecKind::None), 0.0);
}

}  // namespace
}  // namespace tessera
