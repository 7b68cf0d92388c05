# SPDX-License-Identifier: Apache-2.0
"""Reads a multiclass OGB node-property dataset in its raw layout (DATASET/raw/*.csv.gz,
DATASET/split/NAME/*.csv.gz, flags from meta.json or the ogbn_* defaults) the way OGB's own
read_csv_graph_raw does: pandas.read_csv per file. Runs inside the peers' virtual environment
(numpy, pandas); knows nothing about torch.
"""
import json
import os

import numpy as np
import pandas as pd

# Flags OGB keeps in its master.csv for the folders that carry no meta.json.
OGBN_DEFAULTS = {
    "ogbn_arxiv": {"add_inverse_edge": False, "split": "time"},
    "ogbn_products": {"add_inverse_edge": True, "split": "sales_ranking"},
}


class RawDataset:
    """edge_index: (2, E) int64 as listed (plus reverses when add_inverse_edge);
    x: (N, F) float32; y: (N,) int64 (-1: no label); train/valid/test: int64 node ids."""

    def __init__(self, name, num_nodes, edge_index, x, y, train, valid, test, num_classes):
        self.name = name
        self.num_nodes = num_nodes
        self.edge_index = edge_index
        self.x = x
        self.y = y
        self.train = train
        self.valid = valid
        self.test = test
        self.num_classes = num_classes


def _csv(path, dtype):
    return pd.read_csv(path, compression="gzip", header=None, dtype=dtype).values


def _flags(root):
    meta_path = os.path.join(root, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("task_type", "multiclass classification") != "multiclass classification":
            raise ValueError(f"{meta_path}: task_type {meta['task_type']!r}; the peers "
                             "support multiclass classification only")
        return meta
    name = os.path.basename(os.path.normpath(root))
    if name not in OGBN_DEFAULTS:
        raise ValueError(f"{root}: no meta.json and not a known ogbn_* folder")
    return dict(OGBN_DEFAULTS[name])


def load(root):
    """Loads DATASET; raises ValueError naming the file when something is missing or off."""
    meta = _flags(root)
    raw = os.path.join(root, "raw")
    num_nodes = int(_csv(os.path.join(raw, "num-node-list.csv.gz"), np.int64)[0, 0])
    edges = _csv(os.path.join(raw, "edge.csv.gz"), np.int64).T  # (2, E)
    if meta.get("add_inverse_edge", False):
        edges = np.concatenate([edges, edges[::-1]], axis=1)
    x = _csv(os.path.join(raw, "node-feat.csv.gz"), np.float32)
    labels = pd.read_csv(os.path.join(raw, "node-label.csv.gz"), compression="gzip",
                         header=None).values[:, 0]
    y = np.where(np.isnan(labels.astype(np.float64)), -1, labels).astype(np.int64)
    split_name = meta.get("split")
    split_root = os.path.join(root, "split")
    if split_name is None:
        names = sorted(os.listdir(split_root))
        if len(names) != 1:
            raise ValueError(f"{split_root}: {len(names)} splits and no 'split' in meta.json")
        split_name = names[0]
    split = {}
    for part in ("train", "valid", "test"):
        path = os.path.join(split_root, split_name, f"{part}.csv.gz")
        split[part] = _csv(path, np.int64)[:, 0]
    if x.shape[0] != num_nodes or y.shape[0] != num_nodes:
        raise ValueError(f"{raw}: {x.shape[0]} feature rows and {y.shape[0]} labels for "
                         f"{num_nodes} nodes")
    num_classes = int(meta.get("num_classes", int(y.max()) + 1))
    return RawDataset(meta.get("name", os.path.basename(os.path.normpath(root))), num_nodes,
                      edges, x, y, split["train"], split["valid"], split["test"], num_classes)
