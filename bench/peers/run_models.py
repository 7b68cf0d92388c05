#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Benchmarks Tessera's GAT and GCNII against PyTorch Geometric's GATConv and GCN2Conv on this
machine, in one run: the same raw-layout datasets, hyperparameters, seeds, epochs and thread
count; tessera-1 (one process), tessera-2 (mpiexec -n 2, the threads split between the ranks)
and the PyG peer (peer_models.py). Repetitions rotate the order of the systems. The load
average is recorded before and after every case. Writes results.json and results.md to --out.

Needs what run_peers.py needs for its first step only (torch and torch-geometric in --venv; no
torch-sparse, no DGL): run_peers.py makes that environment, or
`python3 -m venv VENV && VENV/bin/pip install -r bench/peers/requirements.txt`.
Standard library only.

  bench/peers/run_models.py --build build            # the full run, about 15 minutes
  bench/peers/run_models.py --quick                  # a few minutes
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import report  # noqa: E402
import run_peers  # noqa: E402

SYSTEMS = [report.TESSERA_1, report.TESSERA_2, "pyg"]
GAT_PAPER = ["--model", "gat", "--num-layers", "2", "--hidden-channels", "64", "--heads", "8",
             "--output-heads", "1", "--dropout", "0.6", "--input-dropout", "0.6",
             "--attention-dropout", "0.6", "--lr", "0.005", "--weight-decay", "5e-4",
             "--normalize-features"]
GCNII_PAPER = ["--model", "gcnii", "--num-layers", "66", "--hidden-channels", "64",
               "--gcnii-alpha", "0.1", "--gcnii-lambda", "0.5", "--dropout", "0.6",
               "--input-dropout", "0.6", "--lr", "0.01", "--weight-decay", "0.01",
               "--dense-weight-decay", "5e-4", "--normalize-features"]
ARXIV_GAT = ["--model", "gat", "--num-layers", "3", "--hidden-channels", "64", "--heads", "8",
             "--output-heads", "1", "--dropout", "0.5", "--lr", "0.01"]
ARXIV_GCNII = ["--model", "gcnii", "--num-layers", "10", "--hidden-channels", "64",
               "--gcnii-alpha", "0.1", "--gcnii-lambda", "0.5", "--dropout", "0.5", "--lr", "0.01"]


def case(dataset, epochs, quick_epochs, flags, eval_every=1, warmup=5, reps=None):
    """A benchmark case: both trainers take `flags`; `warmup` epochs are left out of the epoch
    median; `reps`: at most that many repetitions (None: --reps)."""
    return {"dataset": dataset, "epochs": epochs, "quick_epochs": quick_epochs, "flags": flags,
            "eval_every": eval_every, "warmup": warmup, "reps": reps}


# On arxiv-like an epoch of the PyG peer takes tens of seconds on 2 cores (every edge's message
# is materialised), so those cases run 4 epochs, evaluated once, in the first repetition only.
CASES = {
    "gat-cora": case("cora", 200, 40, GAT_PAPER),
    "gcnii-cora": case("cora", 100, 20, GCNII_PAPER),
    "gat-arxiv-like": case("arxiv-like", 4, 3, ARXIV_GAT, eval_every=4, warmup=1, reps=1),
    "gcnii-arxiv-like": case("arxiv-like", 4, 3, ARXIV_GCNII, eval_every=4, warmup=1, reps=1),
}


def parse_flags(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--build", default=os.path.join(run_peers.REPO, "build"),
                   help="a build with apps/train_gcn and apps/tessera_data (a copy of one: "
                        "set LD_LIBRARY_PATH to its api/ so that the copy's library loads)")
    p.add_argument("--cora", default=os.path.join(run_peers.REPO, "..", "shared", "datasets",
                                                  "cora"))
    p.add_argument("--work", default=os.path.join(run_peers.CACHE, "work"),
                   help="datasets and per-run files (runs-models/ here)")
    p.add_argument("--venv", default=os.path.join(run_peers.CACHE, "venv"))
    p.add_argument("--out", default="models-results", help="results.json and results.md")
    p.add_argument("--cases", default=",".join(CASES), help=f"some of {', '.join(CASES)}")
    p.add_argument("--threads", type=int, default=2, help="threads per system (tessera-2: "
                                                          "half per rank)")
    p.add_argument("--reps", type=int, default=2, help="repetitions; rep r uses seed r")
    p.add_argument("--quick", action="store_true", help="1 repetition, fewer epochs")
    p.add_argument("--max-load", type=float, default=1.0,
                   help="wait before each case while the 1-minute load average is above this")
    p.add_argument("--max-wait", type=float, default=600, help="seconds to wait for it at most")
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--report-only", action="store_true",
                   help="the tables again from --work/runs-models/manifest.json")
    args = p.parse_args(argv)
    args.cases = [c for c in args.cases.split(",") if c]
    for c in args.cases:
        if c not in CASES:
            p.error(f"--cases: unknown case {c!r} (expected some of {', '.join(CASES)})")
    if args.threads < 2:
        p.error("--threads: tessera-2 needs at least 2 (one per rank)")
    if args.quick:
        args.reps = 1
    args.datasets = sorted({CASES[c]["dataset"] for c in args.cases})  # for run_peers.datasets
    args.runs = os.path.join(args.work, "runs-models")
    return args


