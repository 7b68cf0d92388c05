# SPDX-License-Identifier: Apache-2.0
"""tessera.torch: a PyTorch GNN of one's own on K ranks, full graph, with Tessera's METIS
partitioning, halo exchange (overlapped with the SpMM, any fixed codec) and its backward.

Every rank runs the same script (mpiexec -n K python3 train.py). A DistributedGraph holds this
rank's part: its rows' features `x`, labels `y`, split masks and ids, their global `node_ids`,
and the graph operators. The layers GCNConv and SAGEConv take PyG's constructor arguments and
keep PyG's parameter names and layouts, so a PyG model moves by changing its imports and passing
`graph.edge_index` (which is the graph itself) where PyG takes the edge index:

    import tessera.torch as tt
    graph = tt.DistributedGraph(data)          # a PyG Data, on every rank
    model = GCN(...)                           # built from tt.GCNConv instead of PyG's
    tt.broadcast_parameters(model, graph)      # rank 0's initial weights everywhere
    out = model(graph.x, graph.edge_index)     # this rank's rows
    loss = F.cross_entropy(out[graph.train_mask], graph.y[graph.train_mask],
                           reduction="sum") / graph.num_train
    loss.backward()
    tt.all_reduce_gradients(model, graph)      # then any optimizer, unchanged

With the loss a sum over this rank's rows divided by the global count (graph.num_train), the
reduced gradients are those of the single-process loss; on one rank this is PyG's model.
Aggregation reads and writes the caller's float32 tensors in place (their memory is handed to
C++ without a copy, the GIL released while it runs); tensors of another floating dtype are
converted to float32 for the aggregation and back.

In a build with the CUDA backend, DistributedGraph(..., device="cuda") puts this rank's part on
its GPU (the local rank modulo the visible GPUs, as train_gcn binds its ranks; "cuda:i" names
one): graph.x, graph.y, the masks and ids are CUDA tensors, the model moves with
model.to(graph.device), and the aggregations and dropouts run on the GPU, ordered after the
work torch queued on its current stream, with the halo rows moved between the ranks' GPUs
(NCCL, or gpu_comm="mpi" through host memory, so that ranks may share a GPU). Gradients are
summed over the ranks through host memory.
"""
import ctypes
import glob
import importlib
import os

import numpy as np
import torch

from tessera import _convert
from tessera import Graph as _make_graph
from tessera._core import DistributedGraph as _CoreGraph
from tessera._core import empty_rows as _empty_rows
from tessera._core import release_cached_rows as _release_cached_rows

__all__ = ["BatchNorm1d", "DistributedGraph", "GCNConv", "SAGEConv", "aggregate", "dropout",
           "all_reduce_gradients", "broadcast_parameters", "keep_freed_memory",
           "release_memory", "tensor_memory", "use_tessera_memory"]

_TESSERA_MEMORY_MIN_BYTES = 4 << 20  # Tessera's host memory caches blocks from 4 MiB up


def _torch_memory_module():
    """(tessera._torch_memory_<major>_<minor> for this torch, or None; why not, or "")."""
    major_minor = "_".join(torch.__version__.split("+")[0].split(".")[:2])
    name = f"tessera._torch_memory_{major_minor}"
    try:
        return importlib.import_module(name), ""
    except ModuleNotFoundError as e:
        if e.name != name:
            return None, f"{name} does not load: {e}"
        here = os.path.dirname(os.path.abspath(__file__))
        built = sorted(os.path.basename(f).split(".")[0][len("_torch_memory_"):].replace("_", ".")
                       for f in glob.glob(os.path.join(here, "_torch_memory_*.so")))
        if built:
            return None, (f"tessera._torch_memory was built for torch {', '.join(built)}, this "
                          f"is torch {torch.__version__}")
        return None, ("this build of Tessera has no tessera._torch_memory (built without "
                      "libtorch-dev)")
    except ImportError as e:  # built here, but a library it links (libc10) is missing or differs
        return None, f"{name} does not load: {e}"


_memory_module, _memory_absent = _torch_memory_module()
_memory_off = ""  # why torch keeps its own allocator by choice, or ""


