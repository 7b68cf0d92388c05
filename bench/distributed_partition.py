#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Partitioning a Tessera HDF5 file across ranks against serial METIS, then training from it.

Runs, on one dataset file and K ranks: `partition_graph` (one process loads the graph and runs
METIS: today's single-process load-and-partition), `partition_distributed` under Open MPI's
launcher (PT-Scotch, each rank reading only its rows), and `train_gcn --partition-file` on K
MPICH ranks, which build their parts from slices of the file under the plan and train. Prints the
wall time and peak resident memory of each step (the largest rank's for the multi-rank ones, and
for train_gcn also the largest rank's peak when its part was built, read from /proc's VmHWM as
the partition line appears), and the edge cut and halo nodes of both partitions.

Usage: bench/distributed_partition.py --build build --dataset FILE.h5 [--ranks 4]
       [--hidden-channels 256] [--epochs 1] [--work DIR] [--skip-metis]"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from past_2g import measure  # noqa: E402  (GNU time around a command)

OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def descendants(root, name):
    """Pids of the processes named `name` below `root`."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                parent[int(entry)] = int(fields[1])
            except OSError:
                continue
    found = []
    for pid in parent:
        p = pid
        while p in parent and p != root:
            p = parent[p]
        if p == root:
            try:
                with open(f"/proc/{pid}/comm") as comm:
                    if comm.read().strip() == name:
                        found.append(pid)
            except OSError:
                continue
    return found


def high_water_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def train(args, plan, summary):
    """train_gcn under the plan; returns (wall s, largest peak MiB when the parts were built,
    the partition line, the summary)."""
    command = ["/usr/bin/time", "-f", "%e %M", "mpiexec", "-n", str(args.ranks),
               os.path.join(args.build, "apps", "train_gcn"), "--dataset", args.dataset,
               "--partition-file", plan, "--hidden-channels", str(args.hidden_channels),
               "--epochs", str(args.epochs), "--threads", "1", "--summary", summary]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    built_peak, partition_line, lines = None, "", []
    for line in process.stdout:
        lines.append(line)
        if built_peak is None and line.startswith("Partitioned ("):
            partition_line = line.strip()
            built_peak = max(high_water_mib(pid) for pid in descendants(process.pid, "train_gcn"))
    if process.wait() != 0 or built_peak is None:
        sys.exit("train_gcn failed:\n" + "".join(lines[-40:]))
    seconds = float(lines[-1].split()[0])
    with open(summary) as f:
        return seconds, built_peak, partition_line, json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--dataset", required=True, help="a Tessera HDF5 file")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--hidden-channels", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--work", default=None)
    parser.add_argument("--skip-metis", action="store_true", help="no serial METIS run")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="tessera_partition_bench_")
    os.makedirs(work, exist_ok=True)
    k = str(args.ranks)
    rows = []
    if not args.skip_metis:
        store = os.path.join(work, "metis-store")
        shutil.rmtree(store, ignore_errors=True)
        s, mib, out = measure([os.path.join(args.build, "apps", "partition_graph"), "--quiet",
                               "--dataset", args.dataset, "--parts", k, "--node-order", "none",
                               "--out", store])
        shutil.rmtree(store, ignore_errors=True)
        rows.append(("partition_graph (one process: load, METIS, write a store)", s, mib))
        print(out.strip().splitlines()[0] if out.strip() else "", flush=True)
    plan = os.path.join(work, f"ptscotch-{k}.plan.h5")
    if os.path.exists(plan):
        os.remove(plan)
    os.environ.update(OMPI_ENV)
    s, mib, out = measure(["mpiexec.openmpi", "--oversubscribe", "-n", k,
                           os.path.join(args.build, "apps", "partition_distributed"),
                           "--dataset", args.dataset, "--out", plan])
    # The program's own figure: the largest rank's peak (GNU time sees the launcher's tree).
    own = re.search(r"Largest peak resident memory of a rank: (\d+) MiB", out)
    rows.append((f"partition_distributed ({k} ranks: read slices, PT-Scotch, write the plan)",
                 s, int(own.group(1)) if own else mib))
    print(out.strip().splitlines()[0], flush=True)
    summary = os.path.join(work, "summary.json")
    s, built, line, j = train(args, plan, summary)
    print(line, flush=True)
    build = re.search(r"([0-9.]+) s$", line)
    rows.append((f"train_gcn {k} ranks: parts from slices under the plan",
                 j["load_s"] + (float(build.group(1)) if build else 0.0), built))
    rows.append((f"train_gcn {k} ranks: the whole run ({args.epochs} epoch, "
                 f"{args.hidden_channels} hidden, {j['epoch_s_median']:.1f} s an epoch)",
                 s, j["peak_rss_bytes_max"] / 2**20))
    print("\n| step | wall s | peak MiB (largest rank) |\n|---|--:|--:|")
    for name, seconds, peak in rows:
        print(f"| {name} | {seconds:.1f} | {peak:,.0f} |")
    if not args.skip_metis:
        print(f"\nlargest rank's peak while partitioning (PT-Scotch) and building its part, over "
              f"the single process's: {max(rows[1][2], rows[2][2]) / rows[0][2]:.2f}x")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
