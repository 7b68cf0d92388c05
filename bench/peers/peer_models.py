# SPDX-License-Identifier: Apache-2.0
"""Full-batch GAT and GCNII in PyTorch Geometric, written as PyG's own examples write them
(examples/gat.py: GATConv layers with ELU between them; examples/gcn2_cora.py: Linear, ReLU,
GCN2Conv layers on the GCN-normalised graph, Linear), with train_gcn's hyperparameters and its
--metrics/--summary keys. Runs inside the peers' virtual environment (torch, torch-geometric).

  python peer_models.py --model gat|gcnii --dataset DIR --threads T --metrics F --summary F
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common  # noqa: E402
from peer_gcn import pyg_graph  # noqa: E402


class PygGAT(torch.nn.Module):
    """L GATConv layers: the hidden ones concatenate `heads` heads of hidden/heads channels, the
    output one averages `output_heads`; dropout on every layer's input (`input_dropout` on the
    features), `attention_dropout` on the attention weights, ELU between layers."""

    def __init__(self, f_in, hidden, classes, layers, heads, output_heads, dropout,
                 input_dropout, attention_dropout):
        super().__init__()
        from torch_geometric.nn import GATConv
        if hidden % heads:
            raise ValueError(f"--hidden-channels {hidden} is not a multiple of --heads {heads}")
        widths = [f_in] + [hidden] * (layers - 1)
        self.convs = torch.nn.ModuleList(
            GATConv(a, hidden // heads, heads=heads, dropout=attention_dropout)
            for a in widths[:-1])
        self.convs.append(GATConv(widths[-1], classes, heads=output_heads, concat=False,
                                  dropout=attention_dropout))
        self.dropouts = [input_dropout] + [dropout] * (layers - 1)

    def forward(self, x, edge_index):
        for i, (conv, p) in enumerate(zip(self.convs, self.dropouts)):
            x = conv(F.dropout(x, p=p, training=self.training), edge_index)
            if i + 1 < len(self.convs):
                x = F.elu(x)
        return x


class PygGCNII(torch.nn.Module):
    """Linear -> ReLU (h0), then `layers - 2` GCN2Conv layers (alpha, theta = lambda, layer l,
    one shared weight) each followed by ReLU, then Linear; dropout on every layer's input
    (`input_dropout` on the features), never on h0 itself."""

    def __init__(self, f_in, hidden, classes, layers, alpha, theta, dropout, input_dropout):
        super().__init__()
        from torch_geometric.nn import GCN2Conv
        self.lins = torch.nn.ModuleList([torch.nn.Linear(f_in, hidden),
                                         torch.nn.Linear(hidden, classes)])
        # normalize=False: the graph comes GCN-normalised once, as the example's T.GCNNorm().
        self.convs = torch.nn.ModuleList(
            GCN2Conv(hidden, alpha, theta, layer=l + 1, shared_weights=True, normalize=False)
            for l in range(layers - 2))
        self.dropout = dropout
        self.input_dropout = input_dropout

    def forward(self, x, graph):
        edge_index, edge_weight = graph
        x = F.dropout(x, p=self.input_dropout, training=self.training)
        x = x_0 = self.lins[0](x).relu()
        for conv in self.convs:
            x = F.dropout(x, p=self.dropout, training=self.training)
            x = conv(x, x_0, edge_index, edge_weight).relu()
        x = F.dropout(x, p=self.dropout, training=self.training)
        return self.lins[1](x)


def row_normalize(x):
    """Each feature row divided by its sum (rows that sum to 0 left alone), as
    train_gcn --normalize-features."""
    sums = x.sum(dim=1, keepdim=True)
    return torch.where(sums != 0, x / torch.where(sums != 0, sums, 1.0), x)


def param_groups(model, args):
    """Adam's decay as train_gcn applies it: weights and attention vectors at --weight-decay,
    GCNII's dense layers' weights at --dense-weight-decay (-1: --weight-decay), biases never."""
    dense_wd = args.weight_decay if args.dense_weight_decay < 0 else args.dense_weight_decay
    groups = {"conv": [], "dense": [], "bias": []}
    for name, p in model.named_parameters():
        kind = "bias" if name.endswith("bias") else ("dense" if name.startswith("lins.")
                                                     else "conv")
        groups[kind].append(p)
    decay = {"conv": args.weight_decay, "dense": dense_wd, "bias": 0.0}
    return [{"params": ps, "weight_decay": decay[k]} for k, ps in groups.items() if ps]


def build(args, data):
    """The model and the graph it takes; the operator's entry count (self loops included)."""
    edge_index = pyg_graph(data, "edge_index")  # symmetrised, duplicates merged
    f_in, classes = data.x.shape[1], data.num_classes
    if args.model == "gat":
        model = PygGAT(f_in, args.hidden_channels, classes, args.num_layers, args.heads,
                       args.output_heads, args.dropout, args.input_dropout,
                       args.attention_dropout)
        # GATConv removes and re-adds self loops on every call; count them once here.
        from torch_geometric.utils import add_remaining_self_loops
        nnz = int(add_remaining_self_loops(edge_index, num_nodes=data.num_nodes)[0].size(1))
        return model, edge_index, nnz
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    graph = gcn_norm(edge_index, None, data.num_nodes, add_self_loops=True)
    model = PygGCNII(f_in, args.hidden_channels, classes, args.num_layers, args.gcnii_alpha,
                     args.gcnii_lambda, args.dropout, args.input_dropout)
    return model, graph, int(graph[0].size(1))


def flags():
    p = peer_common.common_flags(__doc__.splitlines()[0])
    p.add_argument("--model", choices=["gat", "gcnii"], required=True)
    p.add_argument("--input-dropout", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--dense-weight-decay", type=float, default=-1.0)
    p.add_argument("--normalize-features", action="store_true")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--output-heads", type=int, default=1)
    p.add_argument("--attention-dropout", type=float, default=0.0)
    p.add_argument("--gcnii-alpha", type=float, default=0.1)
    p.add_argument("--gcnii-lambda", type=float, default=0.5)
    return p


def main():
    args = flags().parse_args()
    import torch_geometric
    rss, data, load_s = peer_common.start(args)

    clock = time.perf_counter()
    model, graph, nnz = build(args, data)
    x = torch.from_numpy(data.x)
    if args.normalize_features:
        x = row_normalize(x)
    y, splits = peer_common.labels_and_splits(data)
    optimizer = torch.optim.Adam(param_groups(model, args), lr=args.lr)
    setup_s = time.perf_counter() - clock
    del data
    metrics = peer_common.train_full_batch(args, model, lambda: model(x, graph), optimizer, y,
                                           splits, rss)

    summary = {"framework": "pyg", "model": args.model, "graph_format": "edge_index",
               "versions": peer_common.versions({"torch_geometric": torch_geometric.__version__}),
               "threads": torch.get_num_threads(), "load_s": load_s, "setup_s": setup_s,
               "nodes": int(x.shape[0]), "features": int(x.shape[1]), "operator_nnz": nnz,
               "parameters": sum(p.numel() for p in model.parameters())}
    summary.update({k: v for k, v in vars(args).items() if k not in ("metrics", "summary")})
    summary.update(metrics.results())
    summary.update(rss.finish())
    peer_common.write_summary(args.summary, summary)


if __name__ == "__main__":
    main()
