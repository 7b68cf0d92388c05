// SPDX-License-Identifier: Apache-2.0
// PartBuilder against brute force on the whole training graph, for block, random and METIS
// plans with K = 1..4 on a synthetic graph and on a hand-built one (isolated nodes, one-way edges,
// a self loop): ownership, halo sets and their grouping, both ends of every halo plan, local
// adjacency, global degrees, owned features/labels/splits; whole_graph_part == K = 1; refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "datasets/synthetic.h"
#include "core/error.h"
#include "partition/graph_part.h"

namespace tessera {
namespace {

Dataset small_synthetic() {
  SyntheticConfig c;
  c.name = "small";
  c.num_nodes = 150;
  c.num_edges = 500;
  c.num_features = 5;
  c.num_classes = 3;
  c.seed = 11;
  return generate_synthetic(c);
}

// 14 nodes. Edges listed in one direction only (u -> v), plus the self loop 2 -> 2 that the
// training graph drops; nodes 5, 11 and 13 have no edge at all.
Dataset hand_built() {
  const std::vector<GlobalId> src = {0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 2, 0, 12};
  const std::vector<GlobalId> dst = {1, 2, 0, 4, 6, 7, 8, 9, 3, 3, 2, 7, 1};
  Dataset d;
  d.name = "hand";
  d.num_classes = 3;
  d.graph = Csr::from_edges(14, src, dst);
  d.features = Tensor(14, 2);
  for (std::int64_t v = 0; v < 14; ++v) {
    d.features.row<float>(v)[0] = static_cast<float>(v);
    d.features.row<float>(v)[1] = 0.5f * static_cast<float>(v);
    d.labels.push_back(v == 4 ? -1 : v % 3);
  }
  d.train_idx = {9, 0, 1, 2, 3, 6, 8, 10, 12};  // not sorted: rows must come out sorted anyway
  d.valid_idx = {4, 7};
  d.test_idx = {5, 11, 13};
  return d;
}

// Everything a plan needs, with the parts built once.
struct Cut {
  Dataset dataset;
  Csr graph;
  PartitionPlan plan;
  DatasetInfo info;
  std::vector<GraphPart> parts;

