# SPDX-License-Identifier: Apache-2.0
"""A PyTorch Geometric full-graph training script of the ogbn-arxiv kind (GCN with batch norm
and dropout, Adam, best validation epoch reported per run), converted to Tessera. Every change
from the PyG script is marked `# tessera:`. Runs on one process or on K ranks:

    PYTHONPATH=build/python mpiexec -n 4 python3 examples/torch/arxiv_gcn.py --epochs 50

--dataset takes an OGB raw-layout folder (e.g. ogbn_arxiv as OGB downloads it), a Tessera .h5
file, or synth:arxiv-like (the default: generated, with arxiv's shape). --device cuda puts
each rank's part and the model on its GPU (in a build with the CUDA backend).
"""
import argparse
import time

import torch
import torch.nn.functional as F

import tessera.torch as tt  # tessera: instead of torch_geometric.nn and its datasets


class GCN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers, dropout):
        super().__init__()
        self.convs = torch.nn.ModuleList()
        self.bns = torch.nn.ModuleList()
        self.convs.append(tt.GCNConv(in_channels, hidden_channels))  # tessera: tt.GCNConv
        for _ in range(num_layers - 2):
            self.convs.append(tt.GCNConv(hidden_channels, hidden_channels))
        for _ in range(num_layers - 1):
            self.bns.append(tt.BatchNorm1d(hidden_channels))  # tessera: over every rank's rows
        self.convs.append(tt.GCNConv(hidden_channels, out_channels))
        self.dropout = dropout

    def reset_parameters(self):
        for module in list(self.convs) + list(self.bns):
            module.reset_parameters()

    def forward(self, x, graph):
        for conv, bn in zip(self.convs[:-1], self.bns):
            x = F.relu(bn(conv(x, graph), graph))  # tessera: bn takes the graph
            # tessera: Tessera's dropout (masks by global node id: alike at any rank count)
            x = tt.dropout(x, graph, p=self.dropout, training=self.training)
        return self.convs[-1](x, graph).log_softmax(dim=-1)


def train(model, graph, optimizer):
    model.train()
    optimizer.zero_grad()
    out = model(graph.x, graph.edge_index)
    idx = graph.train_idx
    # tessera: this rank's rows summed, over the global count: the single-process mean loss
    loss = F.nll_loss(out[idx], graph.y[idx], reduction="sum") / graph.num_train
    loss.backward()
    tt.all_reduce_gradients(model, graph)  # tessera: gradients summed over ranks
    optimizer.step()
    return graph.global_sum(loss)


@torch.no_grad()
def test(model, graph):
    model.eval()
    pred = model(graph.x, graph.edge_index).argmax(dim=-1)
    # tessera: accuracy from correct counts summed over ranks (OGB's Evaluator on one process)
    return [graph.global_sum((pred[idx] == graph.y[idx]).sum()) / total
            for idx, total in ((graph.train_idx, graph.num_train),
                               (graph.valid_idx, graph.num_valid),
                               (graph.test_idx, graph.num_test))]


def main():
    parser = argparse.ArgumentParser(description="GCN on an ogbn-arxiv-like graph")
    parser.add_argument("--dataset", default="synth:arxiv-like")
    parser.add_argument("--num_layers", type=int, default=3)
    parser.add_argument("--hidden_channels", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--epochs", type=int, default=500)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--log_steps", type=int, default=10)
    parser.add_argument("--codec", default="none", help="halo messages: none, bf16, int8, ...")
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda (each rank its GPU: the local rank modulo the visible "
                             "ones) or cuda:N")
    parser.add_argument("--gpu_comm", default="nccl",
                        help="nccl, or mpi when ranks share a GPU (through host memory)")
    args = parser.parse_args()

    # tessera: this rank's part of the graph (METIS), instead of the whole Data on one device;
    # num_layers = aggregations per forward pass
    graph = tt.DistributedGraph(args.dataset, num_layers=args.num_layers, codec=args.codec,
                                device=args.device, gpu_comm=args.gpu_comm)
    torch.manual_seed(0)
    model = GCN(graph.num_features, args.hidden_channels, graph.num_classes, args.num_layers,
                args.dropout).to(graph.device)  # tessera: the rank's device
    torch.set_num_threads(1)
    if graph.rank == 0:
        print(f"{graph.size} rank(s); rank 0 holds {graph.num_local} of {graph.num_nodes} nodes")
    for run in range(args.runs):
        model.reset_parameters()
        tt.broadcast_parameters(model, graph)  # tessera: every rank starts from rank 0's weights
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        best_valid, final_test, start = 0.0, 0.0, time.perf_counter()
        for epoch in range(1, args.epochs + 1):
            graph.set_epoch(epoch)  # tessera: keys the codecs' rounding
            loss = train(model, graph, optimizer)
            train_acc, valid_acc, test_acc = test(model, graph)
            if valid_acc > best_valid:
                best_valid, final_test = valid_acc, test_acc
            if graph.rank == 0 and epoch % args.log_steps == 0:
                print(f"Run: {run + 1:02d}, Epoch: {epoch:02d}, Loss: {loss:.4f}, "
                      f"Train: {100 * train_acc:.2f}%, Valid: {100 * valid_acc:.2f}% "
                      f"Test: {100 * test_acc:.2f}%")
        if graph.rank == 0:
            seconds = (time.perf_counter() - start) / args.epochs
            print(f"Run {run + 1:02d}: Highest Valid: {100 * best_valid:.2f}%, Final Test: "
                  f"{100 * final_test:.2f}% ({seconds:.3f} s per epoch)")


if __name__ == "__main__":
    main()
