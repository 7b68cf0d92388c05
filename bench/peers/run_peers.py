#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Benchmarks Tessera against PyTorch Geometric and DGL on this machine, in one run: the same
raw-layout datasets (Cora, and synth:arxiv-like exported by tessera_data), the same 3-layer GCN
hyperparameters, seeds and thread count; tessera-1 (one process), tessera-2 (mpiexec -n 2, the
threads split between the ranks), PyG's GCNConv, DGL's GraphConv, and on arxiv-like (and
products-like when asked) PyG's mini-batch GraphSAGE (NeighborLoader) for time to accuracy, tuned
by a small sweep of batch size and fan-outs whose best is the anchor. Repetitions rotate the
order of the systems so that drift in the machine's speed touches all alike. Writes results.json
and results.md to --out.

Needs: a Tessera build (train_gcn, tessera_data; scripts/setup.sh makes ./build), mpiexec,
a Python 3.9-3.11 that can make a virtual environment (Debian: apt-get install python3-venv),
g++ (torch-scatter and torch-sparse build from source: PyPI has no wheels), and PyPI. The
environment is made once, outside the source tree (--venv), with the pins in this folder.
Standard library only.

  bench/peers/run_peers.py --build build            # the full run, about 45 minutes idle
  bench/peers/run_peers.py --quick                  # a few minutes: fewer epochs, one repetition
  bench/peers/run_peers.py --datasets products-like --systems tessera-1,tessera-2,pyg-sage-minibatch
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import report  # noqa: E402

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "tessera-peers")
ALL_SYSTEMS = ["tessera-1", "tessera-2", "pyg-gcn", "pyg-gcn-edge-index", "dgl-gcn",
               "pyg-sage-minibatch"]
DEFAULT_SYSTEMS = ["tessera-1", "tessera-2", "pyg-gcn", "dgl-gcn", "pyg-sage-minibatch"]
DATASETS = ["cora", "arxiv-like", "products-like"]
# Seconds a run may take unless --timeout says otherwise. On products-like 1800 s stopped a
# 30-epoch tessera-2 run at epoch 24 on a 2-core Intel Xeon.
DEFAULT_TIMEOUT_S = 1800.0
DATASET_TIMEOUT_S = {"products-like": 4 * 3600.0}
# The mini-batch peer's sweep: batch 1024 and 4096 by fan-outs 5,5,5 and 15,10,5 (PyG's
# ogbn-products example: 1024, 15,10,5, lr 0.003), at the example's learning rate (at 4096,
# 0.01 did not learn on arxiv-like: 8.5% after 5 epochs). The likely fastest first, so that the
# best time so far soon bounds the runs after it.
DEFAULT_SWEEP = ["1024:5,5,5:0.003", "4096:5,5,5:0.003", "1024:15,10,5:0.003",
                 "4096:15,10,5:0.003"]
# What each peer needs from the environment; a failed install or import makes it unavailable.
NEEDS = {"pyg-gcn": ["torch_geometric", "torch_sparse"], "pyg-gcn-edge-index": ["torch_geometric"],
         "dgl-gcn": ["dgl"], "pyg-sage-minibatch": ["torch_geometric", "torch_sparse"]}


