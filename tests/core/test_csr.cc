// SPDX-License-Identifier: Apache-2.0
// Tests of Csr: validation errors, from_edges (merging, sorting, refusals, thread-count
// independence) against a naive std::set build, transpose, symmetrize, self loops, and the GCN
// and mean normalisations against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "core/csr.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::throws_error;

// Row lists of a Csr as (sorted) sets, and as (row, col) -> value.
std::vector<std::vector<NodeId>> rows_of(const Csr& a) {
  std::vector<std::vector<NodeId>> out(static_cast<std::size_t>(a.num_rows()));
  for (std::int64_t r = 0; r < a.num_rows(); ++r) {
    for (EdgeOffset j = a.indptr()[r]; j < a.indptr()[r + 1]; ++j) {
      out[static_cast<std::size_t>(r)].push_back(a.indices()[j]);
    }
  }
  return out;
}

std::map<std::pair<std::int64_t, NodeId>, float> entries_of(const Csr& a) {
  std::map<std::pair<std::int64_t, NodeId>, float> out;
  for (std::int64_t r = 0; r < a.num_rows(); ++r) {
    for (EdgeOffset j = a.indptr()[r]; j < a.indptr()[r + 1]; ++j) {
      out[{r, a.indices()[j]}] += a.has_values() ? a.values()[j] : 1.0f;
    }
  }
  return out;
}

bool rows_strictly_sorted(const Csr& a) {
  for (const auto& row : rows_of(a)) {
    for (std::size_t i = 1; i < row.size(); ++i) {
      if (row[i] <= row[i - 1]) return false;
    }
  }
  return true;
}

// ---- validation ----

TEST(Csr, DefaultIsEmpty) {
  Csr a;
  EXPECT_EQ(a.num_rows(), 0);
  EXPECT_EQ(a.nnz(), 0);
  EXPECT_EQ(a.view().nnz(), 0);
}

TEST(Csr, ValidConstructionAndView) {
  Csr a(2, 3, {0, 2, 3}, {0, 2, 1}, {0.5f, 1.5f, 2.5f});
  EXPECT_EQ(a.nnz(), 3);
  EXPECT_EQ(a.degree(0), 2);
  EXPECT_TRUE(a.has_values());
  const CsrView v = a.view();
  EXPECT_EQ(v.num_rows, 2);
  EXPECT_EQ(v.num_cols, 3);
  EXPECT_EQ(v.nnz(), 3);
  EXPECT_EQ(v.values, a.values().data());
  EXPECT_EQ(Csr(2, 3, {0, 2, 3}, {0, 2, 1}).view().values, nullptr);
}

TEST(Csr, RejectsBadIndptr) {
  const auto invalid = ErrorCategory::InvalidInput;
  EXPECT_TRUE(throws_error([] { Csr(2, 2, {0, 1}, {0}); }, invalid, "num_rows + 1 = 3"));
  EXPECT_TRUE(throws_error([] { Csr(2, 2, {1, 1, 1}, {0}); }, invalid, "indptr[0] must be 0"));
  EXPECT_TRUE(throws_error([] { Csr(2, 2, {0, 2, 1}, {0}); }, invalid, "non-decreasing"));
  EXPECT_TRUE(throws_error(
      [] {
        Csr(2, 2, {0, 1, 3}, {0, 1});
      },
      invalid, "must equal the number of indices, 2"));
  EXPECT_TRUE(throws_error([] { Csr(-1, 2, {0}, {}); }, invalid, "negative"));
}

TEST(Csr, RejectsIndexOutOfRange) {
  const auto invalid = ErrorCategory::InvalidInput;
  EXPECT_TRUE(throws_error(
      [] {
        Csr(2, 3, {0, 1, 2}, {0, 3});
      },
      invalid, "indices[1] = 3 (row 1) is outside [0, 3)"));
  EXPECT_TRUE(throws_error(
      [] {
        Csr(2, 3, {0, 1, 2}, {-1, 0});
      },
      invalid, "indices[0] = -1 (row 0)"));
  // Past the serial threshold the parallel scan must still report the first bad position.
  std::vector<NodeId> many(200000, 1);
  many[150000] = 9;
  many[190000] = 9;
  std::vector<EdgeOffset> indptr = {0, 100000, 200000};
  EXPECT_TRUE(
      throws_error([&] { Csr(2, 5, indptr, many); }, invalid, "indices[150000] = 9 (row 1)"));
}

