#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A graph past 2^31 adjacency entries, end to end as far as this machine goes: an OGB folder in
the binary layout (raw/data.npz written a block at a time, so that NumPy never holds the edge
list; one feature a node; add_inverse_edge, so that the converted file stores both directions),
converted by `tessera_data convert` within --memory-mib, then planned by `train_gcn --plan` with
block parts read from the file (streamed: the planner never loads it either). Prints the wall
time and peak resident memory of each step, the file's counts and the plan's table.

Usage: bench/past_2g.py --build build [--graph uniform|local] [--nodes 33554432]
       [--edges 1100000000] [--work DIR]
       [--memory-mib 1024] [--ranks 4,8,16,32] [--keep]"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np

BLOCK = 1 << 24  # edges generated and written at a time


def npy_header(dtype, shape):
    """The .npy format's version 1.0 header for a C-order array."""
    descr = np.lib.format.dtype_to_descr(np.dtype(dtype))
    text = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    pad = 64 - (10 + len(text) + 1) % 64
    text = text + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")


def edge_block(graph, row, begin, count, nodes, seed):
    """Sources (row 0) or destinations (row 1) of edges [begin, begin + count). uniform: both
    ends drawn uniformly, a destination equal to its source moved to the next node (no self
    loops). local: edge e joins s = e mod N to s + 1 + e div N (mod N), so that every node meets
    the nodes nearest to it in id order (a ring lattice: contiguous id ranges have halos of a few
    nodes, the best case for block parts, as the uniform graph is the worst)."""
    if graph == "local":
        ids = np.arange(begin, begin + count, dtype=np.int64)
        src = ids % nodes
        return src if row == 0 else (src + 1 + ids // nodes) % nodes
    block = begin // BLOCK
    src = np.random.default_rng([seed, 0, block]).integers(0, nodes, count, dtype=np.int64)
    if row == 0:
        return src
    dst = np.random.default_rng([seed, 1, block]).integers(0, nodes, count, dtype=np.int64)
    return np.where(dst == src, (dst + 1) % nodes, dst)


def write_data_npz(path, nodes, edges, seed, graph):
    """raw/data.npz: edge_index (2, E) int64 (sources, then destinations: edge_block),
    node_feat (N, 1) float32, num_nodes_list, num_edges_list."""
    if graph == "local" and edges > nodes * ((nodes - 1) // 2):
        sys.exit(f"--edges {edges}: a local graph of {nodes} nodes holds at most "
                 f"{nodes * ((nodes - 1) // 2)} distinct edges")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        with z.open("edge_index.npy", "w", force_zip64=True) as out:
            out.write(npy_header(np.int64, (2, edges)))
            for row in (0, 1):
                for begin in range(0, edges, BLOCK):
                    count = min(BLOCK, edges - begin)
                    out.write(edge_block(graph, row, begin, count, nodes, seed).tobytes())
        with z.open("node_feat.npy", "w", force_zip64=True) as out:
            out.write(npy_header(np.float32, (nodes, 1)))
            rng = np.random.default_rng([seed, 2])
            for begin in range(0, nodes, BLOCK):
                out.write(rng.standard_normal(min(BLOCK, nodes - begin), dtype=np.float32).tobytes())
        for name, value in (("num_nodes_list", nodes), ("num_edges_list", edges)):
            with z.open(name + ".npy", "w") as out:
                out.write(npy_header(np.int64, (1,)))
                out.write(np.array([value], dtype=np.int64).tobytes())


def make_folder(root, nodes, edges, graph, seed=0):
    raw = os.path.join(root, "raw")
    os.makedirs(raw, exist_ok=True)
    write_data_npz(os.path.join(raw, "data.npz"), nodes, edges, seed, graph)
    rng = np.random.default_rng([seed, 3])
    classes = 16
    label = rng.integers(0, classes, nodes).astype(np.float64)
    np.savez(os.path.join(raw, "node-label.npz"), node_label=label.reshape(nodes, 1))
    order = rng.permutation(nodes)
    tenth = nodes // 10
    for name, ids in (("train", order[:tenth]), ("valid", order[tenth:tenth + tenth // 2]),
                      ("test", order[tenth + tenth // 2:2 * tenth])):
        path = os.path.join(root, "split", "random", name + ".csv.gz")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with gzip.open(path, "wb", compresslevel=1) as out:
            out.write(("\n".join(map(str, np.sort(ids))) + "\n").encode())
    meta = {"name": "past-2g", "add_inverse_edge": True, "split": "random",
            "num_classes": classes, "num_tasks": 1, "task_type": "multiclass classification",
            "eval_metric": "acc"}
    with open(os.path.join(root, "meta.json"), "w") as out:
        json.dump(meta, out)


def measure(command):
    """Runs `command` under GNU time; returns (seconds, peak RSS MiB, stdout + stderr)."""
    result = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + command, capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stdout}{result.stderr[-3000:]}")
    lines = result.stderr.strip().splitlines()
    seconds, kib = lines[-1].split()
    return float(seconds), int(kib) / 1024, result.stdout + "\n".join(lines[:-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--nodes", type=int, default=1 << 25)
    parser.add_argument("--edges", type=int, default=1_100_000_000)
    parser.add_argument("--graph", choices=("uniform", "local"), default="uniform",
                        help="how edges are drawn (edge_block)")
    parser.add_argument("--memory-mib", type=int, default=1024)
    parser.add_argument("--ranks", default="4,8,16,32")
    parser.add_argument("--hidden-channels", type=int, default=16)
    parser.add_argument("--work", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the folder and the file")
    args = parser.parse_args()
    data_tool = os.path.join(args.build, "apps", "tessera_data")
    train = os.path.join(args.build, "apps", "train_gcn")
    work = args.work or tempfile.mkdtemp(prefix="past-2g-")
    folder, h5 = os.path.join(work, "past-2g"), os.path.join(work, "past-2g.h5")
    rows = []
    try:
        if not os.path.exists(os.path.join(folder, "meta.json")):
            start = time.time()
            make_folder(folder, args.nodes, args.edges, args.graph)
            rows.append(("write the folder (NumPy, a block at a time)", time.time() - start, None))
        if not os.path.exists(h5):
            seconds, mib, _ = measure([data_tool, "convert", "--dataset", folder, "--out", h5,
                                       "--memory-mib", str(args.memory_mib)])
            rows.append((f"tessera_data convert --memory-mib {args.memory_mib}", seconds, mib))
        seconds, mib, info = measure([data_tool, "info", "--dataset", h5, "--rows", "0:1"])
        print(info.strip())
        plan_json = os.path.join(work, "plan.json")
        seconds, mib, table = measure([train, "--dataset", h5, "--partition", "block",
                                       "--num-layers", "3", "--hidden-channels",
                                       str(args.hidden_channels), "--plan", "--plan-ranks",
                                       args.ranks, "--plan-json", plan_json])
        rows.append(("train_gcn --plan (block parts, streamed from the file)", seconds, mib))
        print(table.strip())
        plan = json.load(open(plan_json))
        print(f"\nnodes {plan['nodes']}, training-graph entries {plan['entries']} "
              f"(2^31 - 1 = {2**31 - 1}), entries looked up {plan['entries_looked_up']}")
        print("\n| step | wall s | peak RSS MiB |\n|---|--:|--:|")
        for name, seconds, mib in rows:
            print(f"| {name} | {seconds:.1f} | {'' if mib is None else f'{mib:.0f}'} |")
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