  Cut(Dataset&& d, PartitionMethod method, int k)
      : dataset(std::move(d)), graph(training_graph(dataset)) {
    plan = make_partition(method, graph, dataset.train_idx, k, 5);
    info = dataset_info(dataset);
    PartBuilder builder(dataset, graph, plan, info);
    for (int p = 0; p < k; ++p) parts.push_back(builder.build(p));
  }
  int owner(GlobalId v) const { return plan.owner[static_cast<std::size_t>(v)]; }
  std::vector<GlobalId> row(GlobalId v) const {
    const auto begin = graph.indices().begin();
    return {begin + graph.indptr()[v], begin + graph.indptr()[v + 1]};
  }
};

GlobalId global_of(const LocalGraph& g, NodeId local) {
  return local < g.num_owned() ? g.owned_ids[local] : g.halo_ids[local - g.num_owned()];
}

std::vector<GlobalId> to_global(const LocalGraph& g, std::span<const NodeId> rows) {
  std::vector<GlobalId> out;
  for (NodeId r : rows) out.push_back(global_of(g, r));
  return out;
}

// Exact equality of two row-major float blocks; on failure names the first differing index and
// the largest difference.
void expect_same_floats(const float* a, const float* b, std::int64_t n, const std::string& what) {
  std::int64_t first = -1;
  double largest = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (a[i] != b[i] && first < 0) first = i;
    largest = std::max(largest, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  EXPECT_LT(first, 0) << what << ": first mismatch at flat index " << first << " ("
                      << (first < 0 ? 0 : a[first]) << " vs " << (first < 0 ? 0 : b[first])
                      << "), largest difference " << largest;
}

void check_halo(const Cut& cut, const GraphPart& part) {
  const LocalGraph& g = part.graph;
  const int p = g.part, k = g.num_parts;
  std::set<std::pair<int, GlobalId>> expected;  // (owner, id): grouped by owner, increasing id
  for (GlobalId v : g.owned_ids)
    for (GlobalId u : cut.row(v))
      if (cut.owner(u) != p) expected.insert({cut.owner(u), u});
  std::vector<GlobalId> ids;
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(k) + 1, 0);
  for (auto [q, u] : expected) {
    ids.push_back(u);
    ++offsets[static_cast<std::size_t>(q) + 1];
  }
  for (int q = 0; q < k; ++q) offsets[q + 1] += offsets[q];
  EXPECT_EQ(g.halo_ids, ids) << "part " << p;
  EXPECT_EQ(g.halo.recv_offsets, offsets) << "part " << p;
}

void check_adjacency_and_degrees(const Cut& cut, const GraphPart& part) {
  const LocalGraph& g = part.graph;
  const Csr& a = g.adjacency;
  ASSERT_EQ(a.num_rows(), g.num_owned());
  ASSERT_EQ(a.num_cols(), g.num_owned() + g.num_halo());
  for (std::int64_t i = 0; i < g.num_owned(); ++i) {
    std::span<const NodeId> cols(a.indices().data() + a.indptr()[i], a.degree(i));
    EXPECT_TRUE(std::is_sorted(cols.begin(), cols.end())) << "part " << g.part << " row " << i;
    std::vector<GlobalId> global = to_global(g, cols);
    std::sort(global.begin(), global.end());
    EXPECT_EQ(global, cut.row(g.owned_ids[i]))
        << "part " << g.part << ", local row " << i << " = node " << g.owned_ids[i];
  }
  ASSERT_EQ(g.degrees.size(), static_cast<std::size_t>(a.num_cols()));
  for (std::int64_t c = 0; c < a.num_cols(); ++c) {
    const GlobalId v = global_of(g, static_cast<NodeId>(c));
    EXPECT_EQ(g.degrees[c], static_cast<float>(cut.graph.degree(v) + 1))
        << "part " << g.part << ", local column " << c << " = node " << v;
  }
}

void check_rows(const Cut& cut, const GraphPart& part) {
  const LocalGraph& g = part.graph;
  const std::int64_t f = cut.dataset.num_features();
  ASSERT_EQ(part.features.rows(), g.num_owned());
  ASSERT_EQ(part.features.cols(), f);
  for (std::int64_t i = 0; i < g.num_owned(); ++i) {
    const GlobalId v = g.owned_ids[i];
    expect_same_floats(part.features.row<float>(i), cut.dataset.features.row<float>(v), f,
                       "part " + std::to_string(g.part) + " features of node " + std::to_string(v));
    EXPECT_EQ(part.labels[i], cut.dataset.labels[v]) << "part " << g.part << " node " << v;
  }
  const std::pair<const std::vector<NodeId>*, const std::vector<GlobalId>*> splits[] = {
      {&part.train_rows, &cut.dataset.train_idx},
      {&part.valid_rows, &cut.dataset.valid_idx},
      {&part.test_rows, &cut.dataset.test_idx}};
  for (auto [rows, ids] : splits) {
    std::vector<GlobalId> expected;
    for (GlobalId v : *ids)
      if (cut.owner(v) == g.part) expected.push_back(v);
    std::sort(expected.begin(), expected.end());
    EXPECT_TRUE(std::is_sorted(rows->begin(), rows->end())) << "part " << g.part;
    EXPECT_EQ(to_global(g, *rows), expected) << "part " << g.part;
  }
}

// For every ordered pair (p, q): what p sends to q, in global ids, is q's halo block from p.
void check_plans_agree(const Cut& cut) {
  const int k = cut.plan.num_parts;
  for (int p = 0; p < k; ++p) {
    const LocalGraph& gp = cut.parts[p].graph;
    for (int q = 0; q < k; ++q) {
      const LocalGraph& gq = cut.parts[q].graph;
      const HaloPlan& send = gp.halo;
      std::span<const NodeId> rows(send.send_rows.data() + send.send_offsets[q],
                                   send.send_count(q));
      const auto begin = gq.halo_ids.begin() + gq.halo.recv_offsets[p];
      const std::vector<GlobalId> block(begin, begin + gq.halo.recv_count(p));
      EXPECT_EQ(to_global(gp, rows), block) << "part " << p << " sends to part " << q;
    }
  }
}

using Factory = Dataset (*)();
struct Case {
  const char* name;
  Factory dataset;
  PartitionMethod method;
  int k;
};

class GraphPartCases : public ::testing::TestWithParam<Case> {};

TEST_P(GraphPartCases, PartsMatchTheWholeGraph) {
  const Case& c = GetParam();
  const Cut cut(c.dataset(), c.method, c.k);
  std::vector<int> times_owned(static_cast<std::size_t>(cut.dataset.num_nodes()), 0);
  for (const GraphPart& part : cut.parts) {
    const LocalGraph& g = part.graph;
    SCOPED_TRACE("part " + std::to_string(g.part) + " of " + std::to_string(c.k));
    EXPECT_TRUE(std::adjacent_find(g.owned_ids.begin(), g.owned_ids.end(),
                                   std::greater_equal<>()) == g.owned_ids.end())
        << "owned ids not strictly increasing";
    for (GlobalId v : g.owned_ids) {
      ++times_owned[static_cast<std::size_t>(v)];
      EXPECT_EQ(cut.owner(v), g.part) << "node " << v;
    }
    if (g.owned_ids.empty()) {  // a random plan may leave a tiny part empty: it must be refused
      EXPECT_THROW(validate(part, "part"), Error);
      continue;
    }
    check_halo(cut, part);
    check_adjacency_and_degrees(cut, part);
    check_rows(cut, part);
    EXPECT_NO_THROW(validate(part, "part " + std::to_string(g.part)));
  }
  for (std::size_t v = 0; v < times_owned.size(); ++v)
    EXPECT_EQ(times_owned[v], 1) << "node " << v << " is owned " << times_owned[v] << " times";
  check_plans_agree(cut);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const std::pair<const char*, Factory> datasets[] = {{"synth", small_synthetic},
                                                      {"hand", hand_built}};
  const std::pair<const char*, PartitionMethod> methods[] = {{"block", PartitionMethod::Block},
                                                             {"random", PartitionMethod::Random},
                                                             {"metis", PartitionMethod::Metis}};
  for (auto [dname, factory] : datasets)
    for (auto [mname, method] : methods)
      for (int k = 1; k <= 4; ++k) cases.push_back({dname, factory, method, k});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, GraphPartCases, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           return std::string(param_info.param.name) + "_" +
                                  to_string(param_info.param.method) + "_K" +
                                  std::to_string(param_info.param.k);
                         });

TEST(GraphPart, WholeGraphPartIsTheOnlyPartOfOne) {
  for (Factory factory : {small_synthetic, hand_built}) {
    const Cut cut(factory(), PartitionMethod::Block, 1);
    const GraphPart& built = cut.parts[0];
    const GraphPart whole = whole_graph_part(factory());
    SCOPED_TRACE(whole.dataset.name);
    EXPECT_EQ(whole.dataset.fingerprint, built.dataset.fingerprint);
    EXPECT_EQ(whole.graph.owned_ids, built.graph.owned_ids);
    EXPECT_EQ(whole.graph.num_halo(), 0);
    EXPECT_EQ(whole.graph.adjacency.indptr(), built.graph.adjacency.indptr());
    EXPECT_EQ(whole.graph.adjacency.indices(), built.graph.adjacency.indices());
    EXPECT_EQ(whole.graph.degrees, built.graph.degrees);
    EXPECT_EQ(whole.graph.halo.send_offsets, built.graph.halo.send_offsets);
    EXPECT_EQ(whole.graph.halo.recv_offsets, built.graph.halo.recv_offsets);
    ASSERT_TRUE(whole.features.same_shape(built.features));
    expect_same_floats(whole.features.f32(), built.features.f32(), whole.features.numel(),
                       "features");
    EXPECT_EQ(whole.labels, built.labels);
    EXPECT_EQ(whole.train_rows, built.train_rows);
    EXPECT_EQ(whole.valid_rows, built.valid_rows);
    EXPECT_EQ(whole.test_rows, built.test_rows);
    EXPECT_NO_THROW(validate(whole, "whole"));
  }
}

// Runs `check`, expecting InvalidInput whose message holds every piece.
void expect_refused(const std::function<void()>& check, const std::vector<std::string>& pieces) {
  try {
    check();
    ADD_FAILURE() << "not refused; expected a message with '" << pieces.front() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidInput) << e.what();
    for (const std::string& piece : pieces)
      EXPECT_NE(e.message().find(piece), std::string::npos) << "'" << piece << "' in: " << e.what();
  }
}