def command(args, system, settings, path, seed, stem):
    """One run's command line: both trainers take the same model flags and files."""
    common = settings["flags"] + ["--dataset", path, "--epochs", str(settings["epochs"]),
                                  "--seed", str(seed), "--eval-every",
                                  str(settings["eval_every"]), "--metrics", stem + ".jsonl",
                                  "--summary", stem + ".json"]
    train_gcn = os.path.join(args.build, "apps", "train_gcn")
    if system == report.TESSERA_1:
        return [train_gcn, "--threads", str(args.threads), "--quiet"] + common
    if system == report.TESSERA_2:
        return [args.mpiexec, "-n", "2", train_gcn, "--threads", str(args.threads // 2),
                "--quiet"] + common
    return [os.path.join(args.venv, "bin", "python"), os.path.join(HERE, "peer_models.py"),
            "--threads", str(args.threads)] + common


def wait_for_quiet(args):
    """Waits (at most --max-wait seconds) for the 1-minute load average to fall to --max-load;
    returns the seconds waited."""
    start = time.perf_counter()
    while run_peers.loadavg() > args.max_load and time.perf_counter() - start < args.max_wait:
        time.sleep(15)
    return time.perf_counter() - start


def run_case(args, manifest, case, rep, path):
    """Every system once on `case`, in the order of repetition `rep`."""
    settings = manifest["cases"][case]
    waited = wait_for_quiet(args)
    loads = {"case": case, "rep": rep, "waited_s": waited, "before": os.getloadavg()}
    for system in run_peers.rotation(SYSTEMS, rep):
        stem = os.path.join(case, f"{system}-rep{rep}")
        full = os.path.join(args.runs, stem)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        cmd = command(args, system, settings, path, rep, full)
        threads = args.threads // 2 if system == report.TESSERA_2 else args.threads
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads))
        load = run_peers.loadavg()
        run_peers.log(f"rep {rep} {case} {system} (load {load:.2f})")
        status, wall, maxrss, load_during = run_peers.run_one(cmd, env, full + ".log",
                                                              args.timeout)
        if status != 0:
            with open(full + ".log") as f:
                tail = f.read()[-800:]
            sys.exit(f"run_models.py: {system} on {case} exited {status}:\n{tail}\n"
                     f"command: {' '.join(cmd)}")
        run_peers.log(f"  {wall:.1f} s, load {load_during:.2f} while it ran")
        entry = {"system": system, "dataset": case, "rep": rep, "seed": rep, "wall_s": wall,
                 "rusage_maxrss_bytes": maxrss, "load_average": load,
                 "load_during": load_during, "metrics": stem + ".jsonl",
                 "summary": stem + ".json", "command": cmd}
        if system.startswith("tessera"):
            entry["tessera_binary"] = run_peers.tessera_binary(args)
        manifest["runs"].append(entry)
    loads["after"] = os.getloadavg()
    manifest["case_loads"].append(loads)
    run_peers.save_manifest(argparse.Namespace(work=args.runs), manifest)


def torch_config(args):
    """torch's build configuration (its BLAS among it) from the peers' environment."""
    done = subprocess.run([os.path.join(args.venv, "bin", "python"), "-c",
                           "import torch; print(torch.__config__.show())"],
                          capture_output=True, text=True, env=dict(os.environ,
                                                                   CUDA_VISIBLE_DEVICES=""))
    return done.stdout.strip() if done.returncode == 0 else f"? ({done.stderr[-200:]})"


def tessera_version_line(args):
    done = subprocess.run([os.path.join(args.build, "apps", "train_gcn"), "--version"],
                          capture_output=True, text=True)
    return done.stdout.strip()


def cpu_model():
    done = subprocess.run(["lscpu"], capture_output=True, text=True)
    keep = ("Model name", "Thread(s) per core", "Core(s) per socket", "Flags")
    out = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Flags":
            out.append("AVX flags: " + " ".join(f for f in value.split() if "avx" in f))
        elif key.strip() in keep:
            out.append(f"{key.strip()}: {value.strip()}")
    return out