def parse_flags(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--build", default=os.path.join(REPO, "build"),
                   help="Tessera build directory (default: ./build)")
    p.add_argument("--cora", default=os.path.join(REPO, "..", "shared", "datasets", "cora"),
                   help="Cora in the OGB raw layout (default: ../shared/datasets/cora)")
    p.add_argument("--work", default=os.path.join(CACHE, "work"),
                   help="generated dataset and per-run files (default: %(default)s)")
    p.add_argument("--venv", default=os.path.join(CACHE, "venv"),
                   help="the peers' virtual environment (default: %(default)s)")
    p.add_argument("--python", default=None,
                   help="interpreter that makes the venv (default: this one if it can)")
    p.add_argument("--out", default="peers-results", help="results.json and results.md go here")
    p.add_argument("--threads", type=int, default=2,
                   help="threads per system: torch threads; tessera-2 gets threads/2 per rank")
    p.add_argument("--datasets", default="cora,arxiv-like",
                   help=f"any of {','.join(DATASETS)} (products-like: 2.4M nodes, up to 17 GB a "
                   "process, hours with the sweep)")
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                   help=f"any of {','.join(ALL_SYSTEMS)}")
    p.add_argument("--epochs-cora", type=int, default=100)
    p.add_argument("--epochs-arxiv", type=int, default=60)
    p.add_argument("--epochs-products", type=int, default=30)
    p.add_argument("--sage-epochs", type=int, default=5,
                   help="pyg-sage-minibatch: most epochs of each setting of the sweep (it stops "
                   "at the target accuracy, or once it can no longer beat the best so far)")
    p.add_argument("--sage-sweep", default=" ".join(DEFAULT_SWEEP),
                   help="pyg-sage-minibatch's settings, BATCH:FANOUTS:LR separated by spaces, "
                   "run in this order (default: %(default)s)")
    p.add_argument("--sage-give-up-factor", type=float, default=None,
                   help="pyg-sage-minibatch: every setting also gives up once it is past this "
                   "many times tessera-1's time to the target (the race is decided; the report "
                   "then gives a bound). Default: no such limit")
    p.add_argument("--sage-reps", type=int, default=1,
                   help="pyg-sage-minibatch repetitions of each setting")
    p.add_argument("--warmup", type=int, default=5, help="epochs left out of the epoch median")
    p.add_argument("--reps", type=int, default=2, help="repetitions; rep r uses seed r")
    p.add_argument("--num-layers", type=int, default=3)
    p.add_argument("--hidden-channels", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--quick", action="store_true",
                   help="--reps 1 --epochs-cora 30 --epochs-arxiv 15 --epochs-products 5 "
                   "--sage-epochs 1, and only the first setting of --sage-sweep")
    p.add_argument("--skip-install", action="store_true",
                   help="use --venv as it is (no pip)")
    p.add_argument("--mpiexec", default=shutil.which("mpiexec") or "mpiexec")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per run (default: 1800; 14400 on products-like)")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: rebuild --out from --work/manifest.json (also from the "
                   "runs so far of an interrupted run)")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs of --work/manifest.json whose command is unchanged")
    args = p.parse_args(argv)
    if args.quick:
        args.reps, args.epochs_cora, args.epochs_arxiv, args.sage_epochs = 1, 30, 15, 1
        args.epochs_products = 5
    try:
        args.sage_sweep = [parse_sweep_entry(e, args.num_layers) for e in args.sage_sweep.split()]
    except ValueError as e:
        p.error(f"--sage-sweep: {e}")
    if not args.sage_sweep:
        p.error("--sage-sweep: no setting given")
    if args.quick:
        args.sage_sweep = args.sage_sweep[:1]
    args.systems = [s for s in args.systems.split(",") if s]
    for s in args.systems:
        if s not in ALL_SYSTEMS:
            p.error(f"--systems: unknown system {s!r} (expected some of {ALL_SYSTEMS})")
    args.datasets = [d for d in args.datasets.split(",") if d]
    for d in args.datasets:
        if d not in DATASETS:
            p.error(f"--datasets: unknown dataset {d!r} (expected some of {', '.join(DATASETS)})")
    if args.sage_give_up_factor is not None and not args.sage_give_up_factor > 0:
        p.error(f"--sage-give-up-factor: expected a positive number, got "
                f"{args.sage_give_up_factor}")
    if args.timeout is not None and not args.timeout > 0:
        p.error(f"--timeout: expected a positive number of seconds, got {args.timeout}")
    if args.threads < 2 and "tessera-2" in args.systems:
        p.error("--threads: tessera-2 needs at least 2 (one per rank)")
    return args


