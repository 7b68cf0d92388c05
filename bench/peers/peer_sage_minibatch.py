# SPDX-License-Identifier: Apache-2.0
"""Mini-batch GraphSAGE in PyTorch Geometric as its ogbn-products example trains it:
NeighborLoader over the training nodes (fan-outs 15,10,5, batch 1024, shuffled, sampling in the
training process), SAGEConv with mean aggregation, Adam; after every epoch a full-graph forward
gives train/valid/test accuracy (timed as eval_s); --stop-at-valid ends training after the first
evaluation that reaches it (time to accuracy), and --give-up-after ends it after the first
evaluation past that many seconds since the script started below the target (a sweep's run that
can no longer beat the best so far). Writes train_gcn's --metrics/--summary keys.
NeighborLoader needs torch-sparse (or pyg-lib) for its sampler. Runs inside the peers' venv.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ogb_raw  # noqa: E402
import peer_common  # noqa: E402


class SAGE(torch.nn.Module):
    def __init__(self, f_in, hidden, classes, layers, dropout):
        super().__init__()
        from torch_geometric.nn import SAGEConv
        widths = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = torch.nn.ModuleList(SAGEConv(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout

    def forward(self, x, adj):
        for conv in self.convs[:-1]:
            x = F.dropout(F.relu(conv(x, adj)), p=self.dropout, training=self.training)
        return self.convs[-1](x, adj)


def main():
    started = time.perf_counter()
    flags = peer_common.common_flags(__doc__.splitlines()[0])
    flags.add_argument("--fanouts", default="15,10,5", help="neighbours sampled per layer")
    flags.add_argument("--batch-size", type=int, default=1024)
    flags.add_argument("--stop-at-valid", type=float, default=None,
                       help="stop after the first evaluation with valid accuracy >= this")
    flags.add_argument("--give-up-after", type=float, default=None,
                       help="stop once more than this many seconds have passed since the script "
                       "started without an evaluation at --stop-at-valid: checked after every "
                       "step and every evaluation (a later evaluation could only end later)")
    flags.set_defaults(lr=0.003, epochs=10)
    args = flags.parse_args()
    import torch_geometric
    import torch_sparse
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.utils import to_undirected
    from torch_sparse import SparseTensor
    rss = peer_common.PeakRss(peer_common.vm_rss_bytes())
    peer_common.set_threads_and_seed(args.threads, args.seed)
    fanouts = [int(v) for v in args.fanouts.split(",")]
    if len(fanouts) != args.num_layers:
        flags.error(f"--fanouts {args.fanouts}: expected {args.num_layers} values")

    clock = time.perf_counter()
    raw = ogb_raw.load(args.dataset)
    load_s = time.perf_counter() - clock

    clock = time.perf_counter()
    n = raw.num_nodes
    edge_index = to_undirected(torch.from_numpy(raw.edge_index), num_nodes=n)
    data = Data(x=torch.from_numpy(raw.x), y=torch.from_numpy(raw.y), edge_index=edge_index)
    splits = [torch.from_numpy(s) for s in (raw.train, raw.valid, raw.test)]
    del raw
    loader = NeighborLoader(data, num_neighbors=fanouts, batch_size=args.batch_size,
                            input_nodes=splits[0], shuffle=True, num_workers=0)
    adj_t = SparseTensor(row=edge_index[1], col=edge_index[0], sparse_sizes=(n, n))
    model = SAGE(data.num_features, args.hidden_channels, int(data.y.max()) + 1,
                 args.num_layers, args.dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    setup_s = time.perf_counter() - clock
    rss.start_training()

    metrics = peer_common.Metrics(args.metrics)
    batches, stopped = 0, "epochs"

    def past_give_up():
        return args.give_up_after is not None and \
            time.perf_counter() - started > args.give_up_after

    for epoch in range(1, args.epochs + 1):
        clock = time.perf_counter()
        model.train()
        total_loss, total_examples = 0.0, 0
        for batch in loader:
            if past_give_up():
                stopped = "gave_up"  # mid-epoch: the epoch is not recorded
                break
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
            loss.backward()
            optimizer.step()
            total_loss += float(loss) * batch.batch_size
            total_examples += batch.batch_size
            batches += 1
        if stopped == "gave_up":
            epoch -= 1
            break
        epoch_s = time.perf_counter() - clock
        accs, eval_s = peer_common.evaluate_if_due(args, epoch, model,
                                                   lambda: model(data.x, adj_t), data.y, splits)
        metrics.write(epoch, total_loss / total_examples, epoch_s, eval_s, accs)
        if accs is not None and args.stop_at_valid is not None and accs[1] >= args.stop_at_valid:
            stopped = "target"
            break
        if accs is not None and past_give_up():
            stopped = "gave_up"
            break
    metrics.close()

    summary = {"framework": "pyg", "model": "sage-minibatch",
               "versions": peer_common.versions({"torch_geometric": torch_geometric.__version__,
                                                 "torch_sparse": torch_sparse.__version__}),
               "threads": torch.get_num_threads(), "dataset": args.dataset, "nodes": n,
               "features": int(data.num_features), "num_layers": args.num_layers,
               "hidden_channels": args.hidden_channels, "dropout": args.dropout, "lr": args.lr,
               "epochs": args.epochs, "epochs_run": epoch, "stop_at_valid": args.stop_at_valid,
               "give_up_after": args.give_up_after, "stopped": stopped,
               "seed": args.seed, "fanouts": fanouts,
               "batch_size": args.batch_size, "batches": batches, "num_workers": 0,
               "load_s": load_s, "setup_s": setup_s, "operator_nnz": int(adj_t.nnz())}
    summary.update(metrics.results())
    summary.update(rss.finish())
    peer_common.write_summary(args.summary, summary)


if __name__ == "__main__":
    main()