def use_tessera_memory(enabled=True):
    """Serves torch's CPU tensors of 4 MiB and more from Tessera's host memory (True, the
    default from import on) or from torch's own allocator again (False), for the whole process.
    Tessera's large blocks are kept when freed for the next tensor of the same size (bounded:
    core/host_memory.h), so the (N, F) results torch allocates afresh every step, a ReLU's and
    its gradient's included, stop faulting in new pages each time; on synth:arxiv-like the
    torch path's step took 0.75-0.84 of the time at a lower peak (docs/performance.md). The
    values are the same either way; tensors keep the allocator they were made by. Returns
    whether Tessera's memory is in use now: False when this build or this torch version has no
    tessera._torch_memory (tensor_memory() says why). TESSERA_TORCH_MEMORY=off before the
    import leaves torch's allocator alone."""
    global _memory_off
    if _memory_module is None:
        return False
    if enabled:
        _memory_module.install(_TESSERA_MEMORY_MIN_BYTES)
        _memory_off = ""
    else:
        _memory_module.uninstall()
        _memory_off = "use_tessera_memory(False)"
    return _memory_module.installed()


def tensor_memory():
    """Where torch's large CPU tensors come from: 'tessera (blocks of 4 MiB and more)', or
    "torch's (...)" saying why not."""
    if _memory_module is not None and _memory_module.installed():
        return f"tessera (blocks of {_memory_module.min_bytes() >> 20} MiB and more)"
    return f"torch's ({_memory_off or _memory_absent or 'another allocator replaced it'})"


def release_memory():
    """Gives the freed large blocks that Tessera's host memory keeps for reuse back to the
    system, and returns their bytes: torch's large tensors' among them while use_tessera_memory()
    is in effect, and the results of the aggregations, dropouts and layer products. Tensors in
    use keep their memory. Between training steps the blocks a step frees are kept so that the
    next step's tensors cost no page faults (up to half the machine's memory between new
    mappings: core/host_memory.h); a long-lived process (a notebook) that has finished training
    calls this to return them."""
    return _release_cached_rows()


def _memory_from_environment():
    global _memory_off
    value = os.environ.get("TESSERA_TORCH_MEMORY", "")
    if value not in ("", "on", "off"):
        raise ValueError(f"TESSERA_TORCH_MEMORY={value}: expected on or off")
    if value == "off":
        _memory_off = "TESSERA_TORCH_MEMORY=off"
    else:
        use_tessera_memory(True)


_memory_from_environment()