def parse_sweep_entry(text, num_layers):
    """BATCH:FANOUTS:LR (e.g. 4096:5,5,5:0.01) as {batch_size, fanouts, lr}; ValueError naming
    the entry and what is wrong."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"{text!r}: expected BATCH:FANOUTS:LR, e.g. 4096:5,5,5:0.01")
    try:
        batch, fanouts, lr = int(parts[0]), [int(v) for v in parts[1].split(",")], float(parts[2])
    except ValueError:
        raise ValueError(f"{text!r}: BATCH and FANOUTS must be integers, LR a number") from None
    if batch < 1 or lr <= 0 or min(fanouts) < 1:
        raise ValueError(f"{text!r}: batch size, fan-outs and learning rate must be positive")
    if len(fanouts) != num_layers:
        raise ValueError(f"{text!r}: {len(fanouts)} fan-outs for {num_layers} layers")
    return {"batch_size": batch, "fanouts": fanouts, "lr": lr}


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)



def pip_step(venv, name, pip_args, env=None):
    """Runs one pip install; returns (ok, reason)."""
    cmd = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet"] + pip_args
    log(f"installing {name}: {' '.join(pip_args)}")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode == 0:
        return True, ""
    lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
    return False, " / ".join(lines[-3:])[-400:]


def venv_python_for(args):
    candidates = [args.python] if args.python else [sys.executable, "python3.11", "python3"]
    for c in candidates:
        exe = shutil.which(c) or c
        ok = subprocess.run([exe, "-c", "import ensurepip, venv, sys; "
                             "sys.exit(0 if sys.version_info[:2] <= (3, 11) else 1)"],
                            capture_output=True).returncode == 0
        if ok:
            return exe
    sys.exit("run_peers.py: no interpreter here can make a virtual environment for the pins "
             "(needs Python <= 3.11 with ensurepip; Debian: apt-get install python3-venv, "
             "or pass --python)")


def install(args):
    """Makes --venv from the pins unless it is already made from the same pins. Returns
    {component: reason} for what could not be installed."""
    pins = [os.path.join(HERE, f) for f in
            ("requirements.txt", "requirements-sparse.txt", "requirements-dgl.txt")]
    digest = hashlib.sha256(b"".join(open(f, "rb").read() for f in pins)).hexdigest()
    stamp = os.path.join(args.venv, "tessera-peers-stamp.json")
    if os.path.exists(stamp):
        with open(stamp) as f:
            state = json.load(f)
        if state.get("digest") == digest or args.skip_install:
            return state.get("failed", {})
    if args.skip_install:
        sys.exit(f"run_peers.py: --skip-install, but {args.venv} was not made by this script")
    if not os.path.exists(os.path.join(args.venv, "bin", "python")):
        exe = venv_python_for(args)
        log(f"creating {args.venv} with {exe}")
        subprocess.run([exe, "-m", "venv", args.venv], check=True)
    failed = {}
    ok, why = pip_step(args.venv, "torch, PyG", ["-r", pins[0]])
    if not ok:
        sys.exit(f"run_peers.py: installing {pins[0]} failed: {why}")
    # torch-scatter and torch-sparse: sources only on PyPI, built against the torch just
    # installed (hence no build isolation); CPU only.
    env = dict(os.environ, FORCE_CUDA="0", MAX_JOBS=str(max(1, os.cpu_count() or 1)))
    ok, why = pip_step(args.venv, "torch-scatter, torch-sparse (from source, several minutes)",
                       ["--no-build-isolation", "-r", pins[1]], env)
    if not ok:
        failed["torch_sparse"] = f"torch-sparse did not build: {why}"
    ok, why = pip_step(args.venv, "DGL", ["-r", pins[2]])
    if not ok:
        failed["dgl"] = f"not installable: {why}"
    with open(stamp, "w") as f:
        json.dump({"digest": digest, "failed": failed}, f, indent=2)
    return failed


def probe(args, failed):
    """Imports each module the peers need; returns {module: reason} for those that fail, and
    the versions of those that load."""
    python = os.path.join(args.venv, "bin", "python")
    problems, versions = dict(failed), {}
    for module in ("torch", "torch_geometric", "torch_sparse", "dgl"):
        if module in problems:
            continue
        code = (f"import {module}, json; print(json.dumps(getattr({module}, '__version__', '?')))")
        if module == "dgl":  # import alone can succeed while graph construction cannot
            code = ("import dgl, torch, json; dgl.graph((torch.tensor([0]), torch.tensor([1]))); "
                    "print(json.dumps(dgl.__version__))")
        done = subprocess.run([python, "-c", code], capture_output=True, text=True,
                              env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
        if done.returncode == 0:
            versions[module] = json.loads(done.stdout.strip().splitlines()[-1])
        else:
            last = [ln for ln in done.stderr.splitlines() if ln.strip()]
            problems[module] = f"import {module} failed: {last[-1] if last else '?'}"[:300]
    return problems, versions



def datasets(args):
    tessera_data = os.path.join(args.build, "apps", "tessera_data")
    out = {}
    if "cora" in args.datasets:
        if not os.path.exists(os.path.join(args.cora, "raw", "edge.csv.gz")):
            sys.exit(f"run_peers.py: --cora {args.cora}: no raw/edge.csv.gz there")
        out["cora"] = os.path.abspath(args.cora)
    for name in ("arxiv-like", "products-like"):
        if name not in args.datasets:
            continue
        path = os.path.join(args.work, name.replace("-", "_"))
        if not os.path.exists(os.path.join(path, "meta.json")):
            log(f"exporting synth:{name} to {path}")
            subprocess.run([tessera_data, "generate", "--preset", name, "--out", path],
                           check=True)
        out[name] = path
    return out


def epochs_of(args, dataset):
    return {"cora": args.epochs_cora, "arxiv-like": args.epochs_arxiv,
            "products-like": args.epochs_products}[dataset]



def command(args, system, dataset_path, epochs, seed, metrics, summary, stop_at_valid=None,
            setting=None, give_up_after=None):
    """The command line of one run; every system gets the same model flags and files. The
    mini-batch peer runs one `setting` of the sweep (default: the sweep's first) with its own
    epoch budget and learning rate."""
    if system == report.SAGE:
        epochs = args.sage_epochs
        setting = setting or args.sage_sweep[0]
    model = ["--dataset", dataset_path, "--num-layers", str(args.num_layers),
             "--hidden-channels", str(args.hidden_channels), "--dropout", str(args.dropout),
             "--epochs", str(epochs), "--seed", str(seed), "--eval-every", "1",
             "--metrics", metrics, "--summary", summary]
    lr = ["--lr", str(args.lr)]
    python = os.path.join(args.venv, "bin", "python")
    train_gcn = os.path.join(args.build, "apps", "train_gcn")
    if system == "tessera-1":
        return [train_gcn, "--threads", str(args.threads), "--quiet"] + lr + model
    if system == "tessera-2":
        return ([args.mpiexec, "-n", "2", train_gcn, "--threads", str(args.threads // 2),
                 "--quiet"] + lr + model)
    if system == report.SAGE:
        stop = [] if stop_at_valid is None else ["--stop-at-valid", f"{stop_at_valid:.6f}"]
        if give_up_after is not None:
            stop += ["--give-up-after", f"{give_up_after:.1f}"]
        return [python, os.path.join(HERE, "peer_sage_minibatch.py"),
                "--threads", str(args.threads), "--batch-size", str(setting["batch_size"]),
                "--fanouts", ",".join(map(str, setting["fanouts"])),
                "--lr", str(setting["lr"])] + stop + model
    peer = [python, os.path.join(HERE, "peer_gcn.py"), "--threads", str(args.threads)]
    frameworks = {"pyg-gcn": ["--framework", "pyg", "--graph-format", "sparse"],
                  "pyg-gcn-edge-index": ["--framework", "pyg", "--graph-format", "edge_index"],
                  "dgl-gcn": ["--framework", "dgl"]}
    return peer + frameworks[system] + lr + model


def run_one(cmd, env, log_path, timeout):
    """Runs cmd; returns (exit status, wall seconds, peak RSS bytes from wait4, the mean of the
    1-minute load average sampled every 5 s while it ran: other work on the machine)."""
    loads, done = [], threading.Event()

    def sample():
        while not done.wait(5.0):
            loads.append(loadavg())

    with open(log_path, "w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        timer.cancel()
        done.set()
    mean_load = sum(loads) / len(loads) if loads else loadavg()
    return os.waitstatus_to_exitcode(status), wall, usage.ru_maxrss * 1024, mean_load


def rotation(systems, rep):
    k = rep % len(systems)
    return systems[k:] + systems[:k]


def loadavg():
    return os.getloadavg()[0]


GEMM_TORCH = """
import json, time, torch
torch.set_num_threads({threads})
a, w = torch.rand(169343, 256), torch.rand(256, 256)
a @ w
t = time.perf_counter()
for _ in range(3): a @ w
print(json.dumps(3 * 2 * 169343 * 256 * 256 / (time.perf_counter() - t) / 1e9))
"""
GEMM_NUMPY = """
import json, time, numpy as np
a = np.random.rand(169343, 256).astype(np.float32)
w = np.random.rand(256, 256).astype(np.float32)
a @ w
t = time.perf_counter()
for _ in range(3): a @ w
print(json.dumps(3 * 2 * 169343 * 256 * 256 / (time.perf_counter() - t) / 1e9))
"""


def gemm_probe(args, with_torch):
    """f32 GEMM GFLOP/s in the same run: torch's BLAS (MKL in PyPI's wheel) and OpenBLAS through
    Debian's numpy (the BLAS Tessera links), with --threads threads; a reference for the tables."""
    out = {}
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS=str(args.threads),
               MKL_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads))
    probes = [("OpenBLAS via numpy", "/usr/bin/python3", GEMM_NUMPY)]
    if with_torch:
        probes.insert(0, ("torch (MKL)", os.path.join(args.venv, "bin", "python"),
                          GEMM_TORCH.format(threads=args.threads)))
    for name, python, code in probes:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
        if done.returncode == 0:
            out[name] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def environment(args):
    """Installs and probes the peers' environment when a peer is asked for. Returns
    ({system: reason} for peers that cannot run, {module: version}, pip freeze lines)."""
    peers = [s for s in args.systems if s in NEEDS]
    if not peers:
        return {}, {}, []
    problems, versions = probe(args, install(args))
    unavailable = {}
    for system in peers:
        missing = [problems[m] for m in ["torch"] + NEEDS[system] if m in problems]
        if missing:
            unavailable[system] = missing[0]
    freeze = subprocess.run([os.path.join(args.venv, "bin", "python"), "-m", "pip", "freeze"],
                            capture_output=True, text=True).stdout.split()
    return unavailable, versions, freeze


