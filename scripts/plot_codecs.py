#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plots bench_codec's --csv: final test accuracy against halo bytes per epoch (log x axis), one
labelled point per codec with ±std error bars and a dashed line at none's accuracy.

Usage: /usr/bin/python3 scripts/plot_codecs.py CODECS.csv OUT.png
Needs matplotlib (Debian: apt-get install python3-matplotlib). Not part of the build or CI.
"""
import csv
import sys

import matplotlib

import matplotlib.ticker  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    with open(argv[1], newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{argv[1]}: no rows")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    placed = []  # x of the points labelled so far: a label near another goes on the left
    for r in rows:
        x = float(r["bytes_per_epoch"]) / 1e6
        y = 100 * float(r["accuracy"])
        err = 100 * float(r["accuracy_std"])
        ax.errorbar(x, y, yerr=err, fmt="o", capsize=4)
        crowded = any(abs(x - p) < 0.05 * x for p in placed)
        placed.append(x)
        ax.annotate(r["codec"], (x, y), textcoords="offset points",
                    xytext=(-6, 6) if crowded else (6, 6), ha="right" if crowded else "left")
    none = [r for r in rows if r["codec"] == "none"]
    if none:
        ax.axhline(100 * float(none[0]["accuracy"]), linestyle="--", color="gray",
                   label="none (f32)")
        ax.legend(loc="lower right")
    ax.set_xscale("log")
    # Ticks at powers of two: the codecs' sizes are halvings of f32.
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("halo MB per epoch (all ranks, forward + backward)")
    ax.set_ylabel("final test accuracy (%)")
    ax.set_title("Message codecs: accuracy vs traffic (mean ± std over runs)")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=150)


if __name__ == "__main__":
    main(sys.argv)