_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory():
    """Trades memory for speed: makes glibc's malloc keep freed memory for reuse instead of
    returning it to the system, for the whole process. Torch allocates every (N, F) result of
    its own operations afresh (tessera.torch's aggregations, dropouts and layer products return
    theirs in Tessera's memory, reused; the model's ReLU and loss are torch's), and glibc serves
    each block over 32 MB with an mmap of its own, so every such result faults its pages in
    again: about 0.1 s per (169343, 256) float32 tensor, more than the elementwise operation
    itself. With mmap off and no trimming, a freed block is reused at once, but the heap
    fragments, so the process's peak resident memory grows (measured on synth:arxiv-like before
    the layer products used Tessera's memory: 1.35x faster steps at 1.75x the peak on one rank,
    1.36x at 1.26x on two; docs/performance.md). With use_tessera_memory() in effect (the
    default), torch's large blocks are Tessera's and this adds nothing measurable. Returns
    False outside glibc (nothing changed). TESSERA_TORCH_MALLOC=keep calls it when the first
    DistributedGraph is made."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    mallopt(_M_MMAP_MAX, 0)
    mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    return True


class DistributedGraph:
    """This rank's part of a graph cut into one part per MPI rank.

    set_epoch(epoch) at the start of every epoch keys the codecs' rounding and tessera.torch's
    dropout masks by the epoch, and restarts the numbering of aggregations and dropouts.

    `source` is one of: a PyG `Data` (edge_index, x, y and train/val/test masks or *_idx as
    attributes); an edge_index tensor or array (2, E); a scipy.sparse matrix (its nonzeros are
    the edges, row = source); a path (an OGB raw-layout directory or a Tessera .h5 file) or
    "synth:PRESET"; or None with partitions=DIR (a partition store from partition_graph). For
    edge_index and scipy sources give x, y (or OGB's (N, 1)) and the splits as masks or ids.

    Keyword options are Session's that apply (partition, partitions, node_order, seed, codec,
    codec_backward, error_feedback, normalize_features, device, gpu_comm, comm_timeout,
    verbosity) and num_layers:
    how many aggregations one forward pass of the model makes (each has its own message keys,
    codec noise and error-feedback residuals; calls are numbered modulo num_layers and the count
    restarts at set_epoch).

    Attributes (this rank's rows, in the order of node_ids): x, y, train_mask, val_mask,
    test_mask, train_idx, valid_idx, test_idx (local row ids); node_ids (the dataset's id of each
    row); num_nodes, num_train, num_valid, num_test (over all ranks); num_local, num_features,
    num_classes; rank, size; device (where the rows live: torch.device("cpu") or this rank's
    GPU); edge_index (the graph itself, for PyG-style calls).

    node_order is "none" here unless given: the caller holds the rows, so one process hands back
    the source's rows as they are and node_ids increase. node_order="rcm" renumbers the rows for
    a faster aggregation, as train_gcn does by default (so does a store made by partition_graph,
    whose default it is); node_ids then says which node each row is.
    """

    def __init__(self, source=None, *, x=None, y=None, num_nodes=None, train_mask=None,
                 val_mask=None, test_mask=None, train_idx=None, valid_idx=None, test_idx=None,
                 num_classes=0, name="graph", num_layers=2, **options):
        if os.environ.get("TESSERA_TORCH_MALLOC", "") == "keep":
            keep_freed_memory()
        options.setdefault("node_order", "none")
        self._core = _CoreGraph(num_layers=num_layers, **options)
        self._calls = 0
        self._dropouts = 0
        self._improved = None
        if source is None and "partitions" in options:
            self._core.load("")
        elif isinstance(source, str):
            self._core.load(source)
        else:
            splits = dict(train_mask=train_mask, val_mask=val_mask, test_mask=test_mask,
                          train_idx=train_idx, valid_idx=valid_idx, test_idx=test_idx)
            self._core.load(self._graph_of(source, x, y, num_nodes, splits, num_classes, name))
        self._take_part()

    @staticmethod
    def _graph_of(source, x, y, num_nodes, splits, num_classes, name):
        if source is None:
            raise ValueError("source: expected a PyG Data, an edge_index, a scipy.sparse matrix, "
                             "a dataset path or partitions=DIR, got None")
        if hasattr(source, "edge_index"):  # a PyG Data, or anything with its attributes
            edge_index = source.edge_index
            x = source.x if x is None else x
            y = getattr(source, "y", None) if y is None else y
            num_nodes = getattr(source, "num_nodes", None) if num_nodes is None else num_nodes
            for attr, value in splits.items():
                if value is None:
                    splits[attr] = getattr(source, attr, None)
        elif hasattr(source, "tocoo") and hasattr(source, "shape"):  # scipy.sparse
            coo = source.tocoo()
            if coo.shape[0] != coo.shape[1]:
                raise ValueError(f"source: a scipy.sparse adjacency must be square, got "
                                 f"{coo.shape}")
            edge_index = np.stack([np.asarray(coo.row, dtype=np.int64),
                                   np.asarray(coo.col, dtype=np.int64)])
            num_nodes = coo.shape[0] if num_nodes is None else num_nodes
        else:
            edge_index = source
        if x is None:
            raise ValueError("x: the node features are required")
        features = _convert.values(x, "x")
        if num_nodes is None:
            num_nodes = features.shape[0]
        return _make_graph(num_nodes=int(num_nodes), edge_index=edge_index, x=features, y=y,
                           train_idx=splits["train_idx"], valid_idx=splits["valid_idx"],
                           test_idx=splits["test_idx"], train_mask=splits["train_mask"],
                           valid_mask=splits["val_mask"], test_mask=splits["test_mask"],
                           num_classes=num_classes, name=name)

    def _take_part(self):
        core = self._core
        n = core.num_local
        self.device = torch.device(core.device)

        def on_device(array):
            return torch.from_numpy(array).to(self.device)

        self.node_ids = on_device(core.node_ids())
        self.x = on_device(core.features())
        labels = core.labels()
        self.y = on_device(labels if labels.size else core.targets())
        self.train_idx, self.valid_idx, self.test_idx = (
            on_device(core.split_rows(s)) for s in ("train", "valid", "test"))
        masks = []
        for rows in (self.train_idx, self.valid_idx, self.test_idx):
            mask = torch.zeros(n, dtype=torch.bool, device=self.device)
            mask[rows] = True
            masks.append(mask)
        self.train_mask, self.val_mask, self.test_mask = masks
        self.num_train, self.num_valid, self.num_test = (
            core.split_size(s) for s in ("train", "valid", "test"))

    rank = property(lambda self: self._core.rank)
    size = property(lambda self: self._core.size)
    num_nodes = property(lambda self: self._core.num_nodes)
    num_local = property(lambda self: self._core.num_local)
    num_features = property(lambda self: self._core.num_features)
    num_classes = property(lambda self: self._core.num_outputs)
    num_layers = property(lambda self: self._core.num_layers)
    metric = property(lambda self: self._core.metric)
    bytes_sent = property(lambda self: self._core.bytes_sent)

    @property
    def edge_index(self):
        """The graph itself: PyG-style layers take it where they take an edge index."""
        return self

    def set_epoch(self, epoch):
        """Keys the codecs' rounding noise by `epoch` and restarts the call count (call it at the
        start of every epoch, on every rank, when a codec is used)."""
        self._core.set_epoch(int(epoch))
        self._calls = 0
        self._dropouts = 0

    def _improved_scale(self):
        """(num_local, 1) (degree + 2)^-1/2: GCNConv(improved=True)'s normalisation, whose self
        loops weigh 2 (global degrees, so that every rank weighs its rows as one process)."""
        if self._improved is None:
            degrees = torch.from_numpy(self._core.degrees()).to(self.device)
            self._improved = (degrees + 2.0).rsqrt().unsqueeze(1)
        return self._improved

    def _next_call(self):
        call = self._calls % self._core.num_layers
        self._calls += 1
        return call

    def _next_dropout(self):
        self._dropouts += 1
        return self._dropouts - 1

    def all_reduce_(self, tensor):
        """Collective: a float32/float64 tensor summed over ranks, in place; returns it. A CUDA
        tensor's values are summed through a host copy."""
        if not isinstance(tensor, torch.Tensor) or tensor.dtype not in (torch.float32,
                                                                          torch.float64):
            raise ValueError("tensor: expected a float32 or float64 torch tensor")
        if not tensor.is_contiguous() or tensor.device.type not in ("cpu", "cuda"):
            raise ValueError(f"tensor: expected a contiguous CPU or CUDA tensor (summed in "
                             f"place), got one on {tensor.device}")
        _summed_(self, tensor.detach())
        return tensor

    def global_sum(self, value):
        """Collective: a number (or a tensor's sum) summed over ranks, as a Python float."""
        if isinstance(value, torch.Tensor):
            value = value.detach().double().sum().item()
        total = np.array([float(value)], dtype=np.float64)
        self._core.all_reduce_sum(total)
        return float(total[0])

    def __repr__(self):
        return (f"tessera.torch.DistributedGraph(rank {self.rank} of {self.size}: "
                f"{self.num_local} of {self.num_nodes} nodes, {self.num_features} features)")


