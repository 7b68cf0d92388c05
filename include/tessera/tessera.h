// SPDX-License-Identifier: Apache-2.0
// Tessera's public C++ API: distributed full-graph GNN training as a library. Include this one
// header; link Tessera::tessera (CMake: find_package(Tessera)) or `pkg-config --libs tessera`.
//   Options    every setting of a job (train_gcn's flags)
//   GraphView  a dataset held in the caller's arrays
//   Session    load, train, read back embeddings, logits and weights (one per MPI rank)
//   DistributedGraph  this rank's part and its halo-exchanging aggregations, for models of
//              one's own (tessera.torch)
#pragma once

#include "tessera/distributed_graph.h"
#include "tessera/graph.h"
#include "tessera/options.h"
#include "tessera/session.h"
