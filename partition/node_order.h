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
#include <vector>

#include "core/csr.h"
#include "partition/partition_plan.h"

namespace tessera {

// Reverse Cuthill-McKee on graph + graph^T (square; self loops and repeats ignored). Each
// connected component, taken in order of its lowest id, starts from a pseudo-peripheral node
// (George and Liu's search from that lowest id); a node's unvisited neighbours are appended in
// increasing degree, ties by id; the whole sequence is reversed at the end. InvalidArgument for
// a non-square graph.
std::vector<GlobalId> reverse_cuthill_mckee(const Csr& graph);

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

}  // namespace tessera
