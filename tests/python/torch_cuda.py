# SPDX-License-Identifier: Apache-2.0
"""tessera.torch on GPUs (one process, or under mpiexec -n K; TESSERA_GPU_COMM=mpi when the ranks
share a GPU): a DistributedGraph with device="cuda" against the same partition on the CPU.

- the part's tensors are CUDA tensors on the rank's GPU, and every result stays there;
- the gcn, mean and sum aggregations, forward and backward, and dropout equal the CPU's (to
  float rounding: cuSPARSE sums in its own order; dropout's masks exactly);
- an aggregation called on a side stream of torch's that is held, then writes the input, reads
  what was written (Tessera orders its work after the caller's stream);
- a 2-layer GCN with batch norm and Tessera's dropout, and a 2-layer SAGE model, trained 10
  epochs from the same initial weights: per-epoch losses equal to the CPU run's to 2e-3
  relative (as the GPU training tests); with the int8 codec the same, and the same bytes sent
  in training;
- a CPU tensor given to a GPU graph, and host arrays given to its extension, are ValueErrors.

Exits 77 (skipped), saying why, when torch has no CUDA, Tessera was built without its CUDA
backend or no GPU is usable; every rank decides alike (they share the machine)."""
import copy
import os
import sys

import numpy as np
import torch

import tessera.torch as tt
import torch_reference as ref

SKIPPED = 77
EPOCHS = 10
GPU_COMM = os.environ.get("TESSERA_GPU_COMM", "nccl")
DATASET = "synth:default"
failures = []


def check(condition, text):
    if not condition:
        failures.append(text)


def gpu_graph(**options):
    """The dataset's part on this rank's GPU, or the reason there is none."""
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} has no usable CUDA"
    try:
        return tt.DistributedGraph(DATASET, device="cuda", gpu_comm=GPU_COMM, **options), None
    except RuntimeError as e:
        if "no CUDA backend" in str(e) or "no usable CUDA GPU" in str(e):
            return None, str(e)
        raise


def pair(**options):
    gpu, reason = gpu_graph(**options)
    if gpu is None:
        raise RuntimeError(reason)
    return gpu, tt.DistributedGraph(DATASET, **options)


def rows_of(graph, width, seed):
    """A (num_local, width) float32 input: each node's row a function of its global id."""
    whole = torch.from_numpy(np.random.default_rng(seed).standard_normal(
        (graph.num_nodes, width)).astype(np.float32))
    return whole[graph.node_ids.cpu()]


def close(gpu_tensor, cpu_tensor, tolerance=1e-5):
    return torch.allclose(gpu_tensor.cpu(), cpu_tensor, atol=tolerance, rtol=tolerance)


def operators_match(gpu, cpu):
    check(gpu.device.type == "cuda", f"graph.device is {gpu.device}")
    for name in ("x", "y", "train_mask", "train_idx", "node_ids"):
        check(getattr(gpu, name).device == gpu.device, f"graph.{name} is not on {gpu.device}")
    check(torch.equal(gpu.node_ids.cpu(), cpu.node_ids), "the GPU graph holds other rows")
    check(torch.equal(gpu.x.cpu(), cpu.x), "the GPU graph's features differ")
    x = rows_of(cpu, 24, 1)
    grad = rows_of(cpu, 24, 2)
    for op in ("gcn", "mean", "sum"):
        x_cpu = x.clone().requires_grad_()
        x_gpu = x.to(gpu.device, copy=True).requires_grad_()
        y_cpu = tt.aggregate(x_cpu, cpu, op, call=0)
        y_gpu = tt.aggregate(x_gpu, gpu, op, call=0)
        check(y_gpu.is_cuda, f"{op}: the result left the GPU")
        check(close(y_gpu.detach(), y_cpu.detach()), f"{op}: forward differs from the CPU's")
        y_cpu.backward(grad)
        y_gpu.backward(grad.to(gpu.device))
        check(close(x_gpu.grad, x_cpu.grad), f"{op}: backward differs from the CPU's")
    for graph in (gpu, cpu):
        graph.set_epoch(3)
    kept_cpu = tt.dropout(x, cpu, 0.4, key=5)
    kept_gpu = tt.dropout(x.to(gpu.device), gpu, 0.4, key=5)
    check(torch.equal(kept_gpu.cpu() == 0, kept_cpu == 0), "dropout: the masks differ")
    check(close(kept_gpu, kept_cpu, 1e-6), "dropout: the kept values differ")


