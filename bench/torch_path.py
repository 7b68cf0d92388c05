#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The torch path's cost: a 3-layer GCN (256 hidden, dropout 0.5, Adam) trained through
tessera.torch against the same model in Tessera's native train_gcn at the same ranks, and
against PyTorch Geometric's GCNConv on one process, all on the same graph and one thread per
rank, in one run. The torch path's dropout is tessera.torch.dropout (Tessera's masks, as native
training draws them); PyG's is F.dropout. Prints the median training-step time (epochs after the first; evaluation
excluded), the ratio to native and each system's peak resident memory. The torch path runs
under memory policies (--malloc): default (torch's large CPU tensors in Tessera's host memory, as
importing tessera.torch sets up); torch (TESSERA_TORCH_MEMORY=off: torch's own allocator over
glibc's malloc as it is); keep (tessera.torch.keep_freed_memory(), TESSERA_TORCH_MALLOC=keep);
thp (glibc's malloc asking for transparent huge pages, GLIBC_TUNABLES=glibc.malloc.hugetlb=1).
train_gcn starts again with OpenBLAS's best GEMM kernels for the CPU when OpenBLAS chose weaker
ones; a Python process cannot, so every run gets that core in OPENBLAS_CORETYPE (--blas best,
the default) unless the environment sets one; --blas as-loaded leaves the torch path on
OpenBLAS's own choice, as a user who sets nothing runs it.

  python3 bench/torch_path.py [--build build] [--ranks 1,2] [--epochs 20]
                              [--malloc default,torch,keep,thp]
                              [--dataset synth:arxiv-like] [--pyg-python VENV/bin/python]
                              [--pyg-epochs 5] [--blas best|as-loaded]

--pyg-python: an interpreter with torch_geometric, pandas and torch (the peers' environment of
bench/peers); without it the PyG row is left out. Runs the workers itself under mpiexec.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = dict(num_layers=3, hidden_channels=256, dropout=0.5, lr=0.01)


def worker(args):
    """One rank of the torch path: this rank's part, the GCN, the epoch loop; rank 0 writes the
    per-epoch step times (each the slowest rank's: the gradient all-reduce ends every step)."""
    import torch
    import torch.nn.functional as F

    import tessera.torch as tt
    torch.set_num_threads(1)
    graph = tt.DistributedGraph(args.dataset, num_layers=MODEL["num_layers"])
    widths = ([graph.num_features] + [MODEL["hidden_channels"]] * (MODEL["num_layers"] - 1) +
              [graph.num_classes])
    torch.manual_seed(0)
    convs = torch.nn.ModuleList(tt.GCNConv(a, b) for a, b in zip(widths[:-1], widths[1:]))
    tt.broadcast_parameters(convs, graph)
    optimizer = torch.optim.Adam(convs.parameters(), lr=MODEL["lr"])
    times = []
    for epoch in range(1, args.epochs + 1):
        graph.set_epoch(epoch)
        clock = time.perf_counter()
        optimizer.zero_grad()
        x = graph.x
        for conv in convs[:-1]:
            x = tt.dropout(F.relu(conv(x, graph)), graph, p=MODEL["dropout"])
        out = convs[-1](x, graph)
        idx = graph.train_idx
        loss = F.cross_entropy(out[idx], graph.y[idx], reduction="sum") / graph.num_train
        loss.backward()
        tt.all_reduce_gradients(convs, graph)
        optimizer.step()
        step = torch.tensor([time.perf_counter() - clock], dtype=torch.float64)
        times.append(graph.global_sum(step) / graph.size)  # the mean over ranks
    # Peak resident memory, the largest over ranks (ru_maxrss is in KiB on Linux).
    peaks = torch.zeros(graph.size, dtype=torch.float64)
    peaks[graph.rank] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0
    graph.all_reduce_(peaks)
    if graph.rank == 0:
        with open(args.out, "w") as f:
            json.dump({"epoch_s": times, "peak_rss_bytes": peaks.max().item(),
                       "tensor_memory": tt.tensor_memory()}, f)


def median_after_first(times):
    return statistics.median(times[1:] if len(times) > 1 else times)


def malloc_env(env, policy):
    """The environment of a torch-path run under a memory policy: default, torch, keep or thp."""
    if policy == "torch":
        return dict(env, TESSERA_TORCH_MEMORY="off")
    if policy == "keep":
        return dict(env, TESSERA_TORCH_MALLOC="keep")
    if policy == "thp":
        tunables = ":".join(t for t in (env.get("GLIBC_TUNABLES", ""), "glibc.malloc.hugetlb=1") if t)
        return dict(env, GLIBC_TUNABLES=tunables)
    if policy != "default":
        sys.exit(f"--malloc: {policy!r} is not one of default, torch, keep, thp")
    return env


def run(cmd, env):
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--dataset", default="synth:arxiv-like")
    p.add_argument("--pyg-python", default="")
    p.add_argument("--pyg-epochs", type=int, default=5, help="PyG's epochs (slow on one thread)")
    p.add_argument("--malloc", default="default,torch",
                   help="the torch path's memory policies: default (torch's large tensors in "
                        "Tessera's memory); torch (TESSERA_TORCH_MEMORY=off); keep "
                        "(TESSERA_TORCH_MALLOC=keep); thp (GLIBC_TUNABLES=glibc.malloc.hugetlb=1)")
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--blas", default="best", choices=("best", "as-loaded"),
                   help="the torch path's OpenBLAS core: train_gcn's, or OpenBLAS's own choice")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)

    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.path.join(args.build, "python") + os.pathsep + env.get("PYTHONPATH", "")
    train_gcn = os.path.join(args.build, "apps", "train_gcn")
    chosen, better = subprocess.run(
        [sys.executable, "-c", "import tessera; print(*tessera.blas_cores(), sep=',')"],
        env=env, check=True, capture_output=True, text=True).stdout.strip().split(",")
    blas_line = f"OpenBLAS core of the torch path: {chosen} (as loaded)"
    if better and args.blas == "best" and "OPENBLAS_CORETYPE" not in env:
        env["OPENBLAS_CORETYPE"] = better
        blas_line = f"OpenBLAS core of the torch path: {better} (set here; OpenBLAS chose {chosen})"
    rows = []
    memory = {}  # each policy's tensor_memory(), as its worker reported it
    with tempfile.TemporaryDirectory() as tmp:
        for k in [int(r) for r in args.ranks.split(",")]:
            launch = [args.mpiexec, "-n", str(k)]
            metrics = os.path.join(tmp, f"native{k}.jsonl")
            summary = os.path.join(tmp, f"native{k}.json")
            run(launch + [train_gcn, "--dataset", args.dataset, "--epochs", str(args.epochs),
                          "--eval-every", str(args.epochs), "--metrics", metrics, "--quiet",
                          "--summary", summary,
                          "--num-layers", str(MODEL["num_layers"]), "--hidden-channels",
                          str(MODEL["hidden_channels"]), "--dropout", str(MODEL["dropout"]),
                          "--lr", str(MODEL["lr"])], env)
            with open(metrics) as f:
                native = median_after_first([json.loads(line)["epoch_s"] for line in f])
            with open(summary) as f:
                native_peak = json.load(f)["peak_rss_bytes_max"]
            rows.append(("Tessera native (train_gcn)", k, native, native, native_peak))
            # The torch path under each memory policy (malloc_env).
            for policy in args.malloc.split(","):
                out = os.path.join(tmp, f"torch{k}-{policy}.json")
                run(launch + [sys.executable, os.path.abspath(__file__), "--worker", "--dataset",
                              args.dataset, "--epochs", str(args.epochs), "--out", out],
                    malloc_env(env, policy))
                with open(out) as f:
                    result = json.load(f)
                memory[policy] = result["tensor_memory"]
                name = "tessera.torch" + {"default": "", "torch": " (torch's allocator)"}.get(
                    policy, f" (malloc {policy})")
                rows.append((name, k, median_after_first(result["epoch_s"]), native,
                             result["peak_rss_bytes"]))
        if args.pyg_python:
            folder = os.path.join(tmp, "graph")
            run([os.path.join(args.build, "apps", "tessera_data"), "generate", "--preset",
                 args.dataset.split(":")[1], "--out", folder], env)
            metrics = os.path.join(tmp, "pyg.jsonl")
            run([args.pyg_python, os.path.join(HERE, "peers", "peer_gcn.py"), "--framework",
                 "pyg", "--graph-format", "edge_index", "--dataset", folder, "--threads", "1",
                 "--epochs", str(args.pyg_epochs), "--eval-every", str(args.pyg_epochs),
                 "--metrics",
                 metrics, "--summary", os.path.join(tmp, "pyg.json")] +
                sum(([f"--{k.replace('_', '-')}", str(v)] for k, v in MODEL.items()), []), env)
            with open(metrics) as f:
                pyg = median_after_first([json.loads(line)["epoch_s"] for line in f])
            with open(os.path.join(tmp, "pyg.json")) as f:
                pyg_peak = json.load(f).get("peak_rss_bytes", 0)
            native_1 = next((r[2] for r in rows if r[0].startswith("Tessera") and r[1] == 1), None)
            rows.append(("PyG GCNConv (one process)", 1, pyg, native_1, pyg_peak))

    version = subprocess.run([train_gcn, "--version"], check=True, capture_output=True,
                             text=True, env=env).stdout.strip().splitlines()
    print(version[-1])  # the CPU kernels and OpenBLAS's core (torch's OpenBLAS is Debian's too)
    print(blas_line)
    print("torch's large tensors in the torch path: " +
          "; ".join(f"{policy}: {where}" for policy, where in memory.items()))
    print(f"GCN {MODEL['num_layers']}x{MODEL['hidden_channels']} on {args.dataset}, "
          f"{args.epochs} epochs, 1 thread per rank: median training step (epochs 2..)")
    print(f"| {'system':<34} | ranks | step s | vs native | peak RSS MiB (largest rank) |")
    print(f"|{'-' * 36}|-------|--------|-----------|-----------------------------|")
    for name, k, seconds, native, peak in rows:
        ratio = f"{seconds / native:.2f}x" if native else "-"
        peak_text = f"{peak / 2**20:.0f}" if peak else "-"
        print(f"| {name:<34} | {k:>5} | {seconds:6.3f} | {ratio:>9} | {peak_text:>27} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