def _summed_(graph, t):
    """Collective: the contiguous float32/float64 tensor t summed over ranks, in place (a CUDA
    tensor through a host copy); returns t."""
    if t.device.type == "cpu":
        graph._core.all_reduce_sum(t.numpy())
        return t
    host = t.cpu()
    graph._core.all_reduce_sum(host.numpy())
    return t.copy_(host)


_OPS = ("gcn", "mean", "sum")


class _RowOp(torch.autograd.Function):
    """A linear operation on this rank's rows run by the C++ module: forward(out, x) and
    backward(d_x, d_out) write float32 tensors in place (the aggregations: A x and A^T with the
    halo gradients sent to their owners; dropout: the mask recomputed). Other float dtypes are
    converted to float32 and back."""

    @staticmethod
    def forward(ctx, x, forward, backward):
        ctx.backward_op = backward
        return _run_on_rows(forward, x)

    @staticmethod
    def backward(ctx, grad):
        return _run_on_rows(ctx.backward_op, grad), None, None


def _run_on_rows(op, t):
    source = _float32(t)
    if source.is_cuda:  # torch's caching allocator keeps its GPU blocks for the next result
        out = torch.empty_like(source)
    else:
        # In Tessera's host memory, whose large blocks are reused when torch frees the result:
        # torch.empty_like would have glibc map a fresh block and fault its pages in every step.
        out = torch.from_numpy(_empty_rows(source.shape[0], source.shape[1]))
    op(out, source)
    return out if t.dtype == torch.float32 else out.to(t.dtype)


