#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Draws PNG figures from train_gcn's output files and the peer benchmark's results, by kind:

  METRICS.jsonl (--metrics)   loss.png, accuracy.png: loss and train/valid/test accuracy per
                              epoch (one curve per file and run)
  SUMMARY.json (--summary)    epoch_time.png, bytes_per_epoch.png: per-epoch time (and its
                              communication part) and bytes sent per epoch by category, one bar
                              per summary labelled mode/codec/ranks; partition.png: the per-part
                              counts of every summary that has a partition
  results.json (run_peers.py) peers_epoch_time.png, peers_time_to_accuracy.png

Usage: scripts/plot.py FILE... [-o DIR]
Needs matplotlib (Debian: apt-get install python3-matplotlib; scripts/setup.sh installs it).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CATEGORIES = ["halo_forward", "halo_backward", "pipeline", "all_reduce"]
SPLITS = [("train_acc", "train"), ("valid_acc", "valid"), ("test_acc", "test")]
DPI = 120


def read_jsonl(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows or "epoch" not in rows[0]:
        sys.exit(f"plot.py: {path}: expected JSON lines with an 'epoch' key (train_gcn --metrics)")
    return rows


def read_json(path):
    with open(path) as f:
        return json.load(f)


def stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def save(fig, out_dir, name):
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(path)
    return path


def runs_of(rows):
    by_run = {}
    for r in rows:
        by_run.setdefault(r.get("run", 0), []).append(r)
    return by_run


def plot_metrics(files, out_dir):
    """files: [(label, rows)]. Loss on a log axis; accuracies where evaluated."""
    written = []
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, rows in files:
        for run, rs in runs_of(rows).items():
            name = label if len(runs_of(rows)) == 1 else f"{label} run {run}"
            ax.plot([r["epoch"] for r in rs], [r["loss"] for r in rs], label=name)
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (log scale)")
    ax.set_title("Training loss")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    written.append(save(fig, out_dir, "loss.png"))

    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = {"train": ":", "valid": "-", "test": "--"}
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    curve = 0
    for label, rows in files:
        for run, rs in runs_of(rows).items():
            name = label if len(runs_of(rows)) == 1 else f"{label} run {run}"
            colour = colours[curve % len(colours)]
            curve += 1
            for key, split in SPLITS:
                pts = [(r["epoch"], 100 * r[key]) for r in rs if r.get(key) is not None]
                if pts:
                    ax.plot(*zip(*pts), styles[split], color=colour, label=f"{name} {split}")
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{files[0][1][0].get('metric', 'acc')} (%)")
    ax.set_title("Accuracy (train dotted, valid solid, test dashed)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", ncol=2 if curve > 1 else 1)
    written.append(save(fig, out_dir, "accuracy.png"))
    return written


def summary_label(s, path, seen):
    ranks = s.get("ranks", 1)
    mode = s.get("parallel", "single")
    codec = s.get("codec", "none")
    method = s.get("partition", {}).get("method", "none")
    label = f"{mode}/{codec}/K={ranks}" + (f"/{method}" if method not in ("none", "metis") else "")
    if label in seen:
        label = f"{label} ({stem(path)})"
    seen.add(label)
    return label


def plot_summaries(files, out_dir):
    """files: [(path, summary)]. Bars per summary: epoch time with its communication part, and
    bytes per epoch stacked by category (sent; raw, before the codec, as an outline)."""
    written = []
    seen = set()
    files = sorted(files, key=lambda f: (f[1].get("ranks", 1), f[1].get("parallel", ""),
                                         f[1].get("codec", "")))
    labels = [summary_label(s, p, seen) for p, s in files]
    x = range(len(files))
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(files) + 2), 4.2))
    epoch_ms = [1e3 * s.get("epoch_s_median", 0.0) for _, s in files]
    comm_ms = [1e3 * min(s.get("comm_s", 0.0), s.get("epoch_s_median", 0.0)) for _, s in files]
    ax.bar(x, epoch_ms, color="tab:blue", label="epoch (median)")
    ax.bar(x, comm_ms, color="tab:orange", label="of which communication")
    for i, v in enumerate(epoch_ms):
        ax.annotate(f"{v:.0f}", (i, v), ha="center", va="bottom", fontsize="small")
    ax.set_xticks(list(x), labels, rotation=20, ha="right")
    ax.set_ylim(top=1.3 * max(epoch_ms + [1e-9]))  # room for the labels and the legend
    ax.set_ylabel("ms per training epoch")
    ax.set_title("Epoch time by mode / codec / ranks")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    written.append(save(fig, out_dir, "epoch_time.png"))

    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(files) + 2), 4.2))
    bottom = [0.0] * len(files)
    for c in CATEGORIES:
        vals = [s.get("comm_bytes_per_epoch", {}).get(c, 0) / 1e6 for _, s in files]
        if any(vals):
            ax.bar(x, vals, bottom=bottom, label=c.replace("_", " "))
            bottom = [b + v for b, v in zip(bottom, vals)]
    raw = [sum(s.get("comm_bytes_per_epoch_raw", {}).get(c, 0) for c in CATEGORIES) / 1e6
           for _, s in files]
    ax.bar(x, raw, fill=False, edgecolor="black", linestyle="--", label="before encoding")
    ax.set_xticks(list(x), labels, rotation=20, ha="right")
    ax.set_ylim(top=1.3 * max(raw + bottom + [1e-9]))
    ax.set_ylabel("MB sent per epoch (all ranks)")
    ax.set_title("Communication per epoch by category")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    written.append(save(fig, out_dir, "bytes_per_epoch.png"))

    parted = [(lab, s["partition"]) for lab, (_, s) in zip(labels, files)
              if any(k.endswith("_per_part") for k in s.get("partition", {}))]
    if parted:
        fig, axes = plt.subplots(1, len(parted), figsize=(max(5, 4.5 * len(parted)), 4.2),
                                 squeeze=False)
        for ax, (lab, part) in zip(axes[0], parted):
            first = ["owned_nodes_per_part", "halo_nodes_per_part"]
            keys = [k for k in first if k in part] + sorted(
                k for k in part if k.endswith("_per_part") and k not in first)
            k_parts = len(part[keys[0]])
            width = 0.8 / len(keys)
            for j, key in enumerate(keys):
                ax.bar([i + (j - (len(keys) - 1) / 2) * width for i in range(k_parts)],
                       part[key], width, label=key[:-len("_per_part")].replace("_", " "))
            ax.set_xticks(range(k_parts), [str(i) for i in range(k_parts)])
            ax.set_xlabel("part")
            ax.set_ylabel("nodes")
            ax.set_title(f"{lab}\nedge cut {part.get('edge_cut', '?'):,}, "
                         f"imbalance {part.get('imbalance', float('nan')):.3f}",
                         fontsize="medium")
            ax.set_ylim(top=1.25 * max(max(part[k]) for k in keys))
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize="small", loc="upper right")
        written.append(save(fig, out_dir, "partition.png"))
    return written


