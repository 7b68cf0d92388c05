// SPDX-License-Identifier: Apache-2.0
// Tests of the synthetic generator: preset sizes, determinism (seed and thread count), graph
// invariants (symmetric, no self loops, sorted unique rows), measured homophily against the
// configured one, feature statistics, the split, config errors, and a round trip through the
// OGB raw-layout writer and reader.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include "datasets/loaders.h"
#include "datasets/synthetic.h"
#include "core/error.h"

namespace tessera {
namespace {

SyntheticConfig small_config(double homophily, std::uint64_t seed = 7) {
  SyntheticConfig c;
  c.name = "test";
  c.num_nodes = 20000;
  c.num_edges = 100000;
  c.num_features = 9;
  c.num_classes = 5;
  c.homophily = homophily;
  c.feature_noise = 0.5;
  c.seed = seed;
  return c;
}

bool same_features(const Tensor& a, const Tensor& b) {
  return a.same_shape(b) && a.dtype() == b.dtype() &&
         (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

// Same arrays, bit for bit.
void expect_identical(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.graph.num_rows(), b.graph.num_rows());
  EXPECT_EQ(a.graph.indptr(), b.graph.indptr());
  EXPECT_EQ(a.graph.indices(), b.graph.indices());
  EXPECT_TRUE(same_features(a.features, b.features));
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.train_idx, b.train_idx);
  EXPECT_EQ(a.valid_idx, b.valid_idx);
  EXPECT_EQ(a.test_idx, b.test_idx);
  EXPECT_EQ(a.num_edge_lines, b.num_edge_lines);
}

double measured_homophily(const Dataset& d) {
  std::int64_t same = 0;
  for (std::int64_t v = 0; v < d.num_nodes(); ++v) {
    for (EdgeOffset e = d.graph.indptr()[v]; e < d.graph.indptr()[v + 1]; ++e) {
      same += d.labels[d.graph.indices()[e]] == d.labels[v];
    }
  }
  return static_cast<double>(same) / static_cast<double>(d.graph.nnz());
}

TEST(SyntheticPreset, DefaultHasItsSizesAndFlags) {
  const SyntheticConfig config = synthetic_preset("default");
  const Dataset d = generate_synthetic(config);
  EXPECT_EQ(d.name, "default");
  EXPECT_EQ(d.num_nodes(), 3000);
  EXPECT_EQ(d.features.rows(), 3000);
  EXPECT_EQ(d.num_features(), 64);
  EXPECT_EQ(d.features.dtype(), DType::F32);
  EXPECT_EQ(d.num_classes, 6);
  EXPECT_EQ(d.task, TaskType::MultiClass);
  EXPECT_EQ(d.eval_metric, "acc");
  EXPECT_TRUE(d.add_inverse_edge);
  EXPECT_EQ(d.num_edge_lines * 2, d.graph.nnz());
  EXPECT_NEAR(static_cast<double>(d.num_edge_lines), 15000.0, 15000.0 * 0.05);
  ASSERT_EQ(d.labels.size(), 3000u);
  std::vector<std::int64_t> class_count(6, 0);
  for (std::int64_t label : d.labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 6);
    ++class_count[label];
  }
  // Mildly varied class sizes: every class between half and twice the mean.
  for (std::int64_t count : class_count) {
    EXPECT_GT(count, 3000 / 6 / 2);
    EXPECT_LT(count, 3000 / 6 * 2);
  }
  EXPECT_EQ(d.train_idx.size(), 1500u);
  EXPECT_EQ(d.valid_idx.size(), 600u);
  EXPECT_EQ(d.test_idx.size(), 900u);
  EXPECT_NO_THROW(validate(d, "synthetic default"));
}

TEST(SyntheticPreset, ArxivLikeHasArxivCounts) {
  const Dataset d = generate_synthetic(synthetic_preset("arxiv-like"));
  EXPECT_EQ(d.num_nodes(), 169343);
  EXPECT_EQ(d.num_features(), 128);
  EXPECT_EQ(d.num_classes, 40);
  // ogbn-arxiv: 1,166,243 directed citations; symmetrised, 2,315,598 entries.
  EXPECT_NEAR(static_cast<double>(d.graph.nnz()), 2315598.0, 2315598.0 * 0.02);
  EXPECT_NEAR(static_cast<double>(d.train_idx.size()), 90941.0, 100.0);
  EXPECT_NEAR(static_cast<double>(d.valid_idx.size()), 29799.0, 100.0);
  EXPECT_EQ(d.train_idx.size() + d.valid_idx.size() + d.test_idx.size(), 169343u);
}

TEST(SyntheticPreset, ProductsLikeConfig) {
  // Generating it takes tens of seconds; check the configuration only.
  const SyntheticConfig c = synthetic_preset("products-like");
  EXPECT_EQ(c.num_nodes, 2449029);
  EXPECT_EQ(c.num_features, 100);
  EXPECT_EQ(c.num_classes, 47);
  EXPECT_GT(c.num_edges, 61859140);
}

TEST(SyntheticPreset, UnknownNameListsPresets) {
  try {
    synthetic_preset("cora-like");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::InvalidArgument);
    EXPECT_NE(error.message().find("cora-like"), std::string::npos) << error.message();
    EXPECT_NE(error.message().find("default, arxiv-like, products-like"), std::string::npos)
        << error.message();
  }
}

