#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Plots bench_pipeline's --csv: halo + pipeline bytes per epoch against model depth (log y),
one colour per parallel mode (graph, pipeline, hybrid): measured points and the traffic model's
line (engine/traffic_model.h). A run that failed has no point, only its model value (open
marker). With --accuracy, a second panel: final test accuracy against depth per mode.

Usage: /usr/bin/python3 scripts/plot_pipeline.py PIPELINE.csv OUT.png [--accuracy]
Needs matplotlib (Debian: apt-get install python3-matplotlib). Not part of the build or CI.
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

COLOURS = {"graph": "tab:blue", "pipeline": "tab:orange", "hybrid": "tab:green"}


def number(text):
    return float(text) if text not in ("", None) else None


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_pipeline.py: {path}: no rows")
    for key in ("depth", "mode", "bytes_per_epoch", "model_bytes_per_epoch"):
        if key not in rows[0]:
            sys.exit(f"plot_pipeline.py: {path}: no '{key}' column (bench_pipeline --csv)")
    return rows


def by_mode(rows):
    modes = {}
    for r in rows:
        modes.setdefault(r["mode"], []).append(r)
    for rs in modes.values():
        rs.sort(key=lambda r: int(r["depth"]))
    return modes


def depth_axis(ax, depths):
    ax.set_xscale("log", base=2)
    ax.set_xticks(depths)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("model depth (layers)")


def plot_bytes(ax, modes, depths):
    for mode, rs in modes.items():
        colour = COLOURS.get(mode)
        ax.plot([int(r["depth"]) for r in rs],
                [float(r["model_bytes_per_epoch"]) / 1e6 for r in rs], linestyle="--",
                color=colour, alpha=0.8, label=f"{mode}: model")
        done = [r for r in rs if number(r["bytes_per_epoch"]) is not None]
        if done:
            ax.plot([int(r["depth"]) for r in done],
                    [float(r["bytes_per_epoch"]) / 1e6 for r in done], "o", color=colour,
                    label=f"{mode}: measured")
        failed = [r for r in rs if number(r["bytes_per_epoch"]) is None]
        if failed:
            ax.plot([int(r["depth"]) for r in failed],
                    [float(r["model_bytes_per_epoch"]) / 1e6 for r in failed], "o",
                    markerfacecolor="none", color=colour, label=f"{mode}: not run (failed)")
    ax.set_yscale("log")
    # Labels at 1, 2, 5 x 10^k MB in plain numbers.
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    depth_axis(ax, depths)
    ax.set_ylabel("MB per epoch (halo + pipeline, all ranks)")
    ax.set_title("Traffic per epoch: measured vs model")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")


def plot_accuracy(ax, modes, depths):
    for mode, rs in modes.items():
        done = [r for r in rs if number(r.get("final_test_acc")) is not None]
        if not done:
            continue
        ax.errorbar([int(r["depth"]) for r in done],
                    [100 * float(r["final_test_acc"]) for r in done],
                    yerr=[100 * float(r["final_test_acc_std"] or 0) for r in done], fmt="o-",
                    capsize=3, color=COLOURS.get(mode), label=mode)
    depth_axis(ax, depths)
    ax.set_ylabel("final test accuracy (%)")
    ax.set_title("Accuracy after the same epoch budget")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="bench_pipeline --csv output")
    parser.add_argument("png", help="figure to write")
    parser.add_argument("--accuracy", action="store_true", help="add the accuracy panel")
    args = parser.parse_args(argv[1:])
    rows = read_rows(args.csv)
    modes = by_mode(rows)
    depths = sorted({int(r["depth"]) for r in rows})
    panels = 2 if args.accuracy else 1
    fig, axes = plt.subplots(1, panels, figsize=(7 * panels, 4.5), squeeze=False)
    plot_bytes(axes[0][0], modes, depths)
    if args.accuracy:
        plot_accuracy(axes[0][1], modes, depths)
    fig.tight_layout()
    fig.savefig(args.png, dpi=150)


if __name__ == "__main__":
    main(sys.argv)
