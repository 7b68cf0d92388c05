// SPDX-License-Identifier: Apache-2.0
// The ideal traffic of one training epoch in each parallel mode (forward + backward, bytes after
// the codec), against which the measured counters are checked (tests) and reported (bench):
//   graph     Σ_p M_p · Σ_layers (w_fwd + w_bwd) · b   (M_p halo nodes of part p; w the width a
//             layer aggregates: F_out when it transforms first, else F_in; the first layer sends
//             no gradient back unless it transforms first: the features get none; GAT: H·D + H
//             both ways at every layer; GCNII: F both ways in its GCNII layers, nothing in the
//             dense ones; each kind's LayerKind::halo_widths)
//   pipeline  2 (S - 1) · N · H · b   (every node's embedding and its gradient cross each of the
//             S - 1 stage boundaries once; GCNII twice that: its h0 and h0's gradient too)
//   hybrid    the pipeline term over the G parts plus the graph term for their halos (each
//             layer's boundary rows and gradient contributions, once per epoch)
// b = bytes per value after the codec (4 for none, 2 for bf16/fp16, bits/8 plus the per-row
// scale and offset for the integer codecs). Message headers (16 bytes each) are not counted.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/codec.h"
#include "layers/model.h"

namespace tessera {

struct ExchangedWidths {
  std::vector<std::int64_t> forward;   // (L) width each layer's halo exchange carries forward
  std::vector<std::int64_t> backward;  // (L) ... and backward (0: no exchange)
};
// Of a model of `kind` (its LayerKind::halo_widths, layer by layer); the GCN family (gcn,
// resgcn) and SAGE exchange the width they aggregate in the automatic order.
ExchangedWidths exchanged_widths(int layers, std::int64_t in_channels, std::int64_t hidden,
                                 std::int64_t out_channels, ModelKind kind = ModelKind::Gcn,
                                 const LayerHyper& hyper = {});

// The widest exchange of a model, forward or backward (what its halo buffers are sized for).
std::int64_t widest_exchange(const ExchangedWidths& widths);

// Bytes of `rows` rows of width `width` after `codec` (headers not counted).
double encoded_bytes(CodecKind codec, std::int64_t rows, std::int64_t width);

double graph_mode_bytes(std::int64_t halo_nodes_total, const ExchangedWidths& widths,
                        CodecKind forward, CodecKind backward);
// streams: 2 for initial-residual kinds (GCNII), whose h0 and its gradient travel beside the
// embeddings as messages of their own.
double pipeline_mode_bytes(int stages, std::int64_t nodes, std::int64_t hidden, CodecKind forward,
                           CodecKind backward, int streams = 1);

}  // namespace tessera