TEST(Synthetic, BadConfigIsInvalidArgument) {
  auto category = [](SyntheticConfig c) {
    try {
      generate_synthetic(c);
    } catch (const Error& error) {
      return error.category();
    }
    return ErrorCategory::Internal;
  };
  SyntheticConfig c = small_config(0.5);
  c.num_nodes = 0;
  EXPECT_EQ(category(c), ErrorCategory::InvalidArgument);
  c = small_config(1.5);
  EXPECT_EQ(category(c), ErrorCategory::InvalidArgument);
  c = small_config(0.5);
  c.degree_exponent = 1.0;
  EXPECT_EQ(category(c), ErrorCategory::InvalidArgument);
  c = small_config(0.5);
  c.train_fraction = 0.8;
  c.valid_fraction = 0.3;
  EXPECT_EQ(category(c), ErrorCategory::InvalidArgument);
  c = small_config(0.5);
  c.num_classes = 0;
  EXPECT_EQ(category(c), ErrorCategory::InvalidArgument);
  c = small_config(0.5);
  c.class_locality = 1.5;
  EXPECT_EQ(category(c), ErrorCategory::InvalidArgument);
}

// Share of cross-class entries whose classes are neighbours on the ring of classes.
double ring_neighbour_share(const Dataset& d) {
  const std::int64_t c = d.num_classes;
  std::int64_t cross = 0, near = 0;
  for (std::int64_t v = 0; v < d.num_nodes(); ++v) {
    for (EdgeOffset e = d.graph.indptr()[v]; e < d.graph.indptr()[v + 1]; ++e) {
      const std::int64_t a = d.labels[v], b = d.labels[d.graph.indices()[e]];
      if (a == b) continue;
      ++cross;
      near += (a - b + c) % c == 1 || (b - a + c) % c == 1;
    }
  }
  return static_cast<double>(near) / static_cast<double>(cross);
}

TEST(Synthetic, ClassLocalityKeepsCrossClassEdgesNearOnTheRing) {
  SyntheticConfig c = small_config(0.5);
  c.num_classes = 12;
  const double uniform = ring_neighbour_share(generate_synthetic(c));
  c.class_locality = 0.5;
  const Dataset local = generate_synthetic(c);
  // Uniform: 2 of 11 other classes are ring neighbours (~0.18). Locality 0.5: the weights
  // 1, 1, 1/2, 1/2, ..., 1/16, 1/16, 1/32 put 2 / (2 (1 + 1/2 + ... + 1/16) + 1/32) ~ 0.51 there.
  EXPECT_NEAR(uniform, 2.0 / 11.0, 0.03);
  EXPECT_NEAR(ring_neighbour_share(local), 0.51, 0.03);
  EXPECT_NEAR(measured_homophily(local), 0.5, 0.03);  // homophily itself is unchanged
}

TEST(Synthetic, SameSeedSameDatasetDifferentSeedDiffers) {
  const Dataset a = generate_synthetic(small_config(0.7, 1));
  const Dataset b = generate_synthetic(small_config(0.7, 1));
  expect_identical(a, b);
  const Dataset c = generate_synthetic(small_config(0.7, 2));
  EXPECT_NE(a.graph.indices(), c.graph.indices());
  EXPECT_FALSE(same_features(a.features, c.features));
  EXPECT_NE(a.labels, c.labels);
  EXPECT_NE(a.train_idx, c.train_idx);
}

TEST(Synthetic, IndependentOfThreadCount) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Dataset one = generate_synthetic(small_config(0.6));
  omp_set_num_threads(3);
  const Dataset three = generate_synthetic(small_config(0.6));
  omp_set_num_threads(threads);
  expect_identical(one, three);
}

