# SPDX-License-Identifier: Apache-2.0
"""Full-batch GCN in PyTorch Geometric or DGL, written as each library's own examples write it
(the OGB ogbn-arxiv GCN without batch norm: GCNConv(cached=True) on the symmetrised graph, or
DGL's GraphConv(norm='both') on the bidirected graph with self loops), with train_gcn's
hyperparameters and its --metrics/--summary keys. Runs inside the peers' virtual environment.

  python peer_gcn.py --framework pyg|dgl --dataset DIR --threads T --metrics F --summary F
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common  # noqa: E402


class PygGCN(torch.nn.Module):
    """L GCNConv layers; ReLU and dropout after every hidden one."""

    def __init__(self, f_in, hidden, classes, layers, dropout):
        super().__init__()
        from torch_geometric.nn import GCNConv
        widths = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = torch.nn.ModuleList(
            GCNConv(a, b, cached=True) for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout

    def forward(self, x, adj):
        for conv in self.convs[:-1]:
            x = F.dropout(F.relu(conv(x, adj)), p=self.dropout, training=self.training)
        return self.convs[-1](x, adj)


class DglGCN(torch.nn.Module):
    def __init__(self, f_in, hidden, classes, layers, dropout):
        super().__init__()
        from dgl.nn import GraphConv
        widths = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = torch.nn.ModuleList(
            GraphConv(a, b, norm="both") for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout

    def forward(self, x, graph):
        for conv in self.convs[:-1]:
            x = F.dropout(F.relu(conv(graph, x)), p=self.dropout, training=self.training)
        return self.convs[-1](graph, x)


def pyg_graph(data, graph_format):
    """The symmetrised graph as GCNConv takes it; GCNConv adds the self loops."""
    edge_index = torch.from_numpy(data.edge_index)
    n = data.num_nodes
    if graph_format == "sparse":
        from torch_sparse import SparseTensor
        # As T.ToSparseTensor() and adj_t.to_symmetric() in OGB's ogbn-arxiv example.
        adj = SparseTensor(row=edge_index[1], col=edge_index[0], sparse_sizes=(n, n))
        return adj.to_symmetric()
    from torch_geometric.utils import to_undirected
    return to_undirected(edge_index, num_nodes=n)


def pyg_operator_nnz(model):
    conv = model.convs[0]
    if conv._cached_adj_t is not None:
        return int(conv._cached_adj_t.nnz())
    return int(conv._cached_edge_index[0].size(1))


def dgl_graph(data):
    import dgl
    edge_index = torch.from_numpy(data.edge_index)
    g = dgl.graph((edge_index[0], edge_index[1]), num_nodes=data.num_nodes)
    g = dgl.to_bidirected(g)  # both directions, duplicates merged
    return dgl.add_self_loop(dgl.remove_self_loop(g))


def main():
    flags = peer_common.common_flags(__doc__.splitlines()[0])
    flags.add_argument("--framework", choices=["pyg", "dgl"], required=True)
    flags.add_argument("--graph-format", choices=["sparse", "edge_index"], default="sparse",
                       help="pyg: torch_sparse SparseTensor adj_t (OGB's example) or edge_index")
    args = flags.parse_args()
    if args.framework == "pyg":
        import torch_geometric
        extra = {"torch_geometric": torch_geometric.__version__}
        if args.graph_format == "sparse":
            import torch_sparse
            extra["torch_sparse"] = torch_sparse.__version__
    else:
        import dgl
        extra = {"dgl": dgl.__version__}
    rss, data, load_s = peer_common.start(args)

    clock = time.perf_counter()
    if args.framework == "pyg":
        graph = pyg_graph(data, args.graph_format)
        model = PygGCN(data.x.shape[1], args.hidden_channels, data.num_classes,
                       args.num_layers, args.dropout)
    else:
        graph = dgl_graph(data)
        model = DglGCN(data.x.shape[1], args.hidden_channels, data.num_classes,
                       args.num_layers, args.dropout)
    x = torch.from_numpy(data.x)
    y, splits = peer_common.labels_and_splits(data)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    setup_s = time.perf_counter() - clock
    del data
    metrics = peer_common.train_full_batch(args, model, lambda: model(x, graph), optimizer, y,
                                           splits, rss)

    summary = {"framework": args.framework, "model": "gcn",
               "graph_format": args.graph_format if args.framework == "pyg" else "dglgraph",
               "versions": peer_common.versions(extra), "threads": torch.get_num_threads(),
               "dataset": args.dataset, "nodes": int(x.shape[0]), "features": int(x.shape[1]),
               "num_layers": args.num_layers, "hidden_channels": args.hidden_channels,
               "dropout": args.dropout, "lr": args.lr, "epochs": args.epochs,
               "seed": args.seed, "load_s": load_s, "setup_s": setup_s,
               "operator_nnz": (pyg_operator_nnz(model) if args.framework == "pyg"
                                else int(graph.num_edges()))}
    summary.update(metrics.results())
    summary.update(rss.finish())
    peer_common.write_summary(args.summary, summary)


if __name__ == "__main__":
    main()