def ordered_after_the_callers_stream(gpu, cpu):
    """A side stream of torch's is held (torch.cuda._sleep, else a chain of products), then
    writes the input over zeros; the aggregation is called at once on that stream. Without the
    ordering it would read the zeros. A first call builds the operator beforehand (its upload
    synchronises)."""
    x = rows_of(cpu, 256, 3)
    expected = tt.aggregate(x, cpu, "gcn", call=0)
    x_gpu = x.to(gpu.device)
    target = torch.zeros_like(x_gpu)
    tt.aggregate(target, gpu, "gcn", call=0)
    side = torch.cuda.Stream(device=gpu.device)
    torch.cuda.synchronize(gpu.device)
    with torch.cuda.stream(side):
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(int(1e9))  # about half a second of GPU clock cycles
        else:
            weight = torch.eye(256, device=gpu.device)
            for _ in range(200):
                x_gpu = x_gpu @ weight
        target.copy_(x_gpu)
        result = tt.aggregate(target, gpu, "gcn", call=0)
    torch.cuda.current_stream(gpu.device).wait_stream(side)
    check(close(result, expected, 1e-4), "an aggregation on a side stream read an unwritten input")


class GcnBnDropout(torch.nn.Module):
    """conv, batch norm, relu, Tessera's dropout, conv."""

    def __init__(self, in_channels, hidden, out_channels):
        super().__init__()
        self.conv1 = tt.GCNConv(in_channels, hidden)
        self.bn = tt.BatchNorm1d(hidden)
        self.conv2 = tt.GCNConv(hidden, out_channels)

    def forward(self, x, graph):
        h = self.bn(self.conv1(x, graph), graph).relu()
        return self.conv2(tt.dropout(h, graph, 0.5, training=self.training), graph)


def train(model, graph):
    return ref.train(model, graph.x, graph.edge_index, graph.y,
                     (graph.train_mask, graph.val_mask), (graph.num_train, graph.num_valid),
                     EPOCHS, ref.cross_entropy_sum, step=graph.set_epoch,
                     reduce=lambda m: tt.all_reduce_gradients(m, graph), total=graph.global_sum)[0]


def relative(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def training_matches(name, make_model, **options):
    gpu, cpu = pair(**options)
    torch.manual_seed(1)
    model = make_model(cpu.num_features, 32, cpu.num_classes)
    tt.broadcast_parameters(model, cpu)
    on_gpu = copy.deepcopy(model).to(gpu.device)
    sent = [graph.bytes_sent for graph in (gpu, cpu)]
    expected = train(model, cpu)
    losses = train(on_gpu, gpu)
    sent = [graph.bytes_sent - before for graph, before in zip((gpu, cpu), sent)]
    gap = relative(losses, expected)
    check(gap <= 2e-3, f"{name}: GPU losses differ from the CPU's by {gap:.2e} relative "
                       f"(limit 2e-3)")
    check(all(p.is_cuda for p in on_gpu.parameters()), f"{name}: a parameter left the GPU")
    if options.get("codec"):
        check(sent[0] == sent[1],
              f"{name}: {sent[0]} bytes sent in training on the GPU, {sent[1]} on the CPU")
    if cpu.rank == 0:
        print(f"{name} at {cpu.size} ranks on {gpu.device}: largest relative loss difference "
              f"{gap:.2e} over {EPOCHS} epochs")


def bad_inputs_are_value_errors(gpu):
    cases = [
        (lambda: tt.aggregate(torch.zeros(gpu.num_local, 4), gpu),
         f"x: the tensor is on cpu, the graph's rows on {gpu.device}"),
        (lambda: gpu._core.aggregate("gcn", np.zeros((gpu.num_local, 4), np.float32),
                                     np.ones((gpu.num_local, 4), np.float32), 0),
         f"is not memory of {gpu.device}"),
    ]
    for call, text in cases:
        try:
            call()
            failures.append(f"no ValueError for: {text}")
        except ValueError as e:
            check(text in str(e), f"ValueError without '{text}': {e}")


def main():
    probe, reason = gpu_graph()
    if probe is None:
        print(f"skipped: {reason}")
        return SKIPPED
    torch.backends.cuda.matmul.allow_tf32 = False  # the identity products stay exact
    print(f"rank {probe.rank} of {probe.size}: {probe.device} "
          f"({torch.cuda.get_device_name(probe.device)}), gpu_comm {GPU_COMM}")
    operators_match(*pair(num_layers=1))
    ordered_after_the_callers_stream(*pair(num_layers=1))
    bad_inputs_are_value_errors(probe)
    training_matches("gcn + batch norm + dropout", GcnBnDropout)
    training_matches("sage", lambda i, h, o: ref.Net(tt.SAGEConv, i, h, o))
    training_matches("gcn + batch norm + dropout, int8", GcnBnDropout, codec="int8",
                     codec_backward="int8")
    for text in failures:
        print(f"rank {probe.rank}: FAILED: {text}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