def run_system(args, manifest, system, dataset, path, rep, epochs, stop_at_valid=None,
               setting=None, give_up_after=None):
    """One run, unless --resume finds it in the manifest with the same command; exits with the
    run's log tail when it fails. Appends its entry to the manifest and saves the manifest. A
    setting of the mini-batch sweep runs under its own name (report.sage_name)."""
    name = report.sage_name(setting) if setting else system
    stem = os.path.join("runs", dataset, f"{report.file_stem(name)}-rep{rep}")
    full = os.path.join(args.work, stem)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    cmd = command(args, system, path, epochs, rep, full + ".jsonl", full + ".json", stop_at_valid,
                  setting, give_up_after)
    for entry in manifest.get("previous_runs", []):
        if entry["command"] == cmd and os.path.exists(full + ".json"):
            log(f"rep {rep} {dataset} {name}: kept from the previous manifest (--resume)")
            manifest["runs"].append(entry)
            return entry
    threads = args.threads // 2 if system == "tessera-2" else args.threads
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    load = loadavg()
    log(f"rep {rep} {dataset} {name} (load {load:.1f})")
    timeout = args.timeout or DATASET_TIMEOUT_S.get(dataset, DEFAULT_TIMEOUT_S)
    status, wall, maxrss, load_during = run_one(cmd, env, full + ".log", timeout)
    if status != 0:
        with open(full + ".log") as f:
            tail = f.read()[-800:]
        how = (f"was stopped at --timeout {timeout:g} s" if wall >= timeout
               else f"exited {status}")
        sys.exit(f"run_peers.py: {name} on {dataset} {how}:\n{tail}\n"
                 f"command: {' '.join(cmd)}")
    summary = report.read_json(full + ".json")
    best = summary.get("best_valid_acc")  # None: given up before its first evaluation
    log(f"  {wall:.1f} s, best valid "
        f"{'none (no evaluation)' if best is None else f'{100 * best:.2f}%'}, "
        f"load {load_during:.1f} while it ran")
    entry = {"system": name, "dataset": dataset, "rep": rep, "seed": rep, "wall_s": wall,
             "rusage_maxrss_bytes": maxrss, "load_average": load, "load_during": load_during,
             "stop_at_valid": stop_at_valid, "metrics": stem + ".jsonl",
             "summary": stem + ".json", "command": cmd}
    if setting:
        entry.update(setting=setting, give_up_after=give_up_after)
    if system.startswith("tessera"):
        entry["tessera_binary"] = tessera_binary(args)
    manifest["runs"].append(entry)
    save_manifest(args, manifest)
    return entry


