// SPDX-License-Identifier: Apache-2.0
// Locality-aware node orders: permutations of a graph's ids that put a node's neighbours near it,
// so that an SpMM over the relabelled graph finds many of the rows it gathers already in the
// cache. Reverse Cuthill-McKee (a bandwidth-reducing breadth-first order: a few breadth-first
// searches per component to find its start, then one that sorts each node's new neighbours by
// degree) and the order of a fine partition (the nodes of each part together). Both are
// deterministic: RCM depends on the graph only, the other on the partition plan only. An order
// is a vector `order` with order[i] = the old id at new position i.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/csr.h"
#include "datasets/dataset.h"
#include "partition/partition_plan.h"

namespace tessera {

// Reverse Cuthill-McKee on graph + graph^T (square; self loops and repeats ignored). Each
// connected component, taken in order of its lowest id, starts from a pseudo-peripheral node
// (George and Liu's search from that lowest id); a node's unvisited neighbours are appended in
// increasing degree, ties by id; the whole sequence is reversed at the end. InvalidArgument for
// a non-square graph.
std::vector<GlobalId> reverse_cuthill_mckee(const Csr& graph);
// The same for a graph already symmetric without self loops (a training graph), without the
// symmetrised copy. On another graph the result is still a permutation, but not RCM's.
std::vector<GlobalId> reverse_cuthill_mckee_symmetric(const Csr& graph);

// The nodes of part 0, then of part 1, ...; by increasing id within a part. InvalidArgument
// when num_parts < 1 or a node's part is outside [0, num_parts).
std::vector<GlobalId> order_by_parts(const PartitionPlan& plan);

// position[order[i]] = i. InvalidArgument unless `order` is a permutation of [0, size).
std::vector<GlobalId> inverse_order(std::span<const GlobalId> order);

// P A P^T for a square `a`: row i of the result is row order[i] of `a`, its columns renamed to
// their new positions and sorted, values carried along. InvalidArgument unless `order` is a
// permutation of a's rows.
Csr permute_symmetric(const Csr& a, std::span<const GlobalId> order);

// The largest |position(u) - position(v)| over the entries (v, u) of `a` under `order` (the
// identity when empty): the bandwidth an order is judged by. InvalidArgument when `order` is
// given and `a` is not square or `order` is not a permutation of its rows.
std::int64_t ordered_bandwidth(const Csr& a, std::span<const GlobalId> order = {});

// The orders a job renumbers its nodes by before training (--node-order): none keeps the
// dataset's ids; rcm is reverse_cuthill_mckee of the training graph, which depends on the graph
// alone, so every number of ranks renumbers the same way.
enum class NodeOrder { None = 0, Rcm = 1 };
NodeOrder parse_node_order(const std::string& text);  // InvalidArgument listing the names
std::vector<std::string> node_order_names();          // rcm, none
std::string to_string(NodeOrder order);

// Renumbers `dataset` by `order` (new id i is old id order[i]): its graph becomes P A P^T, the
// rows of features, labels and targets move with their nodes, and split ids are renamed (in the
// order they were listed). InvalidArgument unless `order` is a permutation of the nodes.
void renumber_dataset(Dataset& dataset, std::span<const GlobalId> order);

// The same plan over the renumbered nodes: node i gets the part of old node order[i].
// InvalidArgument unless `order` is a permutation of the plan's nodes.
PartitionPlan renumber_plan(const PartitionPlan& plan, std::span<const GlobalId> order);

// Renumbers a partitioned dataset by the order `kind` finds on `graph` (its training graph,
// symmetric without self loops):
// the dataset's per-node arrays, the graph and the plan all move to the new ids; the dataset's
// own graph is dropped (its N nodes kept, no entries), since the parts are cut from `graph`.
// Returns the order (empty for none, when nothing changes). Renumbering after partitioning keeps
// the parts those of the dataset's ids.
std::vector<GlobalId> renumber_partitioned(NodeOrder kind, Dataset& dataset, Csr& graph,
                                           PartitionPlan& plan);

}  // namespace tessera
