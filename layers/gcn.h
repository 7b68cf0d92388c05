// SPDX-License-Identifier: Apache-2.0
// GCNConv (Kipf & Welling): out = act(Â X W + b), Â = D^-1/2 (A + I) D^-1/2 applied by a
// Propagator whose matrix already holds the normalisation (global degrees when distributed).
// gcn_forward fills a GcnCache that gcn_backward consumes; nothing else is remembered. The layer
// kind "gcn" (layers/layer_kind.h) wraps the pair; residual GCN (layers/resgcn.cc) reuses it.
// Backward OVERWRITES the activation gradient d_x and ACCUMULATES d_weight and d_bias.
// Shapes: N rows (owned nodes), F_in input width, F_out output width.
#pragma once

#include <cstdint>
#include <span>

#include "core/kernels.h"
#include "core/tensor.h"
#include "layers/conv_common.h"
#include "layers/layer_kind.h"
#include "layers/propagator.h"

namespace tessera {

struct GcnCache {
  // Filled by gcn_forward, consumed by gcn_backward (which reuses `mixed` as its workspace,
  // so there is one backward per forward; a second one throws).
  bool ready = false;  // a forward has filled the cache and no backward has consumed it
  bool transform_first = false;
  Tensor mixed;  // aggregate-first: Â X (N, F_in), needed for d_weight;
                 // transform-first: X W (N, F_out), forward scratch
  // Backward workspace, only when act != None; contents undefined between calls.
  Tensor d_pre;  // (N, F_out) gradient before bias + activation
};

// out (N, F_out) = act(Â x W + bias), x (N, F_in), weight (F_in, F_out) row-major,
// bias (F_out) or empty (no bias). `layer` tags the propagator calls. out is resized.
void gcn_forward(Tensor& out, GcnCache& cache, const Tensor& x, const Tensor& weight,
                 std::span<const float> bias, Activation act, Propagator& propagator, int layer,
                 ConvOrder order = ConvOrder::Auto);

// d_out (N, F_out) is the gradient of the loss w.r.t. `out` (the activated output of the
// forward that filled `cache`), x and weight as in that forward. When the forward aggregated
// first, x is read for its shape only (Model frees dropped-out inputs on that basis).
// d_x (N, F_in): overwritten (resized; must not alias d_out); nullptr skips it (first layer):
//   saves a GEMM, and with aggregate-first also a propagator backward (SpMM + halo traffic).
// d_weight (F_in, F_out), d_bias (F_out, or empty when the forward had no bias): accumulated.
void gcn_backward(Tensor* d_x, Tensor& d_weight, std::span<float> d_bias, GcnCache& cache,
                  const Tensor& d_out, const Tensor& x, const Tensor& out, const Tensor& weight,
                  Activation act, Propagator& propagator, int layer);

// The GCN layer of a model: parameters "weight" (F_in, F_out, Glorot, decayed) and "bias"
// (F_out, zeros), and its Conv; what the "gcn" and "resgcn" kinds are made of.
std::vector<ParamDecl> gcn_params(const LayerShape& shape);
std::unique_ptr<Conv> make_gcn_conv(const LayerShape& shape, std::span<const std::int64_t> at);
// A GCN layer's backward reads its input (not only its shape) when it transforms first.
bool gcn_reads_input(std::int64_t f_in, std::int64_t f_out);

}  // namespace tessera
