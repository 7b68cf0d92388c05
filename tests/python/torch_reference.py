# SPDX-License-Identifier: Apache-2.0
"""What the tessera.torch tests compare against: Cora read from its OGB raw files with NumPy, the
graph operators built in plain torch (sparse, single process, every node), PyTorch Geometric's
GCNConv / SAGEConv when PyG is installed (else layers written here with the same parameters and
formulas), and one training loop for both sides."""
import gzip
import os

import numpy as np
import torch
import torch.nn.functional as F

from shared_datasets import CORA  # noqa: F401 (the tests name it ref.CORA)

try:  # PyG where it is installed (PyG 2.4 on Debian's torch); the layers below otherwise
    import torch_geometric.nn as pyg_nn
except ImportError:
    pyg_nn = None


def _csv(path, dtype):
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=2)


class CoraData:
    """Cora as a PyG user has it after loading: edge_index with both directions (no self
    loops), x float32, y (N) int64 and boolean train/val/test masks."""

    def __init__(self, root=CORA):
        raw = os.path.join(root, "raw")
        edges = _csv(os.path.join(raw, "edge.csv.gz"), np.int64).T
        self.edge_index = torch.from_numpy(np.concatenate([edges, edges[::-1]], axis=1).copy())
        self.x = torch.from_numpy(_csv(os.path.join(raw, "node-feat.csv.gz"), np.float32))
        self.y = torch.from_numpy(_csv(os.path.join(raw, "node-label.csv.gz"), np.int64)[:, 0])
        self.num_nodes = self.x.shape[0]
        for split, attr in (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask")):
            ids = _csv(os.path.join(root, "split", "public", f"{split}.csv.gz"), np.int64)[:, 0]
            mask = torch.zeros(self.num_nodes, dtype=torch.bool)
            mask[torch.from_numpy(ids)] = True
            setattr(self, attr, mask)


def operators(edge_index, n):
    """The symmetrised graph's operators as sparse (n, n) torch matrices: gcn (D^-1/2 (A+I)
    D^-1/2), mean (rows divided by their degree) and sum (A)."""
    src, dst = edge_index.numpy()
    a = np.zeros((n, n), dtype=np.float64)
    a[src, dst] = 1.0
    a[dst, src] = 1.0
    np.fill_diagonal(a, 0.0)
    loops = a + np.eye(n)
    d = 1.0 / np.sqrt(loops.sum(axis=1))
    degree = a.sum(axis=1)
    mean = a / np.where(degree > 0, degree, 1.0)[:, None]
    as_sparse = lambda m: torch.from_numpy(m.astype(np.float32)).to_sparse()
    return {"gcn": as_sparse(d[:, None] * loops * d[None, :]), "mean": as_sparse(mean),
            "sum": as_sparse(a)}


class RefGCNConv(torch.nn.Module):
    """PyG's GCNConv without PyG: lin (out x in, no bias), the normalised operator, bias."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = torch.nn.Linear(in_channels, out_channels, bias=False)
        self.bias = torch.nn.Parameter(torch.zeros(out_channels))

    def forward(self, x, ops):
        return torch.sparse.mm(ops["gcn"], self.lin(x)) + self.bias


class RefSAGEConv(torch.nn.Module):
    """PyG's SAGEConv (mean) without PyG: lin_l(mean of neighbours) + lin_r(x)."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin_l = torch.nn.Linear(in_channels, out_channels)
        self.lin_r = torch.nn.Linear(in_channels, out_channels, bias=False)

    def forward(self, x, ops):
        return self.lin_l(torch.sparse.mm(ops["mean"], x)) + self.lin_r(x)


def reference_convs():
    """(GCNConv, SAGEConv, takes_edge_index, name) of the reference side."""
    if pyg_nn is not None:
        return pyg_nn.GCNConv, pyg_nn.SAGEConv, True, "PyTorch Geometric"
    return RefGCNConv, RefSAGEConv, False, "plain torch"


class Net(torch.nn.Module):
    """The 2-layer model of PyG's examples, with any conv class; dropout off."""

    def __init__(self, conv, in_channels, hidden, out_channels):
        super().__init__()
        self.conv1 = conv(in_channels, hidden)
        self.conv2 = conv(hidden, out_channels)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


class RefBatchNorm1d(torch.nn.BatchNorm1d):
    """torch's BatchNorm1d, called as tessera.torch's is: bn(x, graph)."""

    def forward(self, x, graph=None):
        return super().forward(x)


class NetBN(torch.nn.Module):
    """conv, batch norm, relu, conv (the layout of OGB's ogbn-arxiv GCN); dropout off."""

    def __init__(self, conv, norm, in_channels, hidden, out_channels):
        super().__init__()
        self.conv1 = conv(in_channels, hidden)
        self.bn = norm(hidden)
        self.conv2 = conv(hidden, out_channels)

    def forward(self, x, edge_index):
        graph = edge_index if hasattr(edge_index, "num_local") else None
        return self.conv2(self.bn(self.conv1(x, edge_index), graph).relu(), edge_index)


def cross_entropy_sum(out, y):
    return F.cross_entropy(out, y, reduction="sum")


def smoothed_loss_sum(out, y, eps=0.1):
    """A custom loss: label smoothing written by hand, summed over the rows."""
    log_p = F.log_softmax(out, dim=1)
    target = torch.full_like(log_p, eps / out.shape[1])
    target.scatter_(1, y[:, None], 1.0 - eps + eps / out.shape[1])
    return -(target * log_p).sum()


def train(model, x, graph_arg, y, masks, counts, epochs, loss_sum, lr=0.01, weight_decay=5e-4,
          step=None, reduce=None, total=float, patience=None):
    """Full-graph training: loss = loss_sum(train rows) / count of train nodes, Adam.
    Returns per-epoch losses, validation accuracies and the epoch early stopping stopped at.
    `step(epoch)` runs at each epoch's start, `reduce(model)` after backward (the gradient
    all-reduce), `total(value)` sums a value over ranks."""
    train_mask, val_mask = masks
    num_train, num_valid = counts
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses, accuracies = [], []
    best, since = -1.0, 0
    for epoch in range(epochs):
        if step is not None:
            step(epoch)
        model.train()
        opt.zero_grad()
        out = model(x, graph_arg)
        loss = loss_sum(out[train_mask], y[train_mask]) / num_train
        loss.backward()
        if reduce is not None:
            reduce(model)
        opt.step()
        losses.append(total(loss.item()))
        model.eval()
        with torch.no_grad():
            pred = model(x, graph_arg).argmax(dim=1)
        accuracies.append(total(int((pred[val_mask] == y[val_mask]).sum())) / num_valid)
        if patience is not None:
            if accuracies[-1] > best:
                best, since = accuracies[-1], 0
            else:
                since += 1
                if since >= patience:
                    return losses, accuracies, epoch
    return losses, accuracies, epochs - 1