TEST(Csr, RejectsValuesOfWrongLength) {
  EXPECT_TRUE(throws_error(
      [] {
        Csr(1, 2, {0, 2}, {0, 1}, {1.0f});
      },
      ErrorCategory::InvalidInput, "nnz = 2 entries, found 1"));
}

TEST(Csr, RejectsShapesBeyond32BitIds) {
  EXPECT_TRUE(throws_error([] { Csr(0, std::int64_t{1} << 31, {0}, {}); },
                           ErrorCategory::InvalidInput, "2^31 - 1"));
}

// ---- from_edges ----

TEST(Csr, FromEdgesPutsSourcesInDestinationRowsSortedAndMerged) {
  // Edges u -> v: 2->0, 1->0, 2->0 (duplicate), 0->1, 1->1 (self loop).
  const std::vector<GlobalId> src = {2, 1, 2, 0, 1};
  const std::vector<GlobalId> dst = {0, 0, 0, 1, 1};
  Csr a = Csr::from_edges(3, src, dst);
  EXPECT_EQ(a.num_rows(), 3);
  EXPECT_EQ(a.num_cols(), 3);
  EXPECT_FALSE(a.has_values());
  EXPECT_EQ(a.indptr(), (std::vector<EdgeOffset>{0, 2, 4, 4}));
  EXPECT_EQ(a.indices(), (std::vector<NodeId>{1, 2, 0, 1}));
}

TEST(Csr, FromEdgesEmpty) {
  Csr none = Csr::from_edges(0, {}, {});
  EXPECT_EQ(none.num_rows(), 0);
  Csr isolated = Csr::from_edges(4, {}, {});
  EXPECT_EQ(isolated.indptr(), (std::vector<EdgeOffset>{0, 0, 0, 0, 0}));
}

TEST(Csr, FromEdgesRefusesBadInput) {
  const std::vector<GlobalId> src = {0, 5}, dst = {1, 1}, short_dst = {1};
  EXPECT_TRUE(throws_error([&] { Csr::from_edges(3, src, dst); }, ErrorCategory::InvalidInput,
                           "edge 1 (5 -> 1) has a node id outside [0, 3)"));
  EXPECT_TRUE(throws_error([&] { Csr::from_edges(6, src, short_dst); }, ErrorCategory::InvalidInput,
                           "2 sources but 1 destinations"));
  EXPECT_TRUE(throws_error([&] { Csr::from_edges(std::int64_t{1} << 31, src, dst); },
                           ErrorCategory::InvalidInput, "2^31 - 1"));
}

// Random edge lists (duplicates and self loops included) against a std::set build; large
// enough that the counting sort runs in parallel chunks.
TEST(Csr, FromEdgesMatchesNaiveBuild) {
  for (const auto& [nodes, edges] :
       std::vector<std::pair<int, int>>{{1, 5}, {7, 40}, {1000, 300000}}) {
    std::mt19937 gen(static_cast<std::uint32_t>(nodes));
    std::uniform_int_distribution<GlobalId> id(0, nodes - 1);
    std::vector<GlobalId> src(static_cast<std::size_t>(edges)), dst(src.size());
    std::vector<std::set<NodeId>> want(static_cast<std::size_t>(nodes));
    for (std::size_t e = 0; e < src.size(); ++e) {
      src[e] = id(gen);
      dst[e] = id(gen);
      want[static_cast<std::size_t>(dst[e])].insert(static_cast<NodeId>(src[e]));
    }
    const Csr a = Csr::from_edges(nodes, src, dst);
    const auto got = rows_of(a);
    for (std::size_t v = 0; v < want.size(); ++v) {
      ASSERT_EQ(got[v], std::vector<NodeId>(want[v].begin(), want[v].end()))
          << "row " << v << " of " << nodes << " nodes";
    }
  }
}

TEST(Csr, FromEdgesIndependentOfThreadCount) {
  std::mt19937 gen(3);
  std::uniform_int_distribution<GlobalId> id(0, 4999);
  std::vector<GlobalId> src(200000), dst(200000);
  for (std::size_t e = 0; e < src.size(); ++e) src[e] = id(gen), dst[e] = id(gen);
  Csr one, two;
  {
    test::ThreadCount threads(1);
    one = Csr::from_edges(5000, src, dst);
  }
  {
    test::ThreadCount threads(2);
    two = Csr::from_edges(5000, src, dst);
  }
  EXPECT_EQ(one.indptr(), two.indptr());
  EXPECT_EQ(one.indices(), two.indices());
}

// ---- transforms ----