def elapsed_curve(run):
    """(seconds since process start, valid accuracy %) at each evaluation, as run_peers.py
    defines time to accuracy: the wall time less the epochs that came after."""
    epoch_s, eval_s, valid = run["epoch_s_list"], run["eval_s_list"], run["valid_curve"]
    after = sum(epoch_s) + sum(eval_s)
    pts = []
    for e, v, s in zip(epoch_s, valid, eval_s):
        after -= e + s
        if v is not None:
            pts.append((run["wall_s"] - after, 100 * v))
    return pts


def plot_peers(results, out_dir):
    written = []
    table = results["table"]
    datasets = list(table)
    fig, axes = plt.subplots(2, len(datasets), figsize=(5.5 * len(datasets), 7), squeeze=False)
    for col, dataset in enumerate(datasets):
        every = [r for r in table[dataset].values() if "unavailable" not in r]
        for row_i, (key, scale, unit) in enumerate([("epoch_s", 1e3, "ms per full-graph epoch"),
                                                    ("peak_rss_bytes", 1e-6, "peak RSS MB")]):
            # A mini-batch epoch is another unit of work: left out of the epoch-time panel.
            rows = [r for r in every
                    if key != "epoch_s" or not r["system"].startswith("pyg-sage-minibatch")]
            names = [r["system"] for r in rows]
            colours = ["tab:blue" if n.startswith("tessera") else "tab:gray" for n in names]
            ax = axes[row_i][col]
            vals = [r[key] * scale for r in rows]
            ax.bar(range(len(rows)), vals, color=colours)
            for i, v in enumerate(vals):
                ax.annotate(f"{v:,.0f}", (i, v), ha="center", va="bottom", fontsize="small")
            ax.set_xticks(range(len(rows)), names, rotation=25, ha="right")
            ax.set_ylabel(unit)
            ax.set_title(f"{dataset}: {unit}")
            ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"Tessera (blue) and peers, {results.get('date', '')}, "
                 f"{results.get('settings', {}).get('threads', '?')} threads each")
    written.append(save(fig, out_dir, "peers_epoch_time.png"))

    for tta in results.get("time_to_accuracy", []):
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        seen = set()
        settings = list(dict.fromkeys(r["system"] for r in results["runs"]
                                      if r["system"].startswith("pyg-sage-minibatch ")))
        for run in results["runs"]:
            if run["dataset"] != tta["dataset"]:
                continue
            pts = elapsed_curve(run)
            label = run["system"] if run["system"] not in seen else None
            seen.add(run["system"])
            style = "o-" if run["system"].startswith("tessera") else "s--"
            ax.plot(*zip(*pts), style, markersize=3, label=label,
                    color=_colour_of(run["system"], settings))
        ax.axhline(100 * tta["target_valid_acc"], color="black", linewidth=0.8, linestyle=":",
                   label=f"target {100 * tta['target_valid_acc']:.2f}%")
        ax.set_xscale("log")
        ax.set_xlabel("seconds since process start, log scale (loading and partitioning "
                      "included)")
        ax.set_ylabel("validation accuracy (%)")
        ax.set_title(f"Time to accuracy on {tta['dataset']} (every repetition)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        low = 100 * tta["target_valid_acc"] - 15
        ax.set_ylim(bottom=max(0, low))
        written.append(save(fig, out_dir, "peers_time_to_accuracy.png"))
    return written


def _colour_of(system, settings=()):
    palette = {"tessera-1": "tab:blue", "tessera-2": "tab:cyan", "pyg-gcn": "tab:orange",
               "pyg-gcn-edge-index": "tab:brown", "dgl-gcn": "tab:green",
               "pyg-sage-minibatch": "tab:red"}
    if system.startswith("pyg-sage-minibatch "):  # the k-th setting of the sweep
        sweep = ["tab:red", "tab:purple", "tab:pink", "tab:olive", "darkred", "salmon"]
        return sweep[settings.index(system) % len(sweep)]
    return palette.get(system, "tab:gray")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--out", default=".", help="folder for the PNG files (made if needed)")
    args = p.parse_args(argv)
    metrics, summaries, peers = [], [], []
    for path in args.files:
        if not os.path.exists(path):
            sys.exit(f"plot.py: {path}: no such file")
        if path.endswith(".jsonl"):
            metrics.append((stem(path), read_jsonl(path)))
            continue
        data = read_json(path)
        if "table" in data and "runs" in data:
            peers.append(data)
        elif "epoch_s_median" in data:
            summaries.append((path, data))
        else:
            sys.exit(f"plot.py: {path}: neither a train_gcn summary (no 'epoch_s_median') nor "
                     "run_peers.py results (no 'table')")
    os.makedirs(args.out, exist_ok=True)
    if metrics:
        plot_metrics(metrics, args.out)
    if summaries:
        plot_summaries(summaries, args.out)
    for results in peers:
        plot_peers(results, args.out)


if __name__ == "__main__":
    main(sys.argv[1:])