def _on_rows(graph, on_host, on_device):
    """(out, src) -> None for _RowOp: on_host(out_array, src_array) for CPU tensors (their
    NumPy views), on_device(out_address, src_address, cols) for CUDA ones, ordered after the
    work torch queued on its current stream."""
    core = graph._core

    def run(out, src):
        if src.is_cuda:
            core.set_stream(torch.cuda.current_stream(src.device).cuda_stream)
            on_device(out.data_ptr(), src.data_ptr(), src.shape[1])
        else:
            on_host(out.numpy(), src.numpy())
    return run


class _Linear(torch.autograd.Function):
    """x W^T (+ b) for float32 rows, with the (N, F) result and x's gradient in Tessera's host
    memory (as _run_on_rows): torch's Linear would map both afresh every step. The same
    products as torch.nn.functional.linear."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        out = torch.from_numpy(_empty_rows(x.shape[0], weight.shape[0]))
        if bias is None:
            return torch.mm(x, weight.t(), out=out)
        return torch.addmm(bias, x, weight.t(), out=out)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        d_x = None
        if ctx.needs_input_grad[0]:
            d_x = torch.mm(grad, weight, out=torch.from_numpy(_empty_rows(x.shape[0],
                                                                           x.shape[1])))
        d_weight = torch.mm(grad.t(), x) if ctx.needs_input_grad[1] else None
        d_bias = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return d_x, d_weight, d_bias


def _linear(x, lin, bias=None):
    """lin(x) + bias for a torch.nn.Linear `lin` (bias: a separate one, when lin has none),
    through _Linear for contiguous float32 CPU rows. A module with hooks (pruning, weight or
    spectral norm recompute its weight in a forward pre-hook) runs as itself."""
    hooked = (lin._forward_hooks or lin._forward_pre_hooks or
              torch.nn.modules.module._global_forward_hooks or
              torch.nn.modules.module._global_forward_pre_hooks)
    weight = lin.weight
    bias = lin.bias if bias is None else bias
    if (hooked or x.dim() != 2 or x.dtype != torch.float32 or weight.dtype != torch.float32 or
            x.device.type != "cpu" or not x.is_contiguous()):
        out = lin(x)
        return out if lin.bias is not None or bias is None else out + bias
    return _Linear.apply(x, weight, bias)


def _float32(t):
    t = t.detach()
    return (t if t.dtype == torch.float32 else t.float()).contiguous()


def _check_graph(graph, name="edge_index"):
    if not isinstance(graph, DistributedGraph):
        raise ValueError(f"{name}: expected a tessera.torch.DistributedGraph (pass graph or "
                         f"graph.edge_index), got {type(graph).__module__}."
                         f"{type(graph).__qualname__}")


def aggregate(x, graph, op="gcn", call=None):
    """A x over this rank's rows of x (num_local, F), differentiable: op 'gcn' (D^-1/2 (A+I)
    D^-1/2, PyG's GCNConv), 'mean' (SAGEConv's) or 'sum'. Collective: every rank makes the same
    aggregations in the same order. `call` numbers it within the forward pass (default: the
    graph's running count)."""
    _check_graph(graph, "graph")
    if op not in _OPS:
        raise ValueError(f"op: expected one of {', '.join(_OPS)}, got {op!r}")
    _check_rows(x, graph)
    call = graph._next_call() if call is None else int(call)
    core = graph._core
    forward = _on_rows(graph, lambda out, src: core.aggregate(op, out, src, call),
                       lambda out, src, cols: core.aggregate_on_device(op, out, src, cols, call,
                                                                       False))
    backward = _on_rows(graph, lambda d_x, d_out: core.aggregate_backward(op, d_x, d_out, call),
                        lambda d_x, d_out, cols: core.aggregate_on_device(op, d_x, d_out, cols,
                                                                          call, True))
    return _RowOp.apply(x, forward, backward)


def dropout(x, graph, p=0.5, training=True, key=None):
    """F.dropout(x, p, training) on this rank's rows (num_local, F) with Tessera's masks: a pure
    function of (the graph's seed, its epoch, key, global node id, column), so that a node is
    dropped alike at any number of ranks (torch's dropout draws per rank), and regenerated in
    backward instead of stored. `key` defaults to the graph's running count of dropouts (restarted
    by set_epoch). Not collective."""
    _check_graph(graph, "graph")
    if not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ValueError(f"p: expected a probability in [0, 1), got {p!r}")
    _check_rows(x, graph)
    if not training or p == 0.0:
        return x
    p, key = float(p), int(graph._next_dropout() if key is None else key)
    core = graph._core
    forward = _on_rows(graph, lambda out, src: core.dropout(out, src, p, key),
                       lambda out, src, cols: core.dropout_on_device(out, src, cols, p, key, False))
    backward = _on_rows(graph, lambda d_x, d_out: core.dropout_backward(d_x, d_out, p, key),
                        lambda d_x, d_out, cols: core.dropout_on_device(d_x, d_out, cols, p, key,
                                                                        True))
    return _RowOp.apply(x, forward, backward)


def _check_rows(x, graph):
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError("x: expected a floating-point torch tensor")
    if x.device != graph.device:
        raise ValueError(f"x: the tensor is on {x.device}, the graph's rows on {graph.device} "
                         f"(x.to(graph.device))")
    if x.dim() != 2 or x.shape[0] != graph.num_local:
        raise ValueError(f"x: expected shape (num_local = {graph.num_local}, F), got "
                         f"{tuple(x.shape)}")


def _glorot_(weight):
    bound = (6.0 / (weight.shape[0] + weight.shape[1])) ** 0.5
    with torch.no_grad():
        weight.uniform_(-bound, bound)


def _check_message_passing_options(kwargs, layer):
    """Refuses the options of PyG's MessagePassing that would change what the layer computes
    here (a ValueError naming the option), so that none is ignored in silence. Taken: flow
    'source_to_target' (messages along edge_index's direction, as Tessera aggregates),
    node_dim -2 or 0 (the node axis of 2-D rows) and decomposed_layers (a memory trade in PyG,
    the same values)."""
    for name, value in kwargs.items():
        if name == "aggr":
            continue  # each layer checks its own
        if name == "flow":
            if value != "source_to_target":
                raise ValueError(f"flow: {layer} aggregates along the edges' direction "
                                 f"(source_to_target), got {value!r}")
        elif name == "node_dim":
            if value not in (-2, 0):
                raise ValueError(f"node_dim: the rows are (nodes, channels), so the node axis is "
                                 f"-2 or 0, got {value!r}")
        elif name == "decomposed_layers":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"decomposed_layers: expected a positive int, got {value!r}")
        elif not (name == "aggr_kwargs" and not value):
            raise ValueError(f"{name}: not an option of PyG's {layer} that tessera.torch takes")