TEST(Csr, TransposeMatchesNaiveAndTwiceIsIdentity) {
  const Csr a = test::random_csr(300, 70, 11, /*with_values=*/true);  // repeats possible
  const Csr t = a.transpose();
  EXPECT_EQ(t.num_rows(), 70);
  EXPECT_EQ(t.num_cols(), 300);
  EXPECT_EQ(t.nnz(), a.nnz());
  EXPECT_TRUE(
      std::is_sorted(t.indices().begin() + t.indptr()[3], t.indices().begin() + t.indptr()[4]));
  // Entry-wise: t(c, r) == a(r, c) (repeated entries summed on both sides).
  std::map<std::pair<std::int64_t, NodeId>, float> want;
  for (const auto& [rc, v] : entries_of(a)) want[{rc.second, static_cast<NodeId>(rc.first)}] = v;
  EXPECT_EQ(entries_of(t), want);
  EXPECT_EQ(entries_of(t.transpose()), entries_of(a));
  // A sorted matrix comes back unchanged, values included.
  const Csr sorted = t.transpose();
  const Csr again = sorted.transpose().transpose();
  EXPECT_EQ(again.indptr(), sorted.indptr());
  EXPECT_EQ(again.indices(), sorted.indices());
  EXPECT_EQ(again.values(), sorted.values());
}

TEST(Csr, TransposeOfEmptyShapes) {
  const Csr a(0, 5, {0}, {});
  const Csr t = a.transpose();
  EXPECT_EQ(t.num_rows(), 5);
  EXPECT_EQ(t.num_cols(), 0);
  EXPECT_EQ(t.indptr(), (std::vector<EdgeOffset>(6, 0)));
}

TEST(Csr, SymmetrizeIsUnionOfAAndItsTranspose) {
  // Unsorted rows with a duplicate: row 0 = {2, 1, 2}, row 2 = {0}.
  const Csr a(3, 3, {0, 3, 3, 4}, {2, 1, 2, 0});
  const Csr s = a.symmetrize();
  EXPECT_FALSE(s.has_values());
  EXPECT_EQ(rows_of(s), (std::vector<std::vector<NodeId>>{{1, 2}, {0}, {0}}));

  const Csr big = test::random_csr(400, 400, 5, false).symmetrize();
  EXPECT_TRUE(rows_strictly_sorted(big));
  const auto e = entries_of(big);
  for (const auto& [rc, v] : e) EXPECT_TRUE(e.count({rc.second, static_cast<NodeId>(rc.first)}));
  EXPECT_TRUE(throws_error(
      [] {
        Csr(1, 2, {0, 0}, {}).symmetrize();
      },
      ErrorCategory::InvalidArgument, "square"));
}

TEST(Csr, WithSelfLoopsAddsMissingDiagonalInOrder) {
  // Row 0 = {1, 2} (no loop), row 1 = {1} (has one), row 2 = {} (empty), weighted.
  const Csr a(3, 3, {0, 2, 3, 3}, {1, 2, 1}, {0.5f, 0.25f, 3.0f});
  const Csr l = a.with_self_loops();
  EXPECT_EQ(rows_of(l), (std::vector<std::vector<NodeId>>{{0, 1, 2}, {1}, {2}}));
  EXPECT_EQ(l.values(), (std::vector<float>{1.0f, 0.5f, 0.25f, 3.0f, 1.0f}));
  const Csr p = Csr(3, 3, {0, 1, 1, 2}, {2, 2}).with_self_loops();
  EXPECT_FALSE(p.has_values());
  EXPECT_EQ(rows_of(p), (std::vector<std::vector<NodeId>>{{0, 2}, {1}, {2}}));
}

// A random (rows, cols) matrix: rows of 0-6 distinct columns, sorted or shuffled, some with
// their diagonal entry, with values or without.
Csr random_matrix(std::mt19937& rng, std::int64_t rows, std::int64_t cols, bool sorted,
                  bool weighted) {
  std::vector<EdgeOffset> indptr{0};
  std::vector<NodeId> indices;
  std::vector<float> values;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::set<NodeId> row;
    const int degree = static_cast<int>(rng() % 7);
    for (int i = 0; i < degree; ++i) row.insert(static_cast<NodeId>(rng() % cols));
    std::vector<NodeId> list(row.begin(), row.end());
    if (!sorted) std::shuffle(list.begin(), list.end(), rng);
    for (const NodeId c : list) {
      indices.push_back(c);
      if (weighted) values.push_back(static_cast<float>(rng() % 1000) / 8.0f);
    }
    indptr.push_back(static_cast<EdgeOffset>(indices.size()));
  }
  return Csr(rows, cols, std::move(indptr), std::move(indices), std::move(values));
}

