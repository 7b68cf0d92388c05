#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch Geometric's GCN on a dataset in the OGB raw layout (as `tessera_data generate` writes
it), full-graph on one GPU, for a side-by-side with Tessera: median epoch time (forward,
backward, Adam step; synchronised) and the final accuracies, as one JSON object.

usage: pyg_gcn.py DATASET_DIR OUT_JSON [--layers 3] [--hidden 256] [--epochs 20] [--dropout 0.5]
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time


def read_csv(path, dtype):
    import numpy as np
    try:
        import pandas as pd
        return pd.read_csv(path, header=None, dtype=dtype).to_numpy()
    except ImportError:
        with gzip.open(path, "rt") as f:
            return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=2)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset")
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args()

    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv
    from torch_geometric.utils import to_undirected

    if not torch.cuda.is_available():
        sys.exit("pyg_gcn.py: no CUDA GPU visible to PyTorch")
    dev = torch.device("cuda")
    meta = json.load(open(os.path.join(a.dataset, "meta.json")))
    t0 = time.perf_counter()
    raw = os.path.join(a.dataset, "raw")
    edges = torch.from_numpy(read_csv(os.path.join(raw, "edge.csv.gz"), np.int64).T.copy())
    x = torch.from_numpy(read_csv(os.path.join(raw, "node-feat.csv.gz"), np.float32))
    y = torch.from_numpy(read_csv(os.path.join(raw, "node-label.csv.gz"), np.int64)).view(-1)
    split = os.path.join(a.dataset, "split", meta["split"])
    idx = {k: torch.from_numpy(read_csv(os.path.join(split, k + ".csv.gz"), np.int64)).view(-1)
           for k in ("train", "valid", "test")}
    if meta.get("add_inverse_edge", False):
        edges = to_undirected(edges, num_nodes=x.shape[0])
    load_s = time.perf_counter() - t0
    x, y, edges = x.to(dev), y.to(dev), edges.to(dev)
    idx = {k: v.to(dev) for k, v in idx.items()}

    class GCN(torch.nn.Module):
        def __init__(self, f_in, hidden, classes, layers):
            super().__init__()
            dims = [f_in] + [hidden] * (layers - 1) + [classes]
            self.convs = torch.nn.ModuleList(
                GCNConv(dims[i], dims[i + 1], cached=True) for i in range(layers))

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i < len(self.convs) - 1:
                    x = F.dropout(F.relu(x), p=a.dropout, training=self.training)
            return x.log_softmax(dim=-1)

    model = GCN(x.shape[1], a.hidden, int(meta["num_classes"]), a.layers).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    times = []
    for _ in range(a.epochs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = model(x, edges)
        F.nll_loss(out[idx["train"]], y[idx["train"]]).backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    model.eval()
    with torch.no_grad():
        pred = model(x, edges).argmax(dim=-1)
    acc = {k: float((pred[v] == y[v]).float().mean()) for k, v in idx.items()}
    result = {"framework": "pyg", "torch": torch.__version__,
              "device": torch.cuda.get_device_name(0), "nodes": int(x.shape[0]),
              "edges_directed": int(edges.shape[1]), "layers": a.layers, "hidden": a.hidden,
              "epochs": a.epochs, "load_s": load_s,
              "epoch_s_median": statistics.median(times[1:] if len(times) > 1 else times),
              "first_epoch_s": times[0], "accuracy": acc,
              "max_memory_gb": torch.cuda.max_memory_allocated() / 1e9}
    try:
        import torch_geometric
        result["pyg"] = torch_geometric.__version__
    except Exception:  # noqa: BLE001 - the version is informational
        pass
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
