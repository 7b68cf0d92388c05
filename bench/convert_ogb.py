#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Peak memory of an OGB folder into Tessera, in either raw layout: a papers100M-shaped folder in
OGB's binary layout made with NumPy (--layout npz: raw/data.npz with edge_index (2, E) int64 and
node_feat (N, F) float32; raw/node-label.npz; a time split), or a synthetic preset written in the
CSV layout by `tessera_data generate` (--layout csv). Then, each in its own process,
`tessera_data convert` (streaming, --memory-mib) and `tessera_data info` (the whole dataset
loaded into memory, as train_gcn loads it). Prints a table of wall time and peak resident memory
(GNU time's %M; the first row is the program with nothing loaded: its libraries) and checks that
both give one fingerprint; then the converted file loaded whole and one rank's slice of it
(info --rows: a quarter of the rows).

Usage: bench/convert_ogb.py --build build [--layout npz] [--nodes 2000000] [--edges 30000000]
       [--features 128] [--memory-mib 64 256] [--work DIR]
       bench/convert_ogb.py --build build --layout csv [--preset products-like] [--memory-mib 256]"""
import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np


def make_folder(root, nodes, edges, features):
    rng = np.random.default_rng(0)
    raw = os.path.join(root, "raw")
    os.makedirs(raw, exist_ok=True)
    # Skewed sources and destinations (a few hubs), as citation graphs have.
    edge_index = np.minimum((rng.pareto(1.5, (2, edges)) * nodes / 50).astype(np.int64), nodes - 1)
    feat = rng.standard_normal((nodes, features), dtype=np.float32)
    np.savez(os.path.join(raw, "data.npz"), edge_index=edge_index, node_feat=feat,
             num_nodes_list=np.array([nodes]), num_edges_list=np.array([edges]))
    label = rng.integers(0, 172, nodes).astype(np.float64)
    label[rng.random(nodes) < 0.9] = np.nan
    np.savez_compressed(os.path.join(raw, "node-label.npz"), node_label=label.reshape(nodes, 1))
    labelled = rng.permutation(np.flatnonzero(~np.isnan(label)))
    third = len(labelled) // 3
    for name, ids in (("train", labelled[:third]), ("valid", labelled[third:2 * third]),
                      ("test", labelled[2 * third:])):
        path = os.path.join(root, "split", "time", name + ".csv.gz")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with gzip.open(path, "wt", compresslevel=1) as out:
            out.write("\n".join(map(str, ids)) + "\n")


def measure(command):
    """Runs `command` under GNU time; returns (seconds, peak RSS MiB, stdout)."""
    result = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + command, capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stdout}{result.stderr}")
    seconds, kib = result.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kib) / 1024, result.stdout


def fingerprint(text):
    return re.search(r"fingerprint\s+([0-9a-f]{16})", text).group(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--layout", choices=["npz", "csv"], default="npz")
    parser.add_argument("--preset", default="products-like",
                        help="--layout csv: the synthetic preset to write")
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--edges", type=int, default=30_000_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--memory-mib", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--work", default=None, help="folder for the data (default: a temp dir)")
    args = parser.parse_args()
    tool = os.path.join(args.build, "apps", "tessera_data")
    work = args.work or tempfile.mkdtemp(prefix="tessera_convert_bench_")
    try:
        if args.layout == "npz":
            folder = os.path.join(work, "ogbn_papers100M")
            make_folder(folder, args.nodes, args.edges, args.features)
        else:
            folder = os.path.join(work, args.preset)
            if not os.path.isdir(folder):  # a --work folder keeps it for the next run
                subprocess.run([tool, "generate", "--preset", args.preset, "--out", folder],
                               check=True, stdout=subprocess.DEVNULL)
        size = sum(os.path.getsize(os.path.join(folder, "raw", f))
                   for f in os.listdir(os.path.join(folder, "raw"))) / 2**20
        print(f"{folder}: raw/ {size:.0f} MiB\n")
        print("| step | wall s | peak RSS MiB |")
        print("|---|--:|--:|")
        seconds, rss, _ = measure([tool, "--version"])
        print(f"| the program alone (tessera_data --version: libraries) | {seconds:.1f} | {rss:.0f} |")
        seconds, rss, out = measure([tool, "info", "--dataset", folder])
        loaded = fingerprint(out)
        nodes = int(re.search(r"nodes\s+(\d+)", out).group(1))
        print(f"| load into memory (tessera_data info) | {seconds:.1f} | {rss:.0f} |")
        for mib in args.memory_mib:
            target = os.path.join(work, f"converted_{mib}.h5")
            seconds, rss, _ = measure([tool, "convert", "--dataset", folder, "--out", target,
                                       "--memory-mib", str(mib)])
            print(f"| convert, --memory-mib {mib} | {seconds:.1f} | {rss:.0f} |")
            seconds, rss, out = measure([tool, "info", "--dataset", target])
            if fingerprint(out) != loaded:
                sys.exit(f"{target}: fingerprint {fingerprint(out)}, the loaded folder {loaded}")
            if mib == args.memory_mib[0]:
                print(f"| load the converted file whole | {seconds:.1f} | {rss:.0f} |")
                quarter = nodes // 4
                seconds, rss, _ = measure([tool, "info", "--dataset", target, "--rows",
                                           f"{quarter}:{2 * quarter}"])
                print(f"| read one rank's slice of 4 (info --rows) | {seconds:.1f} | {rss:.0f} |")
            os.remove(target)
        print(f"\nfingerprint {loaded}: the converted files equal the folder loaded in memory")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
