#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The pre-flight planner against measurements: for each configuration, `train_gcn --plan` (one
process, before any training) and then the training itself (`mpiexec -n K train_gcn --epochs E
--summary`), and a table of the predicted and measured peak memory of the largest rank (and of
every rank) and bytes per epoch (summed over the ranks, all categories), with the errors.
Bars: memory within 15%, bytes within 5% (docs/planner.md).

Usage: bench/plan_validation.py --build build [--epochs 3] [--only NAME ...] [--work DIR]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# name, ranks, flags (after --dataset), partition store (made by partition_graph first); a
# dataset "h5:PRESET" is the preset written as a Tessera HDF5 file first (tessera_data generate)
CONFIGS = [
    ("default, 1 rank, gcn", 1, ["--dataset", "synth:default"], False),
    ("default, 4 ranks, gcn", 4, ["--dataset", "synth:default"], False),
    ("arxiv-like, 1 rank, gcn", 1, ["--dataset", "synth:arxiv-like"], False),
    ("arxiv-like, 2 ranks, gcn", 2, ["--dataset", "synth:arxiv-like"], False),
    ("arxiv-like, 4 ranks, gcn", 4, ["--dataset", "synth:arxiv-like"], False),
    ("arxiv-like, 4 ranks, gcn, int8", 4, ["--dataset", "synth:arxiv-like", "--codec", "int8"],
     False),
    ("arxiv-like, 4 ranks, sage, bf16", 4,
     ["--dataset", "synth:arxiv-like", "--model", "sage", "--codec", "bf16"], False),
    ("arxiv-like, 1 rank, gcn, bf16 aggregation and features", 1,
     ["--dataset", "synth:arxiv-like", "--aggregate-dtype", "bf16", "--feature-dtype", "bf16"],
     False),
    ("arxiv-like, 4 ranks, gcn, bf16 aggregation", 4,
     ["--dataset", "synth:arxiv-like", "--aggregate-dtype", "bf16"], False),
    ("arxiv-like, 4 ranks, gcn, store", 4, ["--dataset", "synth:arxiv-like"], True),
    ("arxiv-like, 4 ranks, gat, 2 layers", 4,
     ["--dataset", "synth:arxiv-like", "--model", "gat", "--num-layers", "2", "--hidden-channels",
      "32", "--heads", "4"], False),
    ("arxiv-like, 4 ranks, gcn, 4 layers, pipeline", 4,
     ["--dataset", "synth:arxiv-like", "--num-layers", "4", "--parallel", "pipeline"], False),
    ("arxiv-like, 4 ranks, gcn, hybrid 2 x 2", 4,
     ["--dataset", "synth:arxiv-like", "--parallel", "hybrid", "--stages", "2"], False),
    ("arxiv-like, 4 ranks, gcn, block parts read from HDF5", 4,
     ["--dataset", "h5:arxiv-like", "--partition", "block"], False),
    ("products-like, 4 ranks, gcn, hidden 128, store", 4,
     ["--dataset", "synth:products-like", "--hidden-channels", "128"], True),
]


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    train = os.path.join(args.build, "apps", "train_gcn")
    partition = os.path.join(args.build, "apps", "partition_graph")
    data_tool = os.path.join(args.build, "apps", "tessera_data")
    work = args.work or tempfile.mkdtemp(prefix="plan-validation-")
    os.makedirs(work, exist_ok=True)
    rows = []
    print("| configuration | peak MiB predicted | measured | error | per rank (predicted / measured "
          "MiB) | MB an epoch predicted | measured | error |")
    print("|---|---|---|---|---|---|---|---|")
    for i, (name, ranks, flags, store) in enumerate(CONFIGS):
        if args.only and not any(o in name for o in args.only):
            continue
        flags = list(flags)
        if flags[1].startswith("h5:"):
            preset = flags[1][3:]
            flags[1] = os.path.join(work, f"{preset}.h5")
            if not os.path.exists(flags[1]):
                run([data_tool, "generate", "--preset", preset, "--out", flags[1]])
        if store:
            directory = os.path.join(work, f"store{i}")
            if not os.path.isdir(directory):
                run([partition, "--dataset", flags[1], "--parts", str(ranks), "--out", directory])
            flags = ["--partitions", directory, *flags[2:]]  # the store names the dataset
        plan_json = os.path.join(work, f"plan{i}.json")
        summary = os.path.join(work, f"summary{i}.json")
        run([train, *flags, "--plan", "--plan-ranks", str(ranks), "--plan-json", plan_json])
        run(["mpiexec", "-n", str(ranks), train, *flags, "--epochs", str(args.epochs),
             "--summary", summary])
        plan = json.load(open(plan_json))["rows"][0]
        measured = json.load(open(summary))
        predicted_peak = plan["peak_bytes_max"] / 2**20
        measured_peak = measured["peak_rss_bytes_max"] / 2**20
        per_rank = ", ".join(
            f"{p / 2**20:.0f}/{m / 2**20:.0f}"
            for p, m in zip(plan["peak_bytes_per_rank"], measured["peak_rss_bytes_per_rank"]))
        predicted_bytes = plan["bytes_per_epoch"] / 1e6
        measured_bytes = sum(v for k, v in measured["comm_bytes_per_epoch"].items()
                             if k != "setup") / 1e6
        memory_error = predicted_peak / measured_peak - 1.0
        bytes_error = (predicted_bytes / measured_bytes - 1.0) if measured_bytes > 0 else 0.0
        rows.append((name, memory_error, bytes_error))
        print(f"| {name} | {predicted_peak:.0f} | {measured_peak:.0f} | {100 * memory_error:+.1f}% "
              f"| {per_rank} | {predicted_bytes:.2f} | {measured_bytes:.2f} | "
              f"{100 * bytes_error:+.2f}% |", flush=True)
    within = sum(1 for _, m, b in rows if abs(m) <= 0.15 and abs(b) <= 0.05)
    print(f"\n{within} of {len(rows)} configurations within the bars (memory 15%, bytes 5%).")


if __name__ == "__main__":
    main()
