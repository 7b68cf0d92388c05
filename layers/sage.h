// SPDX-License-Identifier: Apache-2.0
// SAGEConv as in PyG (mean aggregator, root weight): out = act(mean_{u in N(v)} x_u W + b
// + x_v W_root). The mean is applied by a Propagator whose matrix holds 1/deg(v) (zero-degree
// rows aggregate to 0). sage_forward fills a SageCache that sage_backward consumes; the layer
// kind "sage" (layers/layer_kind.h) wraps the pair.
// Backward OVERWRITES the activation gradient d_x and ACCUMULATES d_weight, d_bias and
// d_root_weight. Shapes: N rows (owned nodes), F_in input width, F_out output width.
#pragma once

#include <span>

#include "core/kernels.h"
#include "core/tensor.h"
#include "layers/conv_common.h"  // ConvOrder: the neighbour branch picks its order like GCN
#include "layers/propagator.h"

namespace tessera {

struct SageCache {
  // Filled by sage_forward, consumed by sage_backward (which reuses `mixed` as its workspace,
  // so there is one backward per forward; a second one throws).
  bool ready = false;  // a forward has filled the cache and no backward has consumed it
  bool transform_first = false;
  Tensor mixed;  // aggregate-first: P X (N, F_in), needed for d_weight;
                 // transform-first: X W (N, F_out), forward scratch
  // Backward workspace, only when act != None; contents undefined between calls.
  Tensor d_pre;  // (N, F_out) gradient before bias + activation
};

// out (N, F_out) = act(P x weight + bias + x root_weight), P the mean propagator,
// x (N, F_in), weight and root_weight (F_in, F_out) row-major (PyG's lin_l / lin_r, transposed),
// bias (F_out) or empty. out is resized.
void sage_forward(Tensor& out, SageCache& cache, const Tensor& x, const Tensor& weight,
                  std::span<const float> bias, const Tensor& root_weight, Activation act,
                  Propagator& propagator, int layer, ConvOrder order = ConvOrder::Auto);

// d_out (N, F_out): gradient w.r.t. the activated `out` of the forward that filled `cache`.
// d_x (N, F_in): overwritten (resized; must not alias d_out), or nullptr to skip it (first layer).
// d_weight, d_root_weight (F_in, F_out), d_bias (F_out or empty): accumulated.
void sage_backward(Tensor* d_x, Tensor& d_weight, std::span<float> d_bias, Tensor& d_root_weight,
                   SageCache& cache, const Tensor& d_out, const Tensor& x, const Tensor& out,
                   const Tensor& weight, const Tensor& root_weight, Activation act,
                   Propagator& propagator, int layer);

}  // namespace tessera
