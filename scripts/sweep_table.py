#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The results of a sweep (apps/slurm/tessera-sweep.sbatch) as one table: a line per point with
its settings and OGB's figures over its runs (Highest Valid, and Final Test: the test metric at
the epoch of the highest valid, mean ± sample std), the point with the highest Highest Valid
marked. Points that have not finished are listed as such.

    python3 scripts/sweep_table.py SWEEP_FOLDER
"""
import json
import re
import sys
from pathlib import Path


def settings_text(path):
    """The settings file's assignments on one line: "hidden_channels=64 lr=0.01"."""
    pairs = []
    for line in path.read_text().splitlines():
        line = re.sub(r"[#;].*", "", line).strip()
        if "=" in line and not line.startswith("["):
            key, value = (part.strip() for part in line.split("=", 1))
            pairs.append(f"{key}={value.strip(chr(34))}")
    return " ".join(pairs)


def figure(summary, key):
    return "%.2f ± %.2f" % (100 * summary[key], 100 * summary[key + "_std"])


def main(argv):
    if len(argv) != 2 or not Path(argv[1]).is_dir():
        sys.exit("usage: sweep_table.py SWEEP_FOLDER (the TESSERA_WORK of the sweep)")
    tasks = sorted(Path(argv[1]).glob("task-*"), key=lambda p: int(p.name.split("-")[1]))
    if not tasks:
        sys.exit(f"sweep_table.py: no task-<i> folders in {argv[1]}")
    rows, best = [], None
    for folder in tasks:
        settings = folder / "settings.toml"
        text = settings_text(settings) if settings.exists() else "?"
        summary_path = folder / "summary.json"
        if not summary_path.exists():
            rows.append((folder.name, text, "-", "not finished", ""))
            continue
        s = json.loads(summary_path.read_text())
        rows.append((folder.name, text, str(s["runs"]), figure(s, "highest_valid"),
                     figure(s, "final_test")))
        if best is None or s["highest_valid"] > best[1]:
            best = (len(rows) - 1, s["highest_valid"])
    header = ("point", "settings", "runs", "Highest Valid", "Final Test")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for i, row in enumerate(rows):
        mark = "  <- best valid" if best is not None and i == best[0] else ""
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + mark)


if __name__ == "__main__":
    main(sys.argv)
