// SPDX-License-Identifier: Apache-2.0
// The layer kind "resgcn": GCN layers (layers/gcn.h) whose hidden layers after the first add a
// scaled branch to an identity shortcut that skips the dropout (He et al.; DeepGCNs' ResGCN;
// SkipInit's scaling): h_{l+1} = h_l + 0.1 ReLU(Â dropout(h_l) W_l + b_l). The small branch scale
// keeps h from growing with depth, so 8-32 layer stacks train (Model applies the mix; model.cc
// has the measurements).
#include "layers/conv_common.h"
#include "layers/gcn.h"
#include "layers/layer_kind.h"

namespace tessera {

extern const LayerKind kResGcnLayer;
const LayerKind kResGcnLayer = {
    .name = "resgcn",
    .help =
        "GCN whose hidden layers after the first add 0.1 x their output to an identity "
        "path, h + 0.1 ReLU(Â dropout(h) W + b): trains at 8-32 layers",
    .op = &kGcnOperator,
    .residual = true,
    .gemms = 1,
    .backward_reads_input = gcn_reads_input,
    .halo_widths = propagated_halo_widths,
    .params = gcn_params,
    .make = make_gcn_conv,
};
const ModelKind ModelKind::ResGcn{kResGcnLayer};

}  // namespace tessera