def tessera_binary(args):
    """A digest of train_gcn and the Tessera libraries it loads: a build updated during the run
    shows up as a second value."""
    train_gcn = os.path.join(args.build, "apps", "train_gcn")
    files = [train_gcn]
    ldd = subprocess.run(["ldd", train_gcn], capture_output=True, text=True).stdout
    files += sorted(line.split("=>")[1].split()[0] for line in ldd.splitlines()
                    if "tessera" in line and "=>" in line and "/" in line.split("=>")[1])
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def save_manifest(args, manifest):
    path = os.path.join(args.work, "manifest.json")
    kept = {k: v for k, v in manifest.items() if k != "previous_runs"}
    with open(path + ".tmp", "w") as f:
        json.dump(kept, f, indent=2)
    os.replace(path + ".tmp", path)


def run_all(args, manifest, paths, runnable):
    """Repetition 0 of the full-graph systems on every dataset; then, on every dataset but Cora,
    the mini-batch peer's sweep (sage_sweep); then the other repetitions. The order of the
    systems rotates by one per repetition. The manifest is saved after every run."""
    full_graph = [s for s in runnable if s != report.SAGE]

    def repetition(rep):
        for dataset, path in paths.items():
            for system in rotation(full_graph, rep):
                run_system(args, manifest, system, dataset, path, rep, epochs_of(args, dataset))

    repetition(0)
    if report.SAGE in runnable:
        for dataset in [d for d in paths if d != "cora"]:
            sage_sweep(args, manifest, dataset, paths[dataset])
    for rep in range(1, args.reps):
        repetition(rep)