TEST(Synthetic, GraphIsSymmetricWithoutSelfLoopsOrDuplicates) {
  const Dataset d = generate_synthetic(small_config(0.7));
  const Csr& g = d.graph;
  ASSERT_EQ(g.num_rows(), g.num_cols());
  EXPECT_FALSE(g.has_values());
  std::int64_t isolated = 0, max_degree = 0;
  for (std::int64_t v = 0; v < g.num_rows(); ++v) {
    const NodeId* first = g.indices().data() + g.indptr()[v];
    const NodeId* last = g.indices().data() + g.indptr()[v + 1];
    isolated += first == last;
    max_degree = std::max<std::int64_t>(max_degree, last - first);
    for (const NodeId* u = first; u != last; ++u) {
      ASSERT_NE(*u, v) << "self loop at " << v;
      if (u + 1 != last) {
        ASSERT_LT(*u, *(u + 1)) << "row " << v << " not sorted and unique";
      }
      const NodeId* back_first = g.indices().data() + g.indptr()[*u];
      const NodeId* back_last = g.indices().data() + g.indptr()[*u + 1];
      ASSERT_TRUE(std::binary_search(back_first, back_last, static_cast<NodeId>(v)))
          << "edge " << *u << " -> " << v << " has no reverse";
    }
  }
  // Power-law degrees: hubs far above the mean (10) and only a few isolated nodes.
  EXPECT_GT(max_degree, 20 * g.nnz() / g.num_rows());
  EXPECT_LT(isolated, g.num_rows() / 10);
  // Few duplicates among the draws: at least 90 % of the 100k draws survive.
  EXPECT_GT(d.num_edge_lines, 90000);
  EXPECT_LE(d.num_edge_lines, 100000);
}

TEST(Synthetic, MeasuredHomophilyFollowsConfig) {
  for (double homophily : {0.3, 0.6, 0.9}) {
    const Dataset d = generate_synthetic(small_config(homophily));
    // Merged duplicates are slightly more often intra-class; 0.02 covers that and sampling.
    EXPECT_NEAR(measured_homophily(d), homophily, 0.02) << "homophily " << homophily;
  }
  EXPECT_EQ(measured_homophily(generate_synthetic(small_config(0.0))), 0.0);
  EXPECT_EQ(measured_homophily(generate_synthetic(small_config(1.0))), 1.0);
}

TEST(Synthetic, FeaturesAreNoisyClassCentroids) {
  const SyntheticConfig config = small_config(0.7);
  const Dataset d = generate_synthetic(config);
  const std::int64_t f = d.num_features();
  // Within-class variance per entry should be noise^2; class means should differ.
  std::vector<double> sum(config.num_classes * f, 0.0), sum_sq(config.num_classes * f, 0.0);
  std::vector<std::int64_t> count(config.num_classes, 0);
  for (std::int64_t v = 0; v < d.num_nodes(); ++v) {
    const float* row = d.features.row<float>(v);
    ++count[d.labels[v]];
    for (std::int64_t j = 0; j < f; ++j) {
      sum[d.labels[v] * f + j] += row[j];
      sum_sq[d.labels[v] * f + j] += row[j] * row[j];
    }
  }
  double variance = 0;
  for (std::int64_t k = 0; k < config.num_classes; ++k) {
    for (std::int64_t j = 0; j < f; ++j) {
      double mean = sum[k * f + j] / count[k];
      variance += sum_sq[k * f + j] / count[k] - mean * mean;
    }
  }
  variance /= static_cast<double>(config.num_classes * f);
  EXPECT_NEAR(variance, config.feature_noise * config.feature_noise, 0.02);
  double centroid_gap = 0;
  for (std::int64_t j = 0; j < f; ++j) {
    centroid_gap += std::abs(sum[j] / count[0] - sum[f + j] / count[1]);
  }
  EXPECT_GT(centroid_gap / f, 0.3);
}

TEST(Synthetic, SplitIsADisjointSortedCover) {
  SyntheticConfig config = small_config(0.5);
  config.train_fraction = 0.3;
  config.valid_fraction = 0.1;
  const Dataset d = generate_synthetic(config);
  EXPECT_EQ(d.train_idx.size(), 6000u);
  EXPECT_EQ(d.valid_idx.size(), 2000u);
  EXPECT_EQ(d.test_idx.size(), 12000u);
  std::vector<int> seen(config.num_nodes, 0);
  for (const auto* ids : {&d.train_idx, &d.valid_idx, &d.test_idx}) {
    EXPECT_TRUE(std::is_sorted(ids->begin(), ids->end()));
    for (GlobalId v : *ids) ++seen[v];
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
}

TEST(Synthetic, TinyGraphsWork) {
  SyntheticConfig c;
  c.num_nodes = 3;
  c.num_edges = 10;
  c.num_features = 1;
  c.num_classes = 3;
  const Dataset d = generate_synthetic(c);
  EXPECT_EQ(d.num_nodes(), 3);
  EXPECT_EQ(std::set<std::int64_t>(d.labels.begin(), d.labels.end()).size(), 3u);
  c.num_edges = 0;
  EXPECT_EQ(generate_synthetic(c).graph.nnz(), 0);
}

TEST(Synthetic, RoundTripThroughOgbRawLayout) {
  const Dataset d = generate_synthetic(synthetic_preset("default"));
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tessera_test_synthetic_raw_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  write_ogb_raw(d, dir);
  const Dataset back = read_ogb_raw(dir);
  std::filesystem::remove_all(dir);
  expect_identical(d, back);
  EXPECT_EQ(back.num_classes, d.num_classes);
  EXPECT_EQ(back.add_inverse_edge, d.add_inverse_edge);
  EXPECT_EQ(fingerprint(back), fingerprint(d));
}

}  // namespace
}  // namespace tessera
