#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Seed inputs for the raw-layout fuzz target, cut from a real OGB raw-layout dataset.

Writes OUT/cut/<name>-cut/, a small dataset in the raw layout (the first 40 nodes of each split
of the source, the edges among them, the 32 feature columns most often non-zero there), which
scripts/fuzz.sh turns into the other targets' seeds (HDF5 file, part store, checkpoints,
messages), and OUT/raw_dataset/, that folder packed as fuzz_raw_dataset inputs ("=== NAME"
sections; see fuzz_raw_dataset.cc). Standard library only.
"""
import argparse
import csv
import gzip
import io
import json
import os
import sys

NODES_PER_SPLIT = 40
COLUMNS = 32


def read_rows(path):
    with gzip.open(path, "rt", newline="") as f:
        return [row for row in csv.reader(f) if row]


def text_of(rows):
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def cut(source):
    meta = json.load(open(os.path.join(source, "meta.json")))
    split = meta.get("split") or sorted(os.listdir(os.path.join(source, "split")))[0]
    split_dir = os.path.join(source, "split", split)
    keep = []
    for part in ("train", "valid", "test"):
        ids = [int(r[0]) for r in read_rows(os.path.join(split_dir, part + ".csv.gz"))]
        keep.append(ids[:NODES_PER_SPLIT])
    order = sorted({i for ids in keep for i in ids})
    new_id = {old: new for new, old in enumerate(order)}
    raw = os.path.join(source, "raw")
    edges = [(new_id[int(a)], new_id[int(b)])
             for a, b in read_rows(os.path.join(raw, "edge.csv.gz"))
             if int(a) in new_id and int(b) in new_id]
    labels = read_rows(os.path.join(raw, "node-label.csv.gz"))
    features = read_rows(os.path.join(raw, "node-feat.csv.gz"))
    kept_features = [features[i] for i in order]
    counts = [sum(float(row[c]) != 0 for row in kept_features) for c in range(len(features[0]))]
    columns = sorted(sorted(range(len(counts)), key=lambda c: -counts[c])[:COLUMNS])
    files = {
        "raw/num-node-list.csv": text_of([[len(order)]]),
        "raw/num-edge-list.csv": text_of([[len(edges)]]),
        "raw/edge.csv": text_of(edges),
        "raw/node-label.csv": text_of([labels[i] for i in order]),
        "raw/node-feat.csv": text_of([[row[c] for c in columns] for row in kept_features]),
    }
    for part, ids in zip(("train", "valid", "test"), keep):
        files[f"split/{split}/{part}.csv"] = text_of([[new_id[i]] for i in ids])
    small_meta = {k: meta[k] for k in ("num_classes", "num_tasks", "task_type", "eval_metric",
                                        "add_inverse_edge", "has_node_attr", "split") if k in meta}
    small_meta.update(num_nodes=len(order), num_features=len(columns))
    files["meta.json"] = json.dumps(small_meta, indent=1) + "\n"
    return files


def pack(files, gzip_as_given=()):
    out = bytearray()
    for name, text in files.items():
        if name in gzip_as_given:
            out += f"=== {name}.gz\n".encode() + gzip.compress(text.encode(), mtime=0) + b"\n"
        else:
            out += f"=== {name}\n".encode() + text.encode()
    return bytes(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="an OGB raw-layout dataset folder")
    parser.add_argument("--out", required=True, help="corpus root (created)")
    args = parser.parse_args()
    name = os.path.basename(os.path.normpath(args.dataset))
    files = cut(args.dataset)
    folder = os.path.join(args.out, "cut", name + "-cut")
    for rel, text in files.items():
        path = os.path.join(folder, rel + (".gz" if rel.endswith(".csv") else ""))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = text.encode()
        with open(path, "wb") as f:
            f.write(gzip.compress(data, mtime=0) if rel.endswith(".csv") else data)
    corpus = os.path.join(args.out, "raw_dataset")
    os.makedirs(corpus, exist_ok=True)
    seeds = {
        "cut": pack(files),
        "cut-gzip-edges": pack(files, gzip_as_given={"raw/edge.csv"}),
        "cut-gzip-features": pack(files, gzip_as_given={"raw/node-feat.csv"}),
        "cut-no-meta-counts": pack({**files, "meta.json": files["meta.json"].replace(
            '"num_nodes"', '"unused_nodes"')}),
    }
    for seed, data in seeds.items():
        with open(os.path.join(corpus, seed), "wb") as f:
            f.write(data)
    print(f"{folder}: {len(files)} files; {corpus}: {len(seeds)} seeds", file=sys.stderr)


if __name__ == "__main__":
    main()
