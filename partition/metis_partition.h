// SPDX-License-Identifier: Apache-2.0
// METIS k-way partitioner (Debian's libmetis 5.1, 32-bit idx_t): minimises the edge cut of the
// symmetrised graph while balancing nodes and training nodes as two constraints, then repairs
// the empty parts METIS can leave. Also the size check that keeps graphs within METIS's 32-bit
// indices. The dispatcher over all methods, make_partition, is in partition_plan.h.
#pragma once

#include <cstdint>
#include <span>

#include "core/csr.h"
#include "partition/partition_plan.h"

namespace tessera {

// Throws InvalidInput when METIS cannot index the graph: num_nodes or num_directed_edges (the
// entries of the symmetric adjacency METIS receives, i.e. xadj[N]) above 2^31 - 1.
void check_metis_limits(std::int64_t num_nodes, std::int64_t num_directed_edges);

// METIS_PartGraphKway on graph + graph^T without self loops and duplicate edges (`graph` must be
// square; it is symmetrised here, one extra copy alive during the call). Edge-cut objective,
// METIS's default imbalance tolerance (ufactor 30: 1.03 per constraint), METIS_OPTION_SEED from
// `seed` (folded into 31 bits; the same seed gives the same plan). Vertex weights (N, 2) =
// (1, 1 if training node else 0), so each part gets ~N/K nodes and ~|train|/K training nodes;
// with an empty train_idx only the first constraint is used.
//
// After METIS, a repair pass (deterministic) guarantees:
//  - every part owns >= 1 node: each empty part, in order, takes one node from the currently
//    largest part (lowest index on ties): a non-training node if it has one, fewest neighbours
//    first, then lowest id;
//  - when there are >= K distinct training nodes, every part owns >= 1 of them: each part
//    without one takes the training node with the fewest neighbours (then lowest id) from the
//    part with the most training nodes.
// No part is emptied by the repair. METIS is not called for K = 1 (it crashes there): all zeros.
//
// Throws InvalidArgument for a non-square graph, num_parts < 1, num_parts > N or a train_idx
// entry outside [0, N); InvalidInput when check_metis_limits refuses the graph; Internal when
// METIS returns an error (its code named in the message).
PartitionPlan partition_metis(const Csr& graph, std::span<const GlobalId> train_idx,
                              int num_parts, std::uint64_t seed);

}  // namespace tessera