def sage_sweep(args, manifest, dataset, path):
    """Every setting of --sage-sweep in order, --sage-reps times each, each run stopped at the
    time-to-accuracy target that repetition 0 of tessera-1 set (its best validation accuracy
    less 1 point) or, once one run has reached it, given up as soon as it is past the best time
    so far: such a run can no longer be the anchor, and the sweep costs little more than its
    best setting. With --sage-give-up-factor F every run also gives up past F times
    tessera-1's own time to the target."""
    target = report.tta_target(manifest["runs"], args.work, dataset)
    best = None
    if target is not None and args.sage_give_up_factor is not None:
        t1 = report.tessera_1_time_to_target(manifest["runs"], args.work, dataset, target)
        best = args.sage_give_up_factor * t1 if t1 is not None else None
    for setting in args.sage_sweep:
        for rep in range(args.sage_reps):
            entry = run_system(args, manifest, report.SAGE, dataset, path, rep, args.sage_epochs,
                               target, setting, best)
            if target is None:
                continue
            reached = report.time_to_accuracy(
                report.read_jsonl(os.path.join(args.work, entry["metrics"])), entry["wall_s"],
                target)
            if reached and (best is None or reached["seconds"] < best):
                best = reached["seconds"]


def write_results(args, manifest):
    results = report.results_from_manifest(manifest, args.work)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(report.render(results))
    log(f"wrote {args.out}/results.json and results.md")


def main(argv):
    args = parse_flags(argv)
    if args.report_only:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.work, "manifest.json")) as f:
            write_results(args, json.load(f))
        return
    for exe in ("train_gcn", "tessera_data"):
        if not os.access(os.path.join(args.build, "apps", exe), os.X_OK):
            sys.exit(f"run_peers.py: --build {args.build}: no apps/{exe} (build it first: "
                     "scripts/setup.sh, or cmake --build BUILD --target train_gcn tessera_data)")
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    load_before = loadavg()
    started = time.perf_counter()
    unavailable, versions, freeze = environment(args)
    runnable = [s for s in args.systems if s not in unavailable]
    paths = datasets(args)
    manifest = {
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["bench/peers/run_peers.py"] + argv),
        "machine": machine(),
        "settings": {"threads": args.threads, "reps": args.reps, "seeds": list(range(args.reps)),
                     "warmup": args.warmup, "epochs_cora": args.epochs_cora,
                     "epochs_arxiv": args.epochs_arxiv, "epochs_products": args.epochs_products,
                     "sage_epochs": args.sage_epochs, "sage_reps": args.sage_reps,
                     "sage_sweep": args.sage_sweep,
                     "sage_give_up_factor": args.sage_give_up_factor,
                     "num_layers": args.num_layers, "hidden_channels": args.hidden_channels,
                     "dropout": args.dropout, "lr": args.lr},
        "versions": dict(versions, tessera=tessera_version()),
        "pip_freeze": freeze,
        "unavailable": unavailable,
        "load_average_before": load_before,
        "gemm_gflops": gemm_probe(args, any(s in NEEDS for s in runnable)),
        "complete": False,
        "runs": [],
    }
    if args.resume and os.path.exists(os.path.join(args.work, "manifest.json")):
        with open(os.path.join(args.work, "manifest.json")) as f:
            manifest["previous_runs"] = json.load(f)["runs"]
    run_all(args, manifest, paths, runnable)
    manifest["load_average_after"] = loadavg()
    manifest["minutes"] = (time.perf_counter() - started) / 60
    manifest["complete"] = True
    save_manifest(args, manifest)
    log(f"all runs done in {manifest['minutes']:.1f} minutes")
    write_results(args, manifest)


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu": model, "cores": os.cpu_count(), "os": platform.platform()}


def tessera_version():
    done = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "?"


if __name__ == "__main__":
    main(sys.argv[1:])
