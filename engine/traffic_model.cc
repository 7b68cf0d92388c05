// SPDX-License-Identifier: Apache-2.0
// Ideal per-epoch traffic of the parallel modes (see traffic_model.h).
#include "engine/traffic_model.h"

#include <algorithm>

namespace tessera {

ExchangedWidths exchanged_widths(int layers, std::int64_t in_channels, std::int64_t hidden,
                                 std::int64_t out_channels, ModelKind kind,
                                 const LayerHyper& hyper) {
  ExchangedWidths w;
  for (int l = 0; l < layers; ++l) {
    const LayerShape shape{.layer = l,
                           .num_layers = layers,
                           .f_in = l == 0 ? in_channels : hidden,
                           .f_out = l + 1 == layers ? out_channels : hidden,
                           .hyper = hyper};
    const HaloWidths layer = kind->halo_widths(shape);
    w.forward.push_back(layer.forward);
    w.backward.push_back(layer.backward);
  }
  return w;
}

std::int64_t widest_exchange(const ExchangedWidths& widths) {
  std::int64_t most = 0;
  for (const std::int64_t w : widths.forward) most = std::max(most, w);
  for (const std::int64_t w : widths.backward) most = std::max(most, w);
  return most;
}

double encoded_bytes(CodecKind codec, std::int64_t rows, std::int64_t width) {
  return static_cast<double>(rows) * static_cast<double>(encoded_row_bytes(codec, width));
}

double graph_mode_bytes(std::int64_t halo_nodes_total, const ExchangedWidths& widths,
                        CodecKind forward, CodecKind backward) {
  double bytes = 0.0;
  for (std::size_t l = 0; l < widths.forward.size(); ++l) {
    if (widths.forward[l] > 0) bytes += encoded_bytes(forward, halo_nodes_total, widths.forward[l]);
    if (widths.backward[l] > 0) bytes += encoded_bytes(backward, halo_nodes_total, widths.backward[l]);
  }
  return bytes;
}

double pipeline_mode_bytes(int stages, std::int64_t nodes, std::int64_t hidden, CodecKind forward,
                           CodecKind backward, int streams) {
  return static_cast<double>(stages - 1) * streams *
         (encoded_bytes(forward, nodes, hidden) + encoded_bytes(backward, nodes, hidden));
}

}  // namespace tessera
