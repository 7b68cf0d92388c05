#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Soak: a long training at K ranks in graph and pipeline mode, and every rank's peak resident
memory over the epochs, from train_gcn's own per-epoch metrics (peak_rss_bytes_per_rank). After
the warm-up (the first tenth of the epochs, at least 5) the peaks must stay flat: any memory that
grows with the epochs (a leak, a buffer kept per epoch, a history that is never trimmed) shows as
growth here. Prints one table per mode and one summary line per mode; with --check, exits 1 when
a mode grows by more than --max-growth after its warm-up.

  python3 bench/soak.py [--build build] [--ranks 4] [--epochs 1000] [--modes graph,pipeline]
                        [--dataset synth:default] [--check] [--max-growth 0.01]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1024.0 * 1024.0


def run_mode(args, mode, folder):
    """Trains once in `mode`; returns (per-epoch records, wall seconds)."""
    metrics = os.path.join(folder, f"{mode}.jsonl")
    command = ["mpiexec", "-n", str(args.ranks), os.path.join(args.build, "apps", "train_gcn"),
               "--dataset", args.dataset, "--parallel", mode, "--epochs", str(args.epochs),
               "--num-layers", str(args.layers), "--hidden-channels", str(args.hidden),
               "--eval-every", str(args.eval_every), "--threads", "1", "--quiet",
               "--metrics", metrics]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"soak: {mode} mode failed (exit {done.returncode}):\n{done.stdout}")
    with open(metrics, encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    if len(records) != args.epochs:
        sys.exit(f"soak: {mode} mode wrote {len(records)} metrics lines, expected {args.epochs}")
    return records, wall


def report(args, mode, records, wall):
    """Prints the mode's table; returns its growth after the warm-up (a fraction)."""
    warm = max(5, args.epochs // 10)
    marks = sorted({1, warm, args.epochs // 4, args.epochs // 2, (3 * args.epochs) // 4,
                    args.epochs} - {0})
    print(f"\n{mode} mode, {args.ranks} ranks, {args.epochs} epochs "
          f"({args.layers} x {args.hidden}, {args.dataset}): peak resident memory per rank, MiB")
    print(f"{'epoch':>7} " + " ".join(f"{'rank ' + str(r):>9}" for r in range(args.ranks)))
    for epoch in marks:
        peaks = records[epoch - 1]["peak_rss_bytes_per_rank"]
        print(f"{epoch:>7} " + " ".join(f"{p / MIB:>9.1f}" for p in peaks))
    growth = 0.0
    for rank in range(args.ranks):
        after_warm = records[warm - 1]["peak_rss_bytes_per_rank"][rank]
        last = records[-1]["peak_rss_bytes_per_rank"][rank]
        growth = max(growth, (last - after_warm) / after_warm)
    step = statistics.median(r["epoch_s"] for r in records[1:]) if len(records) > 1 else 0.0
    print(f"soak {mode}: growth after epoch {warm} {100.0 * growth:.2f}% (largest over ranks); "
          f"median step {1e3 * step:.1f} ms; wall {wall:.1f} s")
    return growth


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--modes", default="graph,pipeline")
    parser.add_argument("--dataset", default="synth:default")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a mode's peak memory grows past --max-growth")
    parser.add_argument("--max-growth", type=float, default=0.01)
    args = parser.parse_args()
    if args.epochs < 10:
        parser.error("--epochs: at least 10 (the warm-up is the first tenth, at least 5)")
    grown = []
    with tempfile.TemporaryDirectory() as folder:
        for mode in args.modes.split(","):
            records, wall = run_mode(args, mode, folder)
            if report(args, mode, records, wall) > args.max_growth:
                grown.append(mode)
    if args.check and grown:
        sys.exit(f"soak: peak memory grew by more than {100.0 * args.max_growth:.1f}% after the "
                 f"warm-up in: {', '.join(grown)}")


if __name__ == "__main__":
    main()