// The in-place forms (on an rvalue) against simple references (a loop inserted before each row's
// first larger column; a filter): the same entries in the same order, for square and wide matrices,
// sorted and shuffled rows, with and without values; columns_below gives its spare room back past
// an eighth of dropped entries only.
TEST(Csr, InPlaceFormsEqualTheCopies) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const std::int64_t rows = 1 + trial % 13, cols = rows + trial % 5;
    const Csr a = random_matrix(rng, rows, cols, trial % 3 != 0, trial % 2 == 0);
    SCOPED_TRACE("trial " + std::to_string(trial));
    const Csr looped = Csr(a).with_self_loops();
    std::vector<EdgeOffset> loop_indptr{0};
    std::vector<NodeId> loop_indices;
    std::vector<float> loop_values;
    for (std::int64_t r = 0; r < rows; ++r) {  // the loop before the first larger column
      const auto first = a.indices().begin() + a.indptr()[r];
      const auto last = a.indices().begin() + a.indptr()[r + 1];
      const bool has_loop = std::find(first, last, static_cast<NodeId>(r)) != last;
      bool pending = !has_loop;
      for (EdgeOffset j = a.indptr()[r]; j < a.indptr()[r + 1]; ++j) {
        if (pending && a.indices()[j] > r) {
          loop_indices.push_back(static_cast<NodeId>(r));
          if (a.has_values()) loop_values.push_back(1.0f);
          pending = false;
        }
        loop_indices.push_back(a.indices()[j]);
        if (a.has_values()) loop_values.push_back(a.values()[j]);
      }
      if (pending) {
        loop_indices.push_back(static_cast<NodeId>(r));
        if (a.has_values()) loop_values.push_back(1.0f);
      }
      loop_indptr.push_back(static_cast<EdgeOffset>(loop_indices.size()));
    }
    EXPECT_EQ(looped.indptr(), loop_indptr);
    EXPECT_EQ(looped.indices(), loop_indices);
    EXPECT_EQ(looped.values(), loop_values);
    EXPECT_EQ(a.with_self_loops().indices(), loop_indices);  // the copying form, a untouched
    const std::int64_t keep = static_cast<std::int64_t>(rng() % (cols + 1));
    const Csr below = Csr(a).columns_below(keep);
    std::vector<EdgeOffset> indptr{0};
    std::vector<NodeId> indices;
    std::vector<float> values;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (EdgeOffset j = a.indptr()[r]; j < a.indptr()[r + 1]; ++j) {
        if (a.indices()[j] >= keep) continue;
        indices.push_back(a.indices()[j]);
        if (a.has_values()) values.push_back(a.values()[j]);
      }
      indptr.push_back(static_cast<EdgeOffset>(indices.size()));
    }
    EXPECT_EQ(below.num_rows(), rows);
    EXPECT_EQ(below.num_cols(), keep);
    EXPECT_EQ(below.indptr(), indptr);
    EXPECT_EQ(below.indices(), indices);
    EXPECT_EQ(below.values(), values);
    const auto kept = static_cast<EdgeOffset>(indices.size());
    if (a.nnz() - kept > kept / 8) {
      EXPECT_EQ(below.indices().capacity(), indices.size());
    } else {
      EXPECT_GE(below.indices().capacity(), a.indices().size());
    }
  }
  const Csr pattern = random_matrix(rng, 9, 9, true, false).with_self_loops();
  std::vector<float> degrees(9);
  for (int r = 0; r < 9; ++r) degrees[static_cast<std::size_t>(r)] = 1.0f + static_cast<float>(r);
  const Csr weighted = gcn_normalized(pattern, degrees, degrees);
  const Csr moved = gcn_normalized(Csr(pattern), degrees, degrees);
  EXPECT_EQ(moved.indices(), weighted.indices());
  EXPECT_EQ(moved.values(), weighted.values());
  EXPECT_TRUE(throws_error([&] { Csr(pattern).with_values({1.0f}); },
                           ErrorCategory::InvalidArgument, "1 values for"));
  EXPECT_TRUE(throws_error([&] { Csr(pattern).columns_below(10); }, ErrorCategory::InvalidArgument,
                           "columns_below"));
}

