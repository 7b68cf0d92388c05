#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Two builds of bench_foundation side by side, in one run: the rounds alternate A, B, A, B, ...
so that both see the same machine load, and each measurement's median over the rounds is
compared as B / A. Used to check that the portable default build (runtime dispatch of the CPU
kernels) keeps the speed of a -march=native build:

    python3 bench/compare_builds.py --a NATIVE/bench_foundation --b build/bench/bench_foundation \\
        --rounds 4 -- --preset arxiv-like --epochs 10

Prints a Markdown table: the training epoch (median_s of "train") and its peak resident memory
(the process's high-water mark, measured before the other benchmarks run), SpMM at each width and
the GEMM shapes; ratio < 1 means B is faster (or smaller). Environment variables pass through (e.g.
LD_LIBRARY_PATH for a build of the shared library elsewhere).
"""
import argparse
import json
import statistics
import subprocess
import sys


PEAK = "training peak RSS"  # bytes; the rest are seconds


def measurements(binary, args):
    """{name: seconds} of one bench_foundation run."""
    out = subprocess.run([binary] + args, check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        if m["bench"] == "train":
            found["training epoch (median)"] = m["median_s"]
            found[PEAK] = m["peak_rss_bytes"]
        elif m["bench"] == "spmm":
            # One line per width, row dtype and node order (older builds: f32, dataset order).
            variant = ""
            if m.get("x_dtype", "f32") != "f32":
                variant += " " + m["x_dtype"] + " x"
            if m.get("order", "dataset") != "dataset":
                variant += ", " + m["order"] + " order"
            found["SpMM%s F=%d" % (variant, m["F"])] = m["median_s"]
        elif m["bench"] == "gemm":
            found["GEMM " + m["what"]] = m["median_s"]
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--a", required=True, help="bench_foundation of build A (the reference)")
    p.add_argument("--b", required=True, help="bench_foundation of build B")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("bench_args", nargs="*", help="arguments for bench_foundation (after --)")
    opts = p.parse_args()
    runs = {"a": [], "b": []}
    for r in range(opts.rounds):
        for key in ("a", "b"):
            runs[key].append(measurements(getattr(opts, key), opts.bench_args))
        print("round %d of %d done" % (r + 1, opts.rounds), file=sys.stderr)
    print("| measurement | A median | B median | B / A |")
    print("|---|---:|---:|---:|")
    for name in runs["a"][0]:
        a = statistics.median(run[name] for run in runs["a"])
        b = statistics.median(run[name] for run in runs["b"])
        scale, unit = (1.0 / (1 << 20), "MiB") if name == PEAK else (1e3, "ms")
        print("| %s | %.1f %s | %.1f %s | %.3f |" % (name, scale * a, unit, scale * b, unit, b / a))
    print("\nA: %s\nB: %s\nrounds: %d, bench_foundation %s" %
          (opts.a, opts.b, opts.rounds, " ".join(opts.bench_args)))


if __name__ == "__main__":
    main()