class GCNConv(torch.nn.Module):
    """PyG's GCNConv over a DistributedGraph: lin (Linear without bias, weight out x in,
    glorot), then D^-1/2 (A+I) D^-1/2 aggregation, then bias (zeros). normalize=False
    aggregates the plain sum over neighbours (PyG's behaviour without normalisation). When
    in_channels < out_channels it aggregates first, (A x) W: the same values up to rounding,
    with the narrower width through the halo exchange and SpMM. improved=True normalises
    A + 2I instead (self loops of weight 2, as PyG's)."""

    def __init__(self, in_channels, out_channels, improved=False, cached=False,
                 add_self_loops=None, normalize=True, bias=True, **kwargs):
        super().__init__()
        if normalize and add_self_loops is False:
            raise ValueError("add_self_loops: the normalised operator always has self-loops; "
                             "use add_self_loops=True or normalize=False")
        if kwargs.get("aggr", "add") != "add":
            raise ValueError(f"aggr: GCNConv sums its messages, got {kwargs['aggr']!r}")
        _check_message_passing_options(kwargs, "GCNConv")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.normalize, self.cached, self.improved = normalize, cached, improved
        self.lin = torch.nn.Linear(in_channels, out_channels, bias=False)
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        _glorot_(self.lin.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x, edge_index, edge_weight=None):
        _check_graph(edge_index)
        if edge_weight is not None:
            raise ValueError("edge_weight: the graph's operators are unweighted")
        # A (x W) = (A x) W: the narrower width goes through the aggregation (its SpMM and halo
        # traffic), as in Tessera's own layer; when x needs no gradient (the input features),
        # aggregating first also leaves backward without an aggregation.
        if x.dim() == 2 and x.shape[1] < self.out_channels:
            return _linear(self._propagate(x, edge_index), self.lin, self.bias)
        out = self._propagate(_linear(x, self.lin), edge_index)
        # In place: the aggregation keeps nothing for its backward, so no saved tensor changes.
        return out if self.bias is None else out.add_(self.bias)

    def _propagate(self, h, graph):
        if not self.normalize:
            return aggregate(h, graph, "sum")
        if not self.improved:
            return aggregate(h, graph, "gcn")
        # improved: D^-1/2 (A + 2I) D^-1/2 h with D = degree + 2, from the plain sum.
        scale = graph._improved_scale().to(h.dtype)
        scaled = h * scale
        return (aggregate(scaled, graph, "sum") + 2.0 * scaled) * scale

    def __repr__(self):
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"


