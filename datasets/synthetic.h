// SPDX-License-Identifier: Apache-2.0
// Synthetic node-classification graphs: a degree-corrected stochastic block model with
// power-law degrees, one block per class with tunable homophily, and features that are noisy
// class centroids. Deterministic from the seed (counter-based RNG), whatever the thread count.
#pragma once

#include <cstdint>
#include <string>

#include "datasets/dataset.h"

namespace tessera {

struct SyntheticConfig {
  std::string name = "synth";
  std::int64_t num_nodes = 0;
  std::int64_t num_edges = 0;     // undirected edges to draw (before duplicate removal)
  std::int64_t num_features = 0;
  std::int64_t num_classes = 0;
  double homophily = 0.8;         // probability an edge stays inside its class block
  // Where an edge that leaves its class lands. 0: any other class, by total weight (plain
  // DC-SBM). In (0, 1]: classes sit on a ring and the other class at ring distance d gets
  // weight x (1 - class_locality)^(d - 1), so cross-class edges stay among related classes, as
  // in real citation and co-purchase graphs; this is what lets METIS cut such graphs well.
  double class_locality = 0.0;
  double degree_exponent = 2.5;   // power-law exponent of the expected degrees
  double feature_noise = 1.0;     // std of the Gaussian noise around each class centroid
  double train_fraction = 0.5;    // split fractions (the rest is test)
  double valid_fraction = 0.25;
  std::uint64_t seed = 0;
};

// Presets: "default" (small demo, trains in seconds), "arxiv-like" (169,343 nodes, ~1.16M
// undirected edges, 128 features, 40 classes), "products-like" (2,449,029 nodes, ~61.9M edges,
// 100 features, 47 classes). Throws InvalidArgument listing the presets for an unknown name.
SyntheticConfig synthetic_preset(const std::string& name);

// The graph is undirected (stored symmetric, add_inverse_edge = true), without self loops.
Dataset generate_synthetic(const SyntheticConfig& config);

}  // namespace tessera
