# SPDX-License-Identifier: Apache-2.0
"""Tessera: distributed full-graph GNN training. Run under mpiexec for several ranks.

  tessera.Session   Tessera's own models, trained with train_gcn's options as keywords
  tessera.Graph     a dataset from arrays (NumPy, torch, sequences), for Session.load
  tessera.torch     the graph operators as torch autograd Functions, GCNConv, SAGEConv and
                    DistributedGraph: a PyTorch model of one's own on K ranks
"""
from tessera import _convert
from tessera._core import Session, __version__, options
from tessera._core import Graph as _Graph

__all__ = ["Graph", "Session", "options", "__version__"]


def Graph(*, num_nodes, edge_index=None, indptr=None, indices=None, x, y=None, targets=None,
          train_idx=None, valid_idx=None, test_idx=None, train_mask=None, valid_mask=None,
          test_mask=None, num_classes=0, name="graph"):
    """A dataset for Session.load from arrays held by the caller: edges as edge_index (2, E)
    (PyG's source-to-target) or indptr/indices (CSR over destinations); x (N, F) features; y
    labels (N) or OGB's (N, 1), -1 for none, or targets (N, T) for multi-label; each split as
    ids (train_idx, ...) or a boolean mask of N entries (train_mask, ...).

    Any NumPy dtype, torch CPU tensor or sequence is taken when it converts exactly (int32 ids,
    float16 or float64 features that are exact float32s, integral float labels); otherwise a
    ValueError names the argument. Arrays that are already int64 / float32 and C-contiguous are
    held by reference; nothing passed in is modified."""
    def split(ids, mask, name):
        if ids is not None and mask is not None:
            raise ValueError(f"{name}_idx and {name}_mask: give one of them")
        if mask is not None:
            return _convert.ids(mask, f"{name}_mask", num_nodes)
        return None if ids is None else _convert.ids(ids, f"{name}_idx", num_nodes)

    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int):
        num_nodes = int(_convert.labels([num_nodes], "num_nodes")[0])
    train = split(train_idx, train_mask, "train")
    if train is None:
        raise ValueError("train_idx: the training nodes are required (train_idx or train_mask)")
    return _Graph(
        num_nodes=num_nodes,
        edge_index=None if edge_index is None else _convert.edge_index(edge_index),
        indptr=None if indptr is None else _convert.ids(indptr, "indptr"),
        indices=None if indices is None else _convert.ids(indices, "indices"),
        x=_convert.values(x, "x"),
        y=None if y is None else _convert.labels(y),
        targets=None if targets is None else _convert.values(targets, "targets"),
        train_idx=train, valid_idx=split(valid_idx, valid_mask, "valid"),
        test_idx=split(test_idx, test_mask, "test"), num_classes=num_classes, name=name)
