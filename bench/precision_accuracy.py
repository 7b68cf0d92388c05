#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The accuracy, speed and memory cost of bf16 rows against f32, in one run: bf16 aggregation
(--aggregate-dtype bf16), features kept in bf16 (--feature-dtype bf16), and both. train_gcn on
Cora with Kipf & Welling's setup and on a synthetic graph with the benchmarks' 3-layer, 256-wide
GCN, each setting with the same seeds. Prints, per graph and setting, the test accuracy after the
last epoch (mean and standard deviation over the seeds), the final training loss, the median
epoch time (training step only; evaluation excluded), its speed relative to f32, and the peak
resident memory of the largest rank.

  python3 bench/precision_accuracy.py [--build build] [--cora ../shared/datasets/cora]
                                      [--synthetic synth:arxiv-like] [--synthetic-epochs 100]
                                      [--cora-runs 5] [--synthetic-runs 2] [--ranks 1]
                                      [--threads 2] [--synthetic-model FLAGS]
                                      [--settings AGG:FEAT,...] [--no-cora]

--synthetic-model replaces the synthetic graph's model flags (default: the 3-layer, 256-wide GCN),
e.g. "--model gcnii --num-layers 16 --hidden-channels 256 --lr 0.01"; --settings picks the
(--aggregate-dtype:--feature-dtype) pairs, f32:f32 first, e.g. f32:f32,bf16:f32.
A missing Cora folder leaves its rows out (said so in the output). --ranks K > 1 runs under
mpiexec with threads split over the ranks.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

KIPF_WELLING = ["--num-layers", "2", "--hidden-channels", "16", "--dropout", "0.5",
                "--input-dropout", "0.5", "--lr", "0.01", "--weight-decay", "5e-4",
                "--normalize-features", "--epochs", "200"]
WIDE_GCN = ["--num-layers", "3", "--hidden-channels", "256", "--dropout", "0.5", "--lr", "0.01"]


# (--aggregate-dtype, --feature-dtype), f32 first: the others are measured against it.
SETTINGS = [("f32", "f32"), ("bf16", "f32"), ("f32", "bf16"), ("bf16", "bf16")]


def train(args, dataset, flags, setting, runs, tmp):
    """One train_gcn run over `runs` seeds; returns its summary and the step times of every
    seed's epochs after its first."""
    summary = os.path.join(tmp, "summary.json")
    metrics = os.path.join(tmp, "metrics.jsonl")
    for path in (summary, metrics):
        if os.path.exists(path):
            os.remove(path)
    cmd = [os.path.join(args.build, "apps", "train_gcn"), "--dataset", dataset,
           "--aggregate-dtype", setting[0], "--feature-dtype", setting[1], "--runs", str(runs), "--quiet", "--summary", summary,
           "--metrics", metrics, "--threads", str(max(1, args.threads // args.ranks))] + flags
    if args.ranks > 1:
        cmd = [args.mpiexec, "-n", str(args.ranks)] + cmd
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    with open(summary) as f:
        result = json.load(f)
    with open(metrics) as f:  # each seed's epochs but its first (which first touches memory)
        steps = [r["epoch_s"] for r in map(json.loads, f) if "epoch_s" in r and r["epoch"] > 1]
    return result, steps


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--cora", default=os.path.join(ROOT, "..", "shared", "datasets", "cora"))
    p.add_argument("--synthetic", default="synth:arxiv-like")
    p.add_argument("--synthetic-epochs", type=int, default=100)
    p.add_argument("--cora-runs", type=int, default=5)
    p.add_argument("--synthetic-runs", type=int, default=2)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--synthetic-model", default=" ".join(WIDE_GCN))
    p.add_argument("--settings", default=",".join(f"{a}:{f}" for a, f in SETTINGS))
    p.add_argument("--no-cora", action="store_true")
    args = p.parse_args()
    settings = [tuple(pair.split(":")) for pair in args.settings.split(",")]
    if settings[0] != ("f32", "f32") or any(
            len(s) != 2 or not set(s) <= {"f32", "bf16"} for s in settings):
        p.error(f"--settings {args.settings}: AGG:FEAT pairs of f32 or bf16, f32:f32 first")

    graphs = []
    if args.no_cora:
        pass
    elif os.path.isdir(args.cora):
        graphs.append(("cora", args.cora, KIPF_WELLING, args.cora_runs))
    else:
        print(f"(no Cora at {args.cora}: its rows are left out)")
    graphs.append((args.synthetic, args.synthetic,
                   args.synthetic_model.split() + ["--epochs", str(args.synthetic_epochs)],
                   args.synthetic_runs))

    print(f"# bf16 rows against f32: {args.ranks} rank(s), {args.threads} thread(s) in all")
    print()
    print("| graph | aggregate | features | seeds | test acc % (last epoch) | final loss | "
          "epoch ms | speed vs f32 | peak RSS MB | RSS vs f32 |")
    print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, dataset, flags, runs in graphs:
            base = None
            for setting in settings:
                result, steps = train(args, dataset, flags, setting, runs, tmp)
                step = statistics.median(steps)
                rss = result["peak_rss_bytes_max"]
                if base is None:
                    base = (step, rss)
                print(f"| {name} | {setting[0]} | {setting[1]} | {runs} | {100 * result['last_test']:.2f} ± "
                      f"{100 * result['last_test_std']:.2f} | {result['final_loss']:.4f} | "
                      f"{1e3 * step:.1f} | {base[0] / step:.2f} | {rss / 1e6:.0f} | "
                      f"{rss / base[1]:.3f} |", flush=True)
    print()
    print("Epoch ms: median training step (forward, backward, Adam) over every seed's epochs "
          "but the first; speed vs f32 = f32 time / this time. Peak RSS of the largest rank, "
          "MB = 10^6 bytes. Same seeds, same splits for every setting.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
