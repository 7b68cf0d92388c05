#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Soak: a long training at K ranks in graph and pipeline mode, and every rank's resident memory
over the epochs: the current resident set (VmRSS) of every rank's process, sampled from /proc
while it trains and placed on the epoch its metrics file had reached, and the peak so far from
train_gcn's own per-epoch metrics (peak_rss_bytes_per_rank). After the warm-up (the first tenth
of the epochs, at least 5) the resident memory must stay flat: memory that grows with the epochs
(a leak, a buffer kept per epoch, a history that is never trimmed) raises the median of the last
tenth above that of the tenth after the warm-up. The peak is the largest of all samples, so it
also records the rare epoch at which a rank held the most at once (a delayed rank receiving its
peers' messages before it can consume them); it is shown, not judged. Prints one table per mode
and one summary line per mode; with --check, exits 1 when a mode grows by more than
--max-growth after its warm-up.

  python3 bench/soak.py [--build build] [--ranks 4] [--epochs 1000] [--modes graph,pipeline]
                        [--dataset synth:default] [--check] [--max-growth 0.01]
"""
import argparse
import glob
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


def rank_processes(metrics):
    """{rank: pid} of the train_gcn processes writing `metrics` (MPICH's PMI_RANK)."""
    ranks = {}
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        folder = os.path.dirname(cmdline)
        try:
            with open(cmdline, "rb") as f:
                argv = f.read().split(b"\0")
            if not argv[0].endswith(b"train_gcn") or metrics.encode() not in argv:
                continue
            with open(os.path.join(folder, "environ"), "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
            ranks[int(env.get(b"PMI_RANK", b"0"))] = int(os.path.basename(folder))
        except (OSError, ValueError):
            continue  # a process that ended or is not ours
    return ranks


def resident_bytes(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def epochs_done(metrics):
    try:
        with open(metrics, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


def run_mode(args, mode, folder):
    """Trains once in `mode`; returns (per-epoch records, wall seconds, samples): samples are
    (epoch, rank, resident bytes) taken every --sample-s seconds while it trains."""
    metrics = os.path.join(folder, f"{mode}.jsonl")
    command = ["mpiexec", "-n", str(args.ranks), os.path.join(args.build, "apps", "train_gcn"),
               "--dataset", args.dataset, "--parallel", mode, "--epochs", str(args.epochs),
               "--num-layers", str(args.layers), "--hidden-channels", str(args.hidden),
               "--eval-every", str(args.eval_every), "--threads", "1", "--quiet",
               "--metrics", metrics]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    start = time.perf_counter()
    samples = []
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as process:
        pids = {}
        while process.poll() is None:
            time.sleep(args.sample_s)
            if len(pids) < args.ranks:
                pids = rank_processes(metrics)
            epoch = epochs_done(metrics)
            for rank, pid in pids.items():
                rss = resident_bytes(pid)
                if rss is not None and 0 < epoch < args.epochs:
                    samples.append((epoch, rank, rss))
        output = process.stdout.read()
    wall = time.perf_counter() - start
    if process.returncode != 0:
        sys.exit(f"soak: {mode} mode failed (exit {process.returncode}):\n{output}")
    with open(metrics, encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    if len(records) != args.epochs:
        sys.exit(f"soak: {mode} mode wrote {len(records)} metrics lines, expected {args.epochs}")
    return records, wall, samples


def window_median(samples, rank, first, last):
    """Median resident bytes of `rank` over the samples at epochs [first, last], or None."""
    values = [rss for epoch, r, rss in samples if r == rank and first <= epoch <= last]
    return statistics.median(values) if values else None


def report(args, mode, records, wall, samples):
    """Prints the mode's table; returns its growth after the warm-up (a fraction)."""
    warm = max(5, args.epochs // 10)
    tenth = max(1, args.epochs // 10)
    marks = sorted({1, warm, args.epochs // 4, args.epochs // 2, (3 * args.epochs) // 4,
                    args.epochs} - {0})
    print(f"\n{mode} mode, {args.ranks} ranks, {args.epochs} epochs "
          f"({args.layers} x {args.hidden}, {args.dataset}): resident memory per rank, MiB "
          f"(median of the samples of the tenth of the epochs ending at the mark / peak so far)")
    print(f"{'epoch':>7} " + " ".join(f"{'rank ' + str(r):>15}" for r in range(args.ranks)))
    for epoch in marks:
        peaks = records[epoch - 1]["peak_rss_bytes_per_rank"]
        cells = []
        for rank in range(args.ranks):
            now = window_median(samples, rank, max(1, epoch - tenth), epoch)
            cells.append(f"{'-' if now is None else f'{now / MIB:.1f}':>7}/"
                         f"{peaks[rank] / MIB:<7.1f}")
        print(f"{epoch:>7} " + " ".join(cells))
    growth, peak_growth = 0.0, 0.0
    for rank in range(args.ranks):
        after_warm = window_median(samples, rank, warm, warm + tenth)
        last = window_median(samples, rank, args.epochs - tenth, args.epochs)
        if after_warm is None or last is None:
            sys.exit(f"soak: too few memory samples of rank {rank} ({len(samples)} in all); "
                     f"train longer or sample more often (--sample-s)")
        growth = max(growth, (last - after_warm) / after_warm)
        peak_warm = records[warm - 1]["peak_rss_bytes_per_rank"][rank]
        peak_growth = max(peak_growth,
                          (records[-1]["peak_rss_bytes_per_rank"][rank] - peak_warm) / peak_warm)
    step = statistics.median(r["epoch_s"] for r in records[1:]) if len(records) > 1 else 0.0
    print(f"soak {mode}: resident memory growth after epoch {warm} {100.0 * growth:.2f}% "
          f"(largest over ranks; peak {100.0 * peak_growth:.2f}%); {len(samples)} samples; "
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
    parser.add_argument("--sample-s", type=float, default=0.1,
                        help="seconds between two samples of every rank's resident memory")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a mode's resident memory grows past --max-growth")
    parser.add_argument("--max-growth", type=float, default=0.01)
    args = parser.parse_args()
    if args.epochs < 10:
        parser.error("--epochs: at least 10 (the warm-up is the first tenth, at least 5)")
    grown = []
    with tempfile.TemporaryDirectory() as folder:
        for mode in args.modes.split(","):
            records, wall, samples = run_mode(args, mode, folder)
            if report(args, mode, records, wall, samples) > args.max_growth:
                grown.append(mode)
    if args.check and grown:
        sys.exit(f"soak: resident memory grew by more than {100.0 * args.max_growth:.1f}% after the "
                 f"warm-up in: {', '.join(grown)}")


if __name__ == "__main__":
    main()
