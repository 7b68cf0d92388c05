# SPDX-License-Identifier: Apache-2.0
"""What the peer trainers share: flags, threads and seeds, loading, peak RSS from the kernel's
high-water mark, the full-batch training loop, the per-epoch JSON lines (the keys train_gcn's
--metrics uses) and the summary file.
Runs inside the peers' virtual environment (torch, numpy, pandas).
"""
import argparse
import json
import os
import random
import sys
import time

import numpy as np
import torch

import ogb_raw


def common_flags(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--dataset", required=True, help="OGB raw-layout directory")
    p.add_argument("--num-layers", type=int, default=3)
    p.add_argument("--hidden-channels", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, required=True, help="torch intra-op threads")
    p.add_argument("--metrics", required=True, help="one JSON object per epoch")
    p.add_argument("--summary", required=True, help="one JSON object at the end")
    return p


def set_threads_and_seed(threads, seed):
    torch.set_num_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def vm_hwm_bytes():
    """The kernel's peak resident set of this process (VmHWM, the figure getrusage reports)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def vm_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def reset_hwm():
    """Resets VmHWM to the current RSS (Linux >= 4.0); False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakRss:
    """Peak RSS of the whole process and of the training phase alone: the high-water mark is
    read when loading ends, then reset, then read again at the end."""

    def __init__(self, after_import):
        self.after_import = after_import
        self.before_training = 0
        self.training = None

    def start_training(self):
        self.before_training = vm_hwm_bytes()
        if not reset_hwm():
            self.training = None
            return
        self.training = 0

    def finish(self):
        now = vm_hwm_bytes()
        if self.training is not None:
            self.training = now
        return {
            "peak_rss_bytes": max(self.before_training, now),
            "training_peak_rss_bytes": self.training,
            "rss_after_import_bytes": self.after_import,
        }


@torch.no_grad()
def accuracies(logits, y, splits):
    pred = logits.argmax(dim=-1)
    return [float((pred[idx] == y[idx]).float().mean()) if idx.numel() else 0.0 for idx in splits]


class Metrics:
    """Writes train_gcn's metric keys per epoch; accuracies null where not evaluated."""

    def __init__(self, path):
        self.path = path
        self.file = open(path + ".tmp", "w")
        self.best_valid = -1.0
        self.best_epoch = 0
        self.test_at_best = 0.0
        self.last = None

    def write(self, epoch, loss, epoch_s, eval_s, accs):
        line = {"run": 0, "epoch": epoch, "loss": loss, "metric": "acc",
                "train_acc": None, "valid_acc": None, "test_acc": None,
                "epoch_s": epoch_s, "eval_s": eval_s}
        if accs is not None:
            line["train_acc"], line["valid_acc"], line["test_acc"] = accs
            if accs[1] > self.best_valid:
                self.best_valid, self.best_epoch, self.test_at_best = accs[1], epoch, accs[2]
            self.last = accs
        self.file.write(json.dumps(line) + "\n")
        self.file.flush()

    def close(self):
        self.file.close()
        os.replace(self.path + ".tmp", self.path)

    def results(self):
        evaluated = self.last is not None  # a run given up in its first epoch has no figures
        return {"best_valid_acc": self.best_valid if evaluated else None,
                "best_epoch": self.best_epoch,
                "test_acc_at_best_valid": self.test_at_best if evaluated else None,
                "final_train_acc": self.last[0] if self.last else None,
                "final_test_acc": self.last[2] if self.last else None}


def start(args):
    """Records the RSS after the imports, sets threads and seed, loads --dataset. Returns
    (PeakRss, the RawDataset, seconds spent loading)."""
    rss = PeakRss(vm_rss_bytes())
    set_threads_and_seed(args.threads, args.seed)
    clock = time.perf_counter()
    data = ogb_raw.load(args.dataset)
    return rss, data, time.perf_counter() - clock


def labels_and_splits(data):
    """y (N,) and [train, valid, test] node ids as tensors."""
    return (torch.from_numpy(data.y),
            [torch.from_numpy(s) for s in (data.train, data.valid, data.test)])


def evaluate_if_due(args, epoch, model, forward, y, splits):
    """Every --eval-every epochs and at the last (--epochs): train/valid/test accuracy of
    forward()'s logits in eval mode, timed. Returns (accuracies or None, seconds)."""
    if epoch % args.eval_every and epoch != args.epochs:
        return None, 0.0
    clock = time.perf_counter()
    model.eval()
    with torch.no_grad():
        accs = accuracies(forward(), y, splits)
    return accs, time.perf_counter() - clock


def train_full_batch(args, model, forward, optimizer, y, splits, rss):
    """The full-batch loop every full-graph peer runs, after the training phase's RSS record
    starts: per epoch one timed training step (forward, cross-entropy over the training nodes,
    backward, optimizer step; `epoch_s`), then, every --eval-every epochs and at the last, a
    separately timed evaluation of train/valid/test accuracy (`eval_s`). forward() returns the
    logits of every node. Returns the closed Metrics."""
    rss.start_training()
    metrics = Metrics(args.metrics)
    train = splits[0]
    for epoch in range(1, args.epochs + 1):
        clock = time.perf_counter()
        model.train()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward()[train], y[train])
        loss.backward()
        optimizer.step()
        epoch_s = time.perf_counter() - clock
        accs, eval_s = evaluate_if_due(args, epoch, model, forward, y, splits)
        metrics.write(epoch, float(loss), epoch_s, eval_s, accs)
    metrics.close()
    return metrics


def versions(extra):
    import numpy
    import pandas
    out = {"python": sys.version.split()[0], "torch": torch.__version__,
           "numpy": numpy.__version__, "pandas": pandas.__version__,
           "torch_cuda_available": torch.cuda.is_available(),
           "torch_blas": "mkl" if torch.backends.mkl.is_available() else "other"}
    out.update(extra)
    return out


def write_summary(path, summary):
    with open(path + ".tmp", "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