class SAGEConv(torch.nn.Module):
    """PyG's SAGEConv over a DistributedGraph: lin_l(aggr of neighbours) + lin_r(x), lin_l with
    the bias, lin_r without; aggr 'mean' (default) or 'sum'/'add'; normalize: L2 rows;
    project: the neighbours' features go through relu(lin(x)) (in x in, with bias) first."""

    def __init__(self, in_channels, out_channels, aggr="mean", normalize=False,
                 root_weight=True, project=False, bias=True, **kwargs):
        super().__init__()
        if aggr not in ("mean", "sum", "add"):
            raise ValueError(f"aggr: expected 'mean', 'sum' or 'add', got {aggr!r}")
        _check_message_passing_options(kwargs, "SAGEConv")
        # A pair (source width, target width): x is then a pair of this rank's rows too, the
        # neighbours' features and the nodes' own (PyG's bipartite form over one node set).
        widths = tuple(in_channels) if isinstance(in_channels, (tuple, list)) else (in_channels,) * 2
        if len(widths) != 2:
            raise ValueError(f"in_channels: expected an int or a pair, got {in_channels!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr = "mean" if aggr == "mean" else "sum"
        self.normalize, self.root_weight = normalize, root_weight
        self.lin_l = torch.nn.Linear(widths[0], out_channels, bias=bias)
        self.lin_r = torch.nn.Linear(widths[1], out_channels, bias=False) if root_weight else None
        self.project = project
        if project:
            self.lin = torch.nn.Linear(widths[0], widths[0], bias=True)

    def reset_parameters(self):
        if self.project:
            self.lin.reset_parameters()
        self.lin_l.reset_parameters()
        if self.lin_r is not None:
            self.lin_r.reset_parameters()

    def forward(self, x, edge_index):
        _check_graph(edge_index)
        x_src, x_dst = x if isinstance(x, (tuple, list)) else (x, x)
        if x_dst is not None and x_dst is not x_src:
            _check_rows(x_dst, edge_index)
        neighbours = torch.relu(self.lin(x_src)) if self.project else x_src
        out = _linear(aggregate(neighbours, edge_index, self.aggr), self.lin_l)
        if self.lin_r is not None and x_dst is not None:
            out = out + _linear(x_dst, self.lin_r)
        if self.normalize:
            out = torch.nn.functional.normalize(out, p=2.0, dim=-1)
        return out

    def __repr__(self):
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggr={self.aggr})"


