#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes, with NumPy, a small dataset in OGB's binary layout — ogbn-papers100M's:
OUT/ogbn_papers100M/raw/data.npz (edge_index (2, E) int64, node_feat (N, F) float32, node_year,
num_nodes_list, num_edges_list), raw/node-label.npz (node_label (N, 1) float64, NaN for nodes
without a label) and split/time/{train,valid,test}.csv.gz — and, unless a defect is asked for,
the same dataset in the CSV layout at OUT/csv (with its flags in a meta.json), for test_ogb_npz.

Usage: make_ogb_npz.py OUT [CASE]. CASE plants one defect in the binary copy (see DEFECTS) or
writes a variant (see VARIANTS)."""
import gzip
import json
import os
import sys

import numpy as np

N, E, F, C = 300, 1500, 12, 172


def arrays():
    rng = np.random.default_rng(7)
    edge_index = np.stack([rng.integers(0, N, E), rng.integers(0, N, E)]).astype(np.int64)
    feat = rng.standard_normal((N, F)).astype(np.float32)
    label = rng.integers(0, 5, N).astype(np.float64)
    label[rng.random(N) < 0.3] = np.nan
    year = rng.integers(1990, 2020, (N, 1)).astype(np.int64)
    order = rng.permutation(np.flatnonzero(~np.isnan(label)))
    split = {"train": order[:100], "valid": order[100:140], "test": order[140:]}
    data = {"edge_index": edge_index, "node_feat": feat, "node_year": year,
            "num_nodes_list": np.array([N], dtype=np.int64),
            "num_edges_list": np.array([E], dtype=np.int64)}
    return data, {"node_label": label.reshape(N, 1)}, split


def write_gz(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt") as out:
        out.write("".join(line + "\n" for line in lines))


def write_split(root, split):
    for name, ids in split.items():
        write_gz(os.path.join(root, "split", "time", name + ".csv.gz"), [str(i) for i in ids])


def label_line(row):
    return ",".join("nan" if np.isnan(v) else str(int(v)) for v in np.atleast_1d(row))


def write_csv(root, data, labels, split, meta):
    raw = os.path.join(root, "raw")
    src, dst = data["edge_index"]
    write_gz(os.path.join(raw, "edge.csv.gz"), [f"{s},{d}" for s, d in zip(src, dst)])
    write_gz(os.path.join(raw, "num-node-list.csv.gz"), [str(N)])
    write_gz(os.path.join(raw, "num-edge-list.csv.gz"), [str(E)])
    write_gz(os.path.join(raw, "node-feat.csv.gz"),
             [",".join(np.format_float_positional(v, unique=True) for v in row)
              for row in data["node_feat"]])
    write_gz(os.path.join(raw, "node-label.csv.gz"),
             [label_line(row) for row in labels["node_label"]])
    write_split(root, split)
    with open(os.path.join(root, "meta.json"), "w") as out:
        json.dump(meta, out)


def several_graphs(data, labels):
    data["num_nodes_list"] = np.array([N - 100, 100])
    data["num_edges_list"] = np.array([E - 10, 10])


def source_out_of_range(data, labels):
    data["edge_index"][0, 17] = N


def negative_destination(data, labels):
    data["edge_index"][1, 3] = -2


def edges_transposed(data, labels):
    data["edge_index"] = np.ascontiguousarray(data["edge_index"].T)


def edges_as_floats(data, labels):
    data["edge_index"] = data["edge_index"].astype(np.float64)


def fortran_order(data, labels):
    data["node_feat"] = np.asfortranarray(data["node_feat"])


def big_endian(data, labels):
    data["edge_index"] = data["edge_index"].astype(">i8")


def feature_rows(data, labels):
    data["node_feat"] = data["node_feat"][:-1]


def no_features(data, labels):
    del data["node_feat"]


def label_out_of_range(data, labels):
    labels["node_label"][5, 0] = C


def label_fraction(data, labels):
    labels["node_label"][8, 0] = 2.5


def structured_labels(data, labels):
    labels["node_label"] = np.zeros(N, dtype=[("a", "<i4"), ("b", "<f4")])


def multilabel(data, labels):
    rng = np.random.default_rng(8)
    targets = rng.integers(0, 2, (N, 3)).astype(np.float32)
    targets[rng.random((N, 3)) < 0.1] = np.nan
    labels["node_label"] = targets
    return {"add_inverse_edge": False, "split": "time", "num_tasks": 3,
            "task_type": "binary classification", "eval_metric": "rocauc", "binary": True}


def inverse(data, labels):
    return {"add_inverse_edge": True, "split": "time", "num_classes": C,
            "task_type": "multiclass classification", "eval_metric": "acc", "binary": True}


# Variants that are not defects: a meta.json beside the binary layout (multi-label targets; the
# inverse edges added).
VARIANTS = {f.__name__: f for f in (multilabel, inverse)}

# CASE -> a change of the arrays; "truncated", "short_data", "not_a_zip" and "corrupt_stored"
# change the written file instead.
DEFECTS = {f.__name__: f for f in (several_graphs, source_out_of_range, negative_destination,
                                   edges_transposed, edges_as_floats, fortran_order, big_endian,
                                   feature_rows, no_features, label_out_of_range, label_fraction,
                                   structured_labels)}


def rewrite_with_short_edges(path, data):
    import io
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in data.items():
            buffer = io.BytesIO()
            if name == "edge_index":
                np.lib.format.write_array_header_1_0(
                    buffer, np.lib.format.header_data_from_array_1_0(array))
                buffer.write(array.tobytes()[: array.nbytes // 2])
            else:
                np.save(buffer, array)
            archive.writestr(name + ".npy", buffer.getvalue())


def flip_byte_of(path, member, at):
    import zipfile
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    with open(path, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_length, extra_length = np.frombuffer(f.read(4), dtype="<u2")
        f.seek(info.header_offset + 30 + int(name_length) + int(extra_length) + at)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x40]))


def main():
    out, case = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "good"
    data, labels, split = arrays()
    meta = None
    if case == "good":
        write_csv(os.path.join(out, "csv"), data, labels, split,
                  {"add_inverse_edge": False, "split": "time", "num_classes": C,
                   "task_type": "multiclass classification", "eval_metric": "acc"})
    elif case in VARIANTS:
        meta = VARIANTS[case](data, labels)
        write_csv(os.path.join(out, "csv"), data, labels, split, meta)
    elif case in DEFECTS:
        DEFECTS[case](data, labels)
    elif case not in ("truncated", "short_data", "not_a_zip", "corrupt_stored"):
        sys.exit(f"make_ogb_npz.py: unknown case {case}")
    root = os.path.join(out, "ogbn_papers100M")
    os.makedirs(os.path.join(root, "raw"), exist_ok=True)
    data_file = os.path.join(root, "raw", "data.npz")
    np.savez_compressed(data_file, **data)
    np.savez_compressed(os.path.join(root, "raw", "node-label.npz"), **labels)
    write_split(root, split)
    if meta is not None:
        with open(os.path.join(root, "meta.json"), "w") as out_file:
            json.dump(meta, out_file)
    if case == "truncated":  # the archive cut in its middle
        size = os.path.getsize(data_file)
        with open(data_file, "r+b") as f:
            f.truncate(size // 2)
    if case == "short_data":  # a valid archive whose edge_index stops halfway through its shape
        rewrite_with_short_edges(data_file, data)
    if case == "corrupt_stored":  # np.savez (members stored), one byte of node_feat's data flipped
        np.savez(data_file, **data)
        flip_byte_of(data_file, "node_feat.npy", 200)
    if case == "not_a_zip":
        with open(data_file, "wb") as f:
            f.write(b"edge_index,node_feat\n1,2\n")


if __name__ == "__main__":
    main()
