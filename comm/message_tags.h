// SPDX-License-Identifier: Apache-2.0
// Every point-to-point message tag in Tessera, in one place. A tag only has to be unique among
// the messages that can be in flight at once on the same communicator; the comments say which
// communicator each family uses. Collectives (all-reduce, broadcast) need no tag.
#pragma once

namespace tessera::tags {

// HaloExchange (its communicator: the job's, or a pipeline stage's across parts in hybrid mode):
// one message per peer, layer and direction; layers < 2^20.
constexpr int halo_forward(int layer) { return 2 * layer; }
constexpr int halo_backward(int layer) { return 2 * layer + 1; }
// AdaptiveBits on the same communicator, outside any exchange: the bits of every row, and the
// receivers' aggregation weights (once at set-up).
inline constexpr int kBitPlan = 9001;
inline constexpr int kReceiverWeights = 9002;

// Part loading on the job's communicator (engine/part_loader.cc): rank 0 sends each rank the size
// and the image of its part file.
inline constexpr int kPartSize = 7001;
inline constexpr int kPartImage = 7002;
// gather_by_id (engine/outputs.h) on the job's communicator: every rank's ids and rows to rank 0
// (the row counts go by an all-reduce).
inline constexpr int kGatherIds = 7102;
inline constexpr int kGatherRows = 7103;
// ROC-AUC evaluation on the job's communicator: each rank's (targets, scores) rows to rank 0.
inline constexpr int kRocAucRows = 1 << 20;

// Pipeline streams on a part's pipe communicator (its stages): chunk c's embeddings forward and
// their gradients backward, and the exact evaluation pass.
constexpr int pipeline_forward(int chunk) { return 2 * chunk; }
constexpr int pipeline_backward(int chunk) { return 2 * chunk + 1; }
inline constexpr int kPipelineEval = 1 << 24;
// Initial-residual kinds (GCNII): chunk c's h0 (layer 0's output, which every later layer reads)
// beside its embeddings, and h0's gradient beside theirs; chunks < 2^20.
constexpr int pipeline_initial_forward(int chunk) { return (1 << 22) + 2 * chunk; }
constexpr int pipeline_initial_backward(int chunk) { return (1 << 22) + 2 * chunk + 1; }
inline constexpr int kPipelineEvalInitial = (1 << 24) + 1;

}  // namespace tessera::tags