def _global_moments(x, graph):
    """The mean and biased variance per column over every rank's rows (float64), and the count."""
    x = x.detach().double()
    count = torch.tensor([float(x.shape[0])], dtype=torch.float64, device=x.device)
    sums = torch.cat([x.sum(0), (x * x).sum(0), count])
    _summed_(graph, sums)
    c, count = x.shape[1], sums[-1].item()
    if count < 2:
        raise ValueError(f"x: batch normalisation needs at least 2 rows over all ranks, got "
                         f"{int(count)}")
    mean = sums[:c] / count
    return mean, (sums[c:2 * c] / count - mean * mean).clamp_min(0.0), count


class _GlobalNormalize(torch.autograd.Function):
    """(x - mean) * inv_std with every rank's statistics; backward needs two global sums too."""

    @staticmethod
    def forward(ctx, x, graph, mean, inv_std, count):
        xhat = ((x.detach().double() - mean) * inv_std).to(x.dtype)
        ctx.save_for_backward(xhat, inv_std)
        ctx.graph, ctx.count = graph, count
        return xhat

    @staticmethod
    def backward(ctx, d_xhat):
        xhat, inv_std = ctx.saved_tensors
        g, h = d_xhat.double(), xhat.double()
        sums = torch.cat([g.sum(0), (g * h).sum(0)])
        _summed_(ctx.graph, sums)
        c = h.shape[1]
        d_x = (g - sums[:c] / ctx.count - h * (sums[c:] / ctx.count)) * inv_std
        return d_x.to(d_xhat.dtype), None, None, None, None


class BatchNorm1d(torch.nn.BatchNorm1d):
    """torch.nn.BatchNorm1d with its training statistics over every rank's rows (the
    single-process batch of the whole graph), so that K ranks train as one; the same parameters
    (weight, bias) and buffers (running_mean, running_var, num_batches_tracked). Called as
    bn(x, graph); without a graph, or in eval mode, it is torch's BatchNorm1d."""

    def forward(self, x, graph=None):
        if graph is None or not self.training:
            return super().forward(x)
        _check_graph(graph, "graph")
        if x.dim() != 2:
            raise ValueError(f"x: expected (rows, channels), got shape {tuple(x.shape)}")
        mean, var, count = _global_moments(x, graph)
        xhat = _GlobalNormalize.apply(x, graph, mean, (var + self.eps).rsqrt(), count)
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked += 1
                m = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                     else self.momentum)
                unbiased = var * count / (count - 1)
                self.running_mean.mul_(1 - m).add_(mean.to(self.running_mean.dtype), alpha=m)
                self.running_var.mul_(1 - m).add_(unbiased.to(self.running_var.dtype), alpha=m)
        return xhat * self.weight + self.bias if self.affine else xhat


def _sum_over_ranks(tensors, graph, keep_root_only=False):
    """Collective: each tensor replaced by its sum over ranks (rank 0's values alone with
    keep_root_only), in one float64 message for all of them."""
    if not tensors:
        return
    with torch.no_grad():
        flat = torch.cat([t.detach().reshape(-1).double() for t in tensors])
        if keep_root_only and graph.rank != 0:
            flat.zero_()
        _summed_(graph, flat)
        offset = 0
        for t in tensors:
            t.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()


def all_reduce_gradients(module, graph):
    """Collective: every parameter's gradient summed over ranks (one message for all of them),
    so that an optimizer steps every rank's copy alike. Every rank must have the same set of
    parameters with gradients."""
    _check_graph(graph, "graph")
    _sum_over_ranks([p.grad for p in module.parameters()
                     if p.requires_grad and p.grad is not None], graph)


def broadcast_parameters(module, graph):
    """Collective: rank 0's parameters and buffers on every rank (as DistributedDataParallel
    does when it wraps a model), so that every rank starts from the same weights."""
    _check_graph(graph, "graph")
    _sum_over_ranks(list(module.parameters()) +
                    [b for b in module.buffers() if b.is_floating_point()], graph,
                    keep_root_only=True)