def results(manifest):
    """The results object: run_peers' per-run records and per-case tables (report.py), the case
    settings and the load around every case."""
    records = []
    for e in manifest["runs"]:
        summary = report.read_json(os.path.join(manifest["runs_dir"], e["summary"]))
        metrics = report.read_jsonl(os.path.join(manifest["runs_dir"], e["metrics"]))
        warmup = manifest["cases"][e["dataset"]]["warmup"]
        record = report.run_record(e["system"], e["dataset"], e["rep"], e["seed"], e["wall_s"],
                                   summary, metrics, warmup, e.get("rusage_maxrss_bytes"))
        # Evaluation time over the evaluated epochs only (a case may evaluate every k-th).
        evaluated = [m for m in metrics if m.get("valid_acc") is not None]
        record["eval_s"] = report.median([m["eval_s"] for m in evaluated if m["epoch"] > warmup]
                                         or [m["eval_s"] for m in evaluated])
        record.update({k: e.get(k) for k in ("load_average", "load_during", "tessera_binary")})
        records.append(record)
    out = {k: manifest.get(k) for k in manifest if k not in ("runs", "runs_dir")}
    out["table"] = report.add_ratios(report.aggregate(records, {}))
    out["runs"] = records
    return out


def render(res):
    s, v = res["settings"], res["versions"]
    lines = [f"### GAT and GCNII against PyTorch Geometric ({res['date']})", "",
             f"- Command: `{res['command']}`.",
             f"- Machine: {'; '.join(res['cpu'])}; {res['machine']['cores']} cores; "
             f"{res.get('minutes', 0):.1f} min in all.",
             f"- Tessera: {v['tessera']}; `train_gcn --version`: "
             f"{' / '.join(v['train_gcn'].splitlines())}.",
             "- PyG peer: " + ", ".join(f"{k} {v[k]}" for k in
                                         ("python", "torch", "torch_geometric") if k in v)
             + f"; torch BLAS: {v.get('torch_blas', '?')}.",
             f"- {s['threads']} threads per system (tessera-2: 2 ranks × {s['threads'] // 2}); "
             "epoch time = median over the epochs after the case's warm-up, then the median "
             "over the case's repetitions (seed r in repetition r), the systems' order rotated "
             "per repetition; accuracies are mean ± std over those seeds.", ""]
    for name, rows in res["table"].items():
        c = res["cases"][name]
        lines.append(report.markdown_table(
            f"{name} ({c['dataset']}, {c['epochs']} epochs, warm-up {c['warmup']}, evaluation "
            f"every {c['eval_every']}, {c['reps']} repetition(s))", rows, res["machine"]["cores"]))
        lines.append(f"Flags: `{' '.join(c['flags'])}`.\n")
    lines += ["#### Load average around each case (1, 5, 15 minutes)", "",
              "| case | rep | waited s | before | after |", "|---|--:|--:|---|---|"]
    for c in res["case_loads"]:
        lines.append(f"| {c['case']} | {c['rep']} | {c['waited_s']:.0f} | "
                     f"{' '.join(f'{x:.2f}' for x in c['before'])} | "
                     f"{' '.join(f'{x:.2f}' for x in c.get('after', []))} |")
    lines.append("")
    lines.append(report.markdown_runs(res["runs"]))
    return "\n".join(lines)


def write_results(args, manifest):
    res = results(manifest)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(render(res))
    run_peers.log(f"wrote {args.out}/results.json and results.md")


def main(argv):
    args = parse_flags(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.report_only:
        with open(os.path.join(args.runs, "manifest.json")) as f:
            write_results(args, json.load(f))
        return
    os.makedirs(args.runs, exist_ok=True)
    paths = run_peers.datasets(args)
    started = time.perf_counter()
    manifest = {
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["bench/peers/run_models.py"] + argv),
        "machine": run_peers.machine(), "cpu": cpu_model(),
        "settings": {"threads": args.threads, "reps": args.reps, "quick": args.quick},
        "cases": {c: dict(CASES[c], epochs=CASES[c]["quick_epochs" if args.quick else "epochs"],
                          reps=min(args.reps, CASES[c]["reps"] or args.reps))
                  for c in args.cases},
        "versions": {"tessera": run_peers.tessera_version(),
                     "train_gcn": tessera_version_line(args)},
        "torch_config": torch_config(args),
        "runs_dir": args.runs, "case_loads": [], "runs": [],
    }
    for rep in range(args.reps):
        for case, settings in manifest["cases"].items():
            if rep < settings["reps"]:
                run_case(args, manifest, case, rep, paths[settings["dataset"]])
    pyg = next(r for r in manifest["runs"] if r["system"] == "pyg")
    manifest["versions"].update(report.read_json(os.path.join(args.runs, pyg["summary"]))
                                ["versions"])
    manifest["minutes"] = (time.perf_counter() - started) / 60
    run_peers.save_manifest(argparse.Namespace(work=args.runs), manifest)
    run_peers.log(f"all runs done in {manifest['minutes']:.1f} minutes")
    write_results(args, manifest)


if __name__ == "__main__":
    main(sys.argv[1:])