TEST(GraphPart, ValidateRefusesTamperedParts) {
  const Cut cut(hand_built(), PartitionMethod::Block, 2);
  const PartBuilder builder(cut.dataset, cut.graph, cut.plan, cut.info);
  auto past_end = [](const GraphPart& p) { return static_cast<NodeId>(p.graph.num_owned()); };
  const std::vector<std::pair<std::string, std::function<void(GraphPart&)>>> tampers = {
      {"send row", [&](GraphPart& p) { p.graph.halo.send_rows.back() = past_end(p); }},
      {"degrees for", [](GraphPart& p) { p.graph.degrees.pop_back(); }},
      {"label 3", [](GraphPart& p) { p.labels[0] = p.dataset.num_classes; }},
      {"train row", [&](GraphPart& p) { p.train_rows.push_back(past_end(p)); }},
      {"input ids for", [](GraphPart& p) { p.graph.input_ids.assign(1, 0); }},
      {"input id 14",
       [](GraphPart& p) {
         p.graph.input_ids = p.graph.owned_ids;
         p.graph.input_ids.back() = 14;
       }},
  };
  for (const auto& [piece, tamper] : tampers) {
    GraphPart part = builder.build(1);
    ASSERT_GT(part.graph.halo.num_send(), 0) << "the test needs a part that sends rows";
    EXPECT_NO_THROW(validate(part, "part 1"));
    tamper(part);
    expect_refused([&] { validate(part, "part 1"); }, {"part 1", piece});
  }
  PartitionPlan gap{3, std::vector<std::int32_t>(14, 0)};  // part 1 owns nothing
  gap.owner[13] = 2;
  const PartBuilder empty(cut.dataset, cut.graph, gap, cut.info);
  expect_refused([&] { validate(empty.build(1), "part 1"); }, {"part 1", "owns no node"});
}

TEST(GraphPart, UnusablePartitionsAreRefusedNamingPartAndMethod) {
  const Cut cut(hand_built(), PartitionMethod::Block, 2);
  PartitionPlan plan{3, std::vector<std::int32_t>(14, 0)};
  plan.owner[13] = 2;  // part 1 empty, part 2 owns only test node 13
  PartitionStats stats = partition_stats(cut.graph, plan, cut.dataset.train_idx);
  expect_refused([&] { check_parts_usable(stats, "random"); },
                 {"part 1", "owns no node", "random"});
  plan.owner[12] = 1;  // part 1 owns training node 12 now; part 2 still has none
  stats = partition_stats(cut.graph, plan, cut.dataset.train_idx);
  expect_refused([&] { check_parts_usable(stats, "block"); },
                 {"part 2", "no training node", "block"});
  plan.owner[0] = 2;
  stats = partition_stats(cut.graph, plan, cut.dataset.train_idx);
  EXPECT_NO_THROW(check_parts_usable(stats, "block"));
}

}  // namespace
}  // namespace tessera