TEST(Csr, WithoutSelfLoopsDropsDiagonal) {
  const Csr a(3, 3, {0, 2, 3, 5}, {0, 1, 0, 0, 2}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
  const Csr n = a.without_self_loops();
  EXPECT_EQ(rows_of(n), (std::vector<std::vector<NodeId>>{{1}, {0}, {0}}));
  EXPECT_EQ(n.values(), (std::vector<float>{2.0f, 3.0f, 4.0f}));
  const Csr round_trip =
      Csr::from_edges(3, std::vector<GlobalId>{0, 1}, std::vector<GlobalId>{1, 2})
          .with_self_loops()
          .without_self_loops();
  EXPECT_EQ(rows_of(round_trip), (std::vector<std::vector<NodeId>>{{}, {0}, {1}}));
}

// ---- normalisation ----

// Path 0 - 1 - 2 with self loops: degrees of A + I are 2, 3, 2.
TEST(Csr, GcnNormalizedHandExample) {
  const std::vector<GlobalId> src = {0, 1, 1, 2}, dst = {1, 0, 2, 1};
  const Csr a = Csr::from_edges(3, src, dst).with_self_loops();
  const Csr g = gcn_normalized(a);
  const double s6 = 1.0 / std::sqrt(6.0);
  const std::map<std::pair<std::int64_t, NodeId>, double> want = {
      {{0, 0}, 0.5}, {{0, 1}, s6}, {{1, 0}, s6}, {{1, 1}, 1.0 / 3},
      {{1, 2}, s6},  {{2, 1}, s6}, {{2, 2}, 0.5}};
  const auto got = entries_of(g);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [rc, w] : want) {
    // One rounding of a double product to float: half an ulp.
    EXPECT_NEAR(got.at(rc), w, w * test::kFloatEps)
        << "entry (" << rc.first << ", " << rc.second << ")";
  }
}

TEST(Csr, GcnNormalizedWithGivenDegrees) {
  // A part with 2 owned rows and 3 columns (one a halo node); global degrees passed in.
  const Csr part(2, 3, {0, 2, 3}, {0, 2, 1});
  const std::vector<float> row_degree = {4.0f, 0.0f};
  const std::vector<float> col_degree = {4.0f, 9.0f, 1.0f};
  const Csr g = gcn_normalized(part, row_degree, col_degree);
  EXPECT_EQ(g.indices(), part.indices());
  EXPECT_FLOAT_EQ(g.values()[0], 0.25f);  // 1 / sqrt(4 * 4)
  EXPECT_FLOAT_EQ(g.values()[1], 0.5f);   // 1 / sqrt(4 * 1)
  EXPECT_EQ(g.values()[2], 0.0f);         // row degree 0
  const std::vector<float> wrong = {1.0f};
  EXPECT_TRUE(throws_error([&] { gcn_normalized(part, wrong, col_degree); },
                           ErrorCategory::InvalidArgument, "row_degree must have num_rows = 2"));
  const std::vector<float> negative = {1.0f, -1.0f, 1.0f};
  EXPECT_TRUE(throws_error([&] { gcn_normalized(part, row_degree, negative); },
                           ErrorCategory::InvalidArgument, "col_degree[1] = -1"));
}

TEST(Csr, MeanNormalizedWeightsRowsByInverseDegree) {
  const Csr a(3, 3, {0, 3, 3, 4}, {0, 1, 2, 1});
  const Csr m = mean_normalized(a);
  EXPECT_EQ(m.indptr(), a.indptr());
  EXPECT_EQ(m.values(), (std::vector<float>{1.0f / 3, 1.0f / 3, 1.0f / 3, 1.0f}));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(CsrFromUnsortedRows, SortsDropsRepeatsAndCompacts) {
  // Row 0: {3, 1, 3}, row 1: {}, row 2: {0, 0}, row 3: {2, 1}.
  std::vector<EdgeOffset> indptr{0, 3, 3, 5, 7};
  std::vector<NodeId> indices{3, 1, 3, 0, 0, 2, 1};
  Csr a = csr_from_unsorted_rows(4, 4, indptr, indices);
  EXPECT_EQ(a.indptr(), (std::vector<EdgeOffset>{0, 2, 2, 3, 5}));
  EXPECT_EQ(a.indices(), (std::vector<NodeId>{1, 3, 0, 1, 2}));
  EXPECT_FALSE(a.has_values());
  // Bad input is still refused by the validating constructor.
  EXPECT_THROW(csr_from_unsorted_rows(2, 2, {0, 1, 2}, {0, 5}), Error);
  EXPECT_THROW(csr_from_unsorted_rows(3, 3, {0, 1}, {0}), Error);
}

}  // namespace
}  // namespace tessera
