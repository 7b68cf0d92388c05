// SPDX-License-Identifier: Apache-2.0
// The internal Dataset built from a caller's GraphView: shapes and id ranges checked with
// messages naming the GraphView field, then the dataset's own invariants (datasets/dataset.h).
#pragma once

#include "datasets/dataset.h"
#include "tessera/graph.h"

namespace tessera {

// Throws InvalidArgument (a field's size or presence) or InvalidInput (a value out of range).
Dataset dataset_from_view(const GraphView& view);

}  // namespace tessera
