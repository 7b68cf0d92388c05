# SPDX-License-Identifier: Apache-2.0
"""tessera.torch at K ranks (run on one process, or under mpiexec -n K) against the single-process
reference (torch_reference.py: PyG's layers when installed, plain torch otherwise):

- gradcheck of the gcn, mean and sum aggregations and of dropout over the whole (replicated)
  input; dropout masks that follow the nodes, whatever the partition;
- a hand-written 2-layer GCN with tessera.torch.GCNConv, 30 epochs on Cora from the same initial
  weights, dropout off: every epoch's loss equal to the reference's to 1e-5 relative; the same
  with SAGEConv;
- the int8 codec (forward and backward) stays within its bar: losses within 2% of the exact
  run's and validation accuracy within 2 points;
- tessera.torch.BatchNorm1d (statistics over every rank's rows) against torch's on one process;
- a custom loss (label smoothing) with early stopping stops at the reference's epoch.
Every rank checks and exits non-zero on a mismatch (all of them see the same global values)."""
import sys

import numpy as np
import torch

import tessera.torch as tt
import torch_reference as ref

torch.set_num_threads(1)
EPOCHS = 30
failures = []


def check(condition, text):
    if not condition:
        failures.append(text)


def distributed_gradcheck():
    """The aggregation as a function of the whole graph's input X (the same on every rank): each
    rank aggregates its rows of X, and the rows are summed back into one (N, F) output. Gather's
    backward and Scatter's forward all-reduce, so every rank computes the full Jacobian with the
    same calls in the same order; gradcheck then compares backward with finite differences."""
    n, f = 48, 3
    rng = np.random.default_rng(5)
    src = rng.integers(0, n, 150)
    dst = rng.integers(0, n, 150)
    graph = tt.DistributedGraph(torch.from_numpy(np.stack([src, dst])),
                                x=np.zeros((n, 1), np.float32), y=np.arange(n) % 2,
                                train_idx=np.arange(n), num_layers=1)
    ids = graph.node_ids

    class Gather(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[ids].clone()

        @staticmethod
        def backward(ctx, grad):
            full = torch.zeros((n, grad.shape[1]), dtype=grad.dtype)
            full[ids] = grad
            return graph.all_reduce_(full)

    class Scatter(torch.autograd.Function):
        @staticmethod
        def forward(ctx, rows):
            full = torch.zeros((n, rows.shape[1]), dtype=rows.dtype)
            full[ids] = rows
            return graph.all_reduce_(full)

        @staticmethod
        def backward(ctx, grad):
            return grad[ids].clone()

    x = torch.from_numpy(rng.standard_normal((n, f))).requires_grad_()
    ops = ref.operators(graph_edges(src, dst), n)
    for op in ("gcn", "mean", "sum"):
        def fn(whole):
            return Scatter.apply(tt.aggregate(Gather.apply(whole), graph, op, call=0))
        ok = torch.autograd.gradcheck(fn, (x,), eps=1e-3, atol=1e-4, rtol=1e-3,
                                      raise_exception=False)
        check(ok, f"gradcheck of {op} at {graph.size} ranks")
        expected = torch.sparse.mm(ops[op], x.detach().float())
        check(torch.allclose(fn(x).float(), expected, atol=1e-5), f"{op} forward vs reference")
    # Every rank's rows carry their degree in the whole graph (improved GCN's normalisation).
    degrees = ops["sum"].to_dense().sum(1)[ids]
    check(torch.equal(torch.from_numpy(graph._core.degrees()), degrees),
          f"degrees at {graph.size} ranks")
    graph.set_epoch(2)
    ok = torch.autograd.gradcheck(
        lambda whole: Scatter.apply(tt.dropout(Gather.apply(whole), graph, 0.3, key=1)), (x,),
        eps=1e-3, atol=1e-4, rtol=1e-3, raise_exception=False)
    check(ok, f"gradcheck of dropout at {graph.size} ranks")


def dropout_masks_follow_the_nodes(data):
    """A node's dropout mask is the same whichever rank holds it: the whole graph's mask, put
    together from two different partitions, is one; it keeps 1 - p of the entries, scaled."""
    whole = {}
    for method in ("metis", "random"):
        graph = tt.DistributedGraph(data, partition=method)
        graph.set_epoch(3)
        rows = tt.dropout(torch.ones(graph.num_local, 8), graph, 0.25, key=2)
        full = torch.zeros(data.num_nodes, 8)
        full[graph.node_ids] = rows
        whole[method] = graph.all_reduce_(full)
    check(torch.equal(whole["metis"], whole["random"]), "dropout masks depend on the partition")
    kept = (whole["metis"] != 0).double().mean().item()
    check(abs(kept - 0.75) < 0.01, f"dropout kept {kept:.3f} of the entries, expected 0.75")
    scale = torch.tensor(1.0 / 0.75, dtype=torch.float32).item()
    check(set(whole["metis"].unique().tolist()) == {0.0, scale}, "dropout scale")
    again = tt.DistributedGraph(data, partition="metis")
    again.set_epoch(4)
    other = tt.dropout(torch.ones(again.num_local, 8), again, 0.25, key=2)
    check(not torch.equal(other, whole["metis"][again.node_ids]), "the epoch keys no new mask")


def graph_edges(src, dst):
    return torch.from_numpy(np.stack([src, dst]))


def train_both(conv_name, data, ops, loss_sum=ref.cross_entropy_sum, patience=None,
               epochs=EPOCHS, batch_norm=False, **graph_options):
    """The same model, initial weights and loop: on the DistributedGraph with tessera.torch's
    conv, and on one process with the reference's. Returns both (losses, accuracies, stop)."""
    graph = tt.DistributedGraph(data, **graph_options)
    ours = {"gcn": tt.GCNConv, "sage": tt.SAGEConv}[conv_name]
    gcn, sage, takes_edge_index, _ = ref.reference_convs()
    theirs = {"gcn": gcn, "sage": sage}[conv_name]
    torch.manual_seed(1)
    if batch_norm:
        model = ref.NetBN(ours, tt.BatchNorm1d, data.x.shape[1], 16, 7)
        reference = ref.NetBN(theirs, ref.RefBatchNorm1d, data.x.shape[1], 16, 7)
    else:
        model = ref.Net(ours, data.x.shape[1], 16, 7)
        reference = ref.Net(theirs, data.x.shape[1], 16, 7)
    tt.broadcast_parameters(model, graph)
    reference.load_state_dict(model.state_dict())

    tessera_run = ref.train(
        model, graph.x, graph.edge_index, graph.y, (graph.train_mask, graph.val_mask),
        (graph.num_train, graph.num_valid), epochs, loss_sum, step=graph.set_epoch,
        reduce=lambda m: tt.all_reduce_gradients(m, graph), total=graph.global_sum,
        patience=patience)
    counts = (int(data.train_mask.sum()), int(data.val_mask.sum()))
    reference_run = ref.train(
        reference, data.x, data.edge_index if takes_edge_index else ops, data.y,
        (data.train_mask, data.val_mask), counts, epochs, loss_sum, patience=patience)
    return graph, tessera_run, reference_run


def relative(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def main():
    distributed_gradcheck()
    data = ref.CoraData()
    dropout_masks_follow_the_nodes(data)
    ops = ref.operators(data.edge_index, data.num_nodes)
    _, _, _, reference_name = ref.reference_convs()
    for conv in ("gcn", "sage"):
        graph, (losses, _, _), (expected, _, _) = train_both(conv, data, ops)
        gap = relative(losses, expected)
        check(gap <= 1e-5, f"{conv}: per-epoch losses differ from {reference_name}'s by {gap:.2e} "
                           f"relative (limit 1e-5)")
        if graph.rank == 0:
            print(f"{conv} at {graph.size} ranks vs {reference_name}: largest relative loss "
                  f"difference {gap:.2e} over {EPOCHS} epochs")

    # Batch norm with the statistics of every rank's rows, against torch's on one process.
    graph, (losses, _, _), (expected, _, _) = train_both("gcn", data, ops, batch_norm=True)
    gap = relative(losses, expected)
    check(gap <= 1e-5, f"gcn + BatchNorm1d: losses differ by {gap:.2e} relative (limit 1e-5)")
    if graph.rank == 0:
        print(f"gcn + BatchNorm1d at {graph.size} ranks: largest relative loss difference "
              f"{gap:.2e}")

    graph, (coded, coded_acc, _), (exact, exact_acc, _) = train_both(
        "gcn", data, ops, epochs=60, codec="int8", codec_backward="int8")
    gap = relative(coded, exact)
    check(gap <= 0.02, f"int8: losses {gap:.3f} relative from the exact run's (bar 0.02)")
    check(abs(coded_acc[-1] - exact_acc[-1]) <= 0.02,
          f"int8: validation accuracy {coded_acc[-1]:.3f} vs {exact_acc[-1]:.3f} (bar 0.02)")
    check(graph.size == 1 or graph.bytes_sent > 0, "int8: no halo traffic at several ranks")

    graph, (losses, acc, stop), (expected, expected_acc, expected_stop) = train_both(
        "gcn", data, ops, loss_sum=ref.smoothed_loss_sum, patience=5, epochs=200)
    check(stop == expected_stop, f"early stopping at epoch {stop}, reference {expected_stop}")
    check(stop < 199, "early stopping never stopped")
    check(relative(losses, expected) <= 1e-5, "custom loss: losses differ from the reference's")
    if graph.rank == 0:
        print(f"custom loss + early stopping: stopped at epoch {stop} (reference {expected_stop})"
              f"; int8 loss gap {gap:.4f}")
    for text in failures:
        print(f"rank {graph.rank}: FAILED: {text}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
