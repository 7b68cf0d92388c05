# SPDX-License-Identifier: Apache-2.0
"""Tessera: distributed full-graph GNN training. Run under mpiexec for several ranks.

  tessera.Session   Tessera's own models, trained with train_gcn's options as keywords
  tessera.Graph     a dataset from arrays (NumPy, torch, sequences), for Session.load
  tessera.torch     the graph operators as torch autograd Functions, GCNConv, SAGEConv and
                    DistributedGraph: a PyTorch model of one's own on K ranks
"""
import os as _os
import warnings as _warnings

import numpy as _np

from tessera import _convert
from tessera._core import Session, __version__, blas_cores, options
from tessera._core import Graph as _Graph

__all__ = ["Graph", "Session", "blas_cores", "options", "__version__"]

# The launchers' variables for a process's rank, the launcher's own first (mpiexec inside a
# Slurm allocation leaves every rank SLURM_PROCID=0).
_RANK_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")


def _warn_about_blas():
    """On import, in a lone process or on rank 0 of a launch: a RuntimeWarning when this
    process's OpenBLAS runs slower GEMM kernels than this CPU's best (OpenBLAS 0.3.21 falls back
    to old ones on CPUs it does not know). train_gcn starts again with the better ones; a Python
    process cannot, and NumPy's, torch's and Tessera's products all run on the ones OpenBLAS
    chose when it loaded."""
    chosen, better = blas_cores()
    rank = next((_os.environ[v] for v in _RANK_VARIABLES if v in _os.environ), "0")
    if better and rank.strip() == "0":
        _warnings.warn(
            f"OpenBLAS chose its {chosen} GEMM kernels, but this CPU runs its {better} kernels, "
            f"which are faster; this process's products (NumPy's, torch's and Tessera's) run on "
            f"{chosen} until it exits: start Python with OPENBLAS_CORETYPE={better} (under "
            f"mpiexec: -genv OPENBLAS_CORETYPE {better})", RuntimeWarning, stacklevel=2)


_warn_about_blas()


def Graph(*, num_nodes, edge_index=None, indptr=None, indices=None, x, y=None, targets=None,
          train_idx=None, valid_idx=None, test_idx=None, train_mask=None, valid_mask=None,
          test_mask=None, val_mask=None, num_classes=0, name="graph"):
    """A dataset for Session.load from arrays held by the caller: edges as edge_index (2, E)
    (PyG's source-to-target) or indptr/indices (CSR over destinations); x (N, F) features; y
    labels (N) or OGB's (N, 1), -1 for none, or targets (N, T) for multi-label; each split as
    ids (train_idx, ...) or a boolean mask of N entries (train_mask, ...; PyG's val_mask is
    valid_mask).

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

    if val_mask is not None:
        if valid_mask is not None:
            raise ValueError("val_mask and valid_mask: give one of them")
        valid_mask = val_mask
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


def _set_weights(self, weights):
    """Collective, after train() or predict(): every weight of weights() by its name, as arrays
    of its shape (a bias (1, F) or (F)); converted exactly as Graph's inputs. Then an evaluation
    pass: embeddings(), logits() and predictions() describe the weights set."""
    current = self.weights()
    converted = {}
    for name, value in dict(weights).items():
        array = _convert.values(value, f"weights[{name!r}]", ndim=_np.ndim(value))
        if name in current and array.ndim == 1:
            array = array.reshape(current[name].shape)
        if array.ndim != 2:
            raise ValueError(f"weights[{name!r}]: expected a matrix or a vector, got shape "
                             f"{array.shape}")
        converted[name] = array
    self._set_weights(converted)


def _pyg_names(weights):
    """{Tessera name: (PyG name, transposed)} for this model's weights: GCNConv's lin.weight and
    bias, SAGEConv's lin_l (with the bias) and lin_r, BatchNorm1d's weight and bias."""
    sage = any(name.endswith(".root_weight") for name in weights)
    names = {}
    for name in weights:
        layer, _, kind = name.rpartition(".")
        if layer.startswith("bns."):
            names[name] = (name, False)
        elif kind == "weight":
            names[name] = (f"{layer}.lin_l.weight" if sage else f"{layer}.lin.weight", True)
        elif kind == "root_weight":
            names[name] = (f"{layer}.lin_r.weight", True)
        elif kind == "bias":
            names[name] = (f"{layer}.lin_l.bias" if sage else f"{layer}.bias", False)
        else:
            names[name] = (name, False)
    return names


def _state_dict(self):
    """The weights under PyTorch Geometric's names and layouts, as a torch model built from
    GCNConv / SAGEConv in `convs` and BatchNorm1d in `bns` has them: lin.weight (out x in), bias
    (out), ... (NumPy arrays; torch.from_numpy or load_state_dict(strict=False) take them)."""
    weights = self.weights()
    out = {}
    for name, (pyg, transposed) in _pyg_names(weights).items():
        value = weights[name]  # matrices in x out, vectors 1 x F
        if transposed:
            value = _np.ascontiguousarray(value.T)
        elif value.shape[0] == 1:
            value = value.reshape(-1)
        out[pyg] = value
    return out


def _load_state_dict(self, state):
    """Collective: set_weights from PyTorch Geometric's names and layouts (as state_dict gives
    them; torch tensors or arrays). Every weight is required; other keys (batch-norm running
    statistics, num_batches_tracked) are ignored."""
    weights = self.weights()
    converted = {}
    for name, (pyg, transposed) in _pyg_names(weights).items():
        if pyg not in state:
            raise ValueError(f"state: '{pyg}' is missing (this model's weights: "
                             f"{', '.join(p for p, _ in _pyg_names(weights).values())})")
        value = _convert.values(state[pyg], f"state[{pyg!r}]", ndim=_np.ndim(state[pyg]))
        if transposed:
            value = _np.ascontiguousarray(value.T)
        converted[name] = value
    _set_weights(self, converted)


Session.set_weights = _set_weights
Session.state_dict = _state_dict
Session.load_state_dict = _load_state_dict
