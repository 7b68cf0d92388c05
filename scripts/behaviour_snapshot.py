#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Behaviour snapshots of a fixed set of train_gcn runs, for changes that must not change results.

  scripts/behaviour_snapshot.py record  --build BUILD --out DIR
  scripts/behaviour_snapshot.py compare --build BUILD --against DIR [--out DIR2]

`record` runs every configuration below with BUILD/apps/train_gcn and keeps its summary and
metrics with the measured values removed (keys ending in _s or containing _s_, peak_rss_bytes*,
the partitioner's seconds, and `threads`), as canonical JSON (sorted keys). `compare` runs them
again and checks that every value the recorded snapshot holds is byte-identical; keys the new
build writes and the old one did not are listed (a summary may gain keys), keys it lost or
changed are differences. Exit status 0 when nothing differs, 1 otherwise.
The runs are deterministic (fixed seeds, counter-based dropout) and take a few minutes on 2
cores; the files depend on the CPU's BLAS kernels, so compare on the machine that recorded.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

QUICK = ["--dataset", "synth:default", "--hidden-channels", "32", "--quiet", "--seed", "1"]
DEEP = ["--model", "resgcn", "--num-layers", "8", "--epochs", "8"]

# name: (ranks, train_gcn arguments)
RUNS = {
    "single": (1, QUICK + ["--epochs", "30", "--runs", "2", "--weight-decay", "5e-4"]),
    "graph_np4": (4, QUICK + ["--epochs", "20", "--weight-decay", "5e-4"]),
    "sage_bn_int8_ef_np2": (2, QUICK + ["--epochs", "15", "--model", "sage", "--batch-norm",
                                        "--codec", "int8", "--error-feedback"]),
    "pipeline_np4": (4, QUICK + DEEP + ["--parallel", "pipeline", "--chunks", "6"]),
    "hybrid_2x2": (4, QUICK + DEEP + ["--parallel", "hybrid", "--stages", "2",
                                      "--codec", "bf16"]),
    "int4_np4": (4, QUICK + ["--epochs", "15", "--codec", "int4"]),
    "adaptive_np4": (4, QUICK + ["--epochs", "15", "--codec", "adaptive", "--replan-every",
                                 "4"]),
}
# Trained with a stop at epoch 6 (SIGUSR1 on rank 1, checkpoint, exit 75), then resumed.
RESUME = (4, QUICK + ["--epochs", "12", "--checkpoint-every", "4"])


def measured(key):
    return (key.startswith("peak_rss_bytes") or key == "seconds" or key == "threads"
            or key == "provenance" or key.endswith("_s") or "_s_" in key)


def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if not measured(k)}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def canonical(value):
    return json.dumps(value, sort_keys=True, indent=1)


def train(build, ranks, args, work, env_extra=None, expect=0):
    exe = os.path.join(build, "apps", "train_gcn")
    command = ([exe] if ranks == 1 else ["mpiexec", "-n", str(ranks), exe]) + args
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", **(env_extra or {}))
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != expect:
        sys.exit(f"{' '.join(command)}: exit {done.returncode}, expected {expect}\n"
                 f"{done.stdout}\n{done.stderr}")


def snapshot(name, work, out):
    with open(os.path.join(work, "summary.json")) as f:
        summary = strip(json.load(f))
    with open(os.path.join(work, "metrics.jsonl")) as f:
        metrics = [strip(json.loads(line)) for line in f if line.strip()]
    with open(os.path.join(out, name + ".json"), "w") as f:
        f.write(canonical({"summary": summary, "metrics": metrics}) + "\n")


def record(build, out):
    os.makedirs(out, exist_ok=True)
    files = ["--metrics", "metrics.jsonl", "--summary", "summary.json"]
    for name, (ranks, args) in RUNS.items():
        work = tempfile.mkdtemp(prefix="snapshot-")
        train(build, ranks, args + files, work)
        snapshot(name, work, out)
        shutil.rmtree(work)
        print(f"recorded {name}")
    work = tempfile.mkdtemp(prefix="snapshot-")
    ranks, args = RESUME
    args = args + files + ["--checkpoint-dir", "ckpt"]
    train(build, ranks, args, work, {"TESSERA_FAULT_INJECT": "1:6:usr1"}, expect=75)
    train(build, ranks, args, work)
    snapshot("checkpoint_resume_np4", work, out)
    shutil.rmtree(work)
    print("recorded checkpoint_resume_np4")


def differences(old, new, path=""):
    """(changed or missing paths, new paths) of `new` against `old`."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed, added = [], []
        for key in old:
            if key not in new:
                changed.append(f"{path}/{key} (missing)")
            else:
                c, a = differences(old[key], new[key], f"{path}/{key}")
                changed += c
                added += a
        added += [f"{path}/{key}" for key in new if key not in old]
        return changed, added
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        changed, added = [], []
        for i, (o, n) in enumerate(zip(old, new)):
            c, a = differences(o, n, f"{path}[{i}]")
            changed += c
            added += a
        return changed, added
    return ([] if canonical(old) == canonical(new) else [path or "/"]), []


def compare(build, against, out):
    out = out or tempfile.mkdtemp(prefix="snapshot-new-")
    record(build, out)
    failed = False
    for name in sorted(os.listdir(against)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(against, name)) as f:
            old = json.load(f)
        with open(os.path.join(out, name)) as f:
            new = json.load(f)
        changed, added = differences(old, new)
        status = "identical" if not changed else f"DIFFERENT at {', '.join(changed[:8])}"
        added = sorted({re.sub(r"\[\d+\]", "[*]", a) for a in added})
        note = f"; new keys: {', '.join(added)}" if added else ""
        print(f"{name[:-5]}: {status}{note}")
        failed |= bool(changed)
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["record", "compare"])
    parser.add_argument("--build", default="build")
    parser.add_argument("--out")
    parser.add_argument("--against")
    a = parser.parse_args()
    build = os.path.abspath(a.build)
    if a.action == "record":
        if not a.out:
            parser.error("record needs --out DIR")
        record(build, os.path.abspath(a.out))
        return 0
    if not a.against:
        parser.error("compare needs --against DIR")
    return compare(build, os.path.abspath(a.against), a.out and os.path.abspath(a.out))


if __name__ == "__main__":
    sys.exit(main())
