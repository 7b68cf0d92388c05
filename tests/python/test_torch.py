# SPDX-License-Identifier: Apache-2.0
"""tessera.torch on one process: a DistributedGraph from every source a user has (a PyG-style
Data, an edge_index tensor, NumPy, scipy.sparse, an OGB folder, a partition store) holds the same
part; the layers keep PyG's parameter names and layouts; aggregation works in place on the
caller's memory and on other float dtypes; nothing passed in is modified; every bad input is a
ValueError naming the argument. (torch_cora.py compares training with the reference at 1, 2 and
4 ranks.)"""
import importlib
import os
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

import numpy as np
import torch
import torch.nn.functional as F
import torch.nn.utils.prune

import tessera
import tessera.torch as tt
import torch_reference as ref
from shared_datasets import need_cora

PARTITION_GRAPH = os.environ.get("TESSERA_PARTITION_GRAPH", "")


def ring_data(n=60, f=5):
    """A PyG-style Data: two interleaved rings, labels the parity, masks for the splits."""
    v = torch.arange(n)
    edge_index = torch.stack([torch.cat([v, (v + 2) % n]), torch.cat([(v + 2) % n, v])])
    x = torch.from_numpy(np.random.default_rng(0).random((n, f), dtype=np.float32))
    return types.SimpleNamespace(edge_index=edge_index, x=x, y=(v % 2)[:, None], num_nodes=n,
                                 train_mask=v % 3 == 0, val_mask=v % 3 == 1, test_mask=v % 3 == 2)


class Sources(unittest.TestCase):
    def assert_same_part(self, graph, data):
        np.testing.assert_array_equal(graph.node_ids.numpy(), np.arange(data.num_nodes))
        torch.testing.assert_close(graph.x, data.x, rtol=0, atol=0)
        torch.testing.assert_close(graph.y, data.y.reshape(-1), rtol=0, atol=0)
        for attr in ("train_mask", "val_mask", "test_mask"):
            torch.testing.assert_close(getattr(graph, attr), getattr(data, attr))
        self.assertEqual(graph.num_train, int(data.train_mask.sum()))
        self.assertIs(graph.edge_index, graph)

    def test_every_source_gives_the_same_part(self):
        data = ring_data()
        before = {k: v.clone() for k, v in vars(data).items() if isinstance(v, torch.Tensor)}
        graph = tt.DistributedGraph(data)
        self.assert_same_part(graph, data)
        for k, v in before.items():  # nothing the caller passed is modified
            torch.testing.assert_close(getattr(data, k), v, rtol=0, atol=0)
        masks = dict(x=data.x, y=data.y, train_mask=data.train_mask, val_mask=data.val_mask,
                     test_mask=data.test_mask)
        ids = dict(x=data.x.numpy(), y=data.y.numpy(), train_idx=np.flatnonzero(data.train_mask),
                   valid_idx=np.flatnonzero(data.val_mask), test_idx=np.flatnonzero(data.test_mask))
        import scipy.sparse
        src, dst = data.edge_index.numpy()
        adjacency = scipy.sparse.csr_matrix((np.ones(len(src)), (src, dst)), shape=(60, 60))
        for source, arrays in ((data.edge_index, masks), (data.edge_index.int().numpy(), ids),
                               (adjacency, masks)):
            with self.subTest(source=type(source).__name__):
                self.assert_same_part(tt.DistributedGraph(source, **arrays), data)

    def test_the_same_aggregation_from_every_source(self):
        data = ring_data()
        x = torch.randn(60, 3)
        expected = tt.aggregate(x, tt.DistributedGraph(data), "gcn")
        torch.testing.assert_close(
            tt.aggregate(x, tt.DistributedGraph(data.edge_index.numpy(), x=data.x, y=data.y,
                                                train_mask=data.train_mask), "gcn"), expected)

    def test_bf16_aggregation_reads_the_rounded_rows(self):
        """aggregate_dtype="bf16" sums the rows rounded to bf16 (as torch rounds them) in f32;
        f32, the default, does not round."""
        data = ring_data()
        x = torch.randn(60, 33)
        rounded = x.to(torch.bfloat16).float()
        exact = tt.aggregate(x, tt.DistributedGraph(data), "gcn")
        bf16 = tt.aggregate(x, tt.DistributedGraph(data, aggregate_dtype="bf16"), "gcn")
        torch.testing.assert_close(bf16, tt.aggregate(rounded, tt.DistributedGraph(data), "gcn"),
                                   rtol=0, atol=0)
        self.assertGreater((bf16 - exact).abs().max().item(), 1e-4)

    def test_ogb_folder_matches_its_arrays(self):
        need_cora(self)
        data = ref.CoraData()
        graph = tt.DistributedGraph(ref.CORA)
        self.assert_same_part(graph, data)
        self.assertEqual((graph.num_features, graph.num_classes), (1433, 7))
        x = torch.randn(graph.num_nodes, 4)
        ops = ref.operators(data.edge_index, data.num_nodes)
        for op in ("gcn", "mean", "sum"):
            torch.testing.assert_close(tt.aggregate(x, graph, op), torch.sparse.mm(ops[op], x),
                                       rtol=1e-5, atol=1e-6)

    def test_partition_store(self):
        if not PARTITION_GRAPH:
            self.skipTest("TESSERA_PARTITION_GRAPH is not set")
        given = tt.DistributedGraph("synth:default")  # the dataset's order
        np.testing.assert_array_equal(given.node_ids.numpy(), np.arange(given.num_nodes))
        x = torch.randn(given.num_local, 2)
        for order in ("none", "rcm"):
            with self.subTest(order=order), tempfile.TemporaryDirectory() as tmp:
                store = os.path.join(tmp, "store")
                subprocess.run([PARTITION_GRAPH, "--dataset", "synth:default", "--parts", "1",
                                "--node-order", order, "--out", store, "--quiet"], check=True)
                stored = tt.DistributedGraph(partitions=store)
                direct = tt.DistributedGraph("synth:default", node_order=order)
                torch.testing.assert_close(stored.x, direct.x, rtol=0, atol=0)
                torch.testing.assert_close(stored.node_ids, direct.node_ids, rtol=0, atol=0)
                ids = stored.node_ids
                np.testing.assert_array_equal(np.sort(ids.numpy()), np.arange(given.num_nodes))
                self.assertEqual(bool((ids == torch.arange(given.num_nodes)).all()),
                                 order == "none")
                # Row i is node ids[i]: the rows, and what aggregation makes of them, move along.
                torch.testing.assert_close(stored.x, given.x[ids], rtol=0, atol=0)
                torch.testing.assert_close(stored.y, given.y[ids], rtol=0, atol=0)
                torch.testing.assert_close(tt.aggregate(x[ids], stored),
                                           tt.aggregate(x, given)[ids], rtol=1e-5, atol=1e-6)


class Layers(unittest.TestCase):
    def test_pyg_names_and_layouts(self):
        gcn = tt.GCNConv(5, 3)
        self.assertEqual({k: tuple(v.shape) for k, v in gcn.state_dict().items()},
                         {"lin.weight": (3, 5), "bias": (3,)})
        sage = tt.SAGEConv(5, 3)
        self.assertEqual({k: tuple(v.shape) for k, v in sage.state_dict().items()},
                         {"lin_l.weight": (3, 5), "lin_l.bias": (3,), "lin_r.weight": (3, 5)})
        if ref.pyg_nn is not None:
            for ours, theirs in ((gcn, ref.pyg_nn.GCNConv(5, 3)), (sage, ref.pyg_nn.SAGEConv(5, 3))):
                self.assertEqual({k: v.shape for k, v in ours.state_dict().items()},
                                 {k: v.shape for k, v in theirs.state_dict().items()})

    def test_layers_equal_their_formulas(self):
        data = ring_data()
        graph = tt.DistributedGraph(data)
        ops = ref.operators(data.edge_index, 60)
        x = torch.randn(60, 5)
        gcn, sage = tt.GCNConv(5, 3), tt.SAGEConv(5, 3, normalize=True)
        torch.nn.init.normal_(gcn.bias)
        torch.testing.assert_close(gcn(x, graph.edge_index),
                                   torch.sparse.mm(ops["gcn"], x @ gcn.lin.weight.T) + gcn.bias)
        plain = sage.lin_l(torch.sparse.mm(ops["mean"], x)) + sage.lin_r(x)
        torch.testing.assert_close(sage(x, graph), torch.nn.functional.normalize(plain, dim=-1))
        summed = tt.GCNConv(5, 3, normalize=False, bias=False)
        torch.testing.assert_close(summed(x, graph),
                                   torch.sparse.mm(ops["sum"], x @ summed.lin.weight.T))

    def test_message_passing_options_that_change_nothing_are_taken(self):
        # PyG's defaults spelled out, and decomposed_layers (a memory trade there): the same
        # layer; what would change the values (flow="target_to_source") is refused, in
        # BadInputIsValueError.
        graph = tt.DistributedGraph(ring_data())
        x = torch.randn(60, 5)
        options = dict(flow="source_to_target", node_dim=0, decomposed_layers=2, aggr_kwargs=None)
        for make in (tt.GCNConv, tt.SAGEConv):
            with self.subTest(layer=make.__name__):
                plain, spelled = make(5, 3), make(5, 3, **options)
                spelled.load_state_dict(plain.state_dict())
                torch.testing.assert_close(spelled(x, graph), plain(x, graph), rtol=0, atol=0)

    def test_projected_sage_aggregates_relu_of_lin(self):
        # PyG's project=True: lin_l(mean of relu(lin(x)) over neighbours) + lin_r(x), with the
        # names lin.weight (in x in) and lin.bias; gradients reach all three Linears.
        data = ring_data()
        graph = tt.DistributedGraph(data)
        ops = ref.operators(data.edge_index, 60)
        sage = tt.SAGEConv(5, 3, project=True)
        self.assertEqual(sage.state_dict()["lin.weight"].shape, (5, 5))
        self.assertIn("lin.bias", sage.state_dict())
        x = torch.randn(60, 5)
        out = sage(x, graph)
        projected = torch.relu(x @ sage.lin.weight.T + sage.lin.bias)
        expected = sage.lin_l(torch.sparse.mm(ops["mean"], projected)) + sage.lin_r(x)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        for lin in (sage.lin, sage.lin_l, sage.lin_r):
            self.assertGreater(lin.weight.grad.abs().sum().item(), 0)

    def test_sage_with_a_pair_of_widths_takes_a_pair_of_inputs(self):
        # PyG's bipartite form over one node set: neighbours' features x_src (width 4), the
        # nodes' own x_dst (width 2); x_dst None leaves the root term out.
        data = ring_data()
        graph = tt.DistributedGraph(data)
        ops = ref.operators(data.edge_index, 60)
        sage = tt.SAGEConv((4, 2), 3)
        self.assertEqual(sage.lin_l.weight.shape, (3, 4))
        self.assertEqual(sage.lin_r.weight.shape, (3, 2))
        x_src, x_dst = torch.randn(60, 4), torch.randn(60, 2)
        neighbours = sage.lin_l(torch.sparse.mm(ops["mean"], x_src))
        torch.testing.assert_close(sage((x_src, x_dst), graph), neighbours + sage.lin_r(x_dst))
        torch.testing.assert_close(sage((x_src, None), graph), neighbours)
        with self.assertRaisesRegex(ValueError, "in_channels"):
            tt.SAGEConv((1, 2, 3), 3)

    def test_improved_gcn_normalises_a_plus_two_i(self):
        # PyG's improved=True: D^-1/2 (A + 2I) D^-1/2 with D the row sums of A + 2I; both orders.
        data = ring_data()
        hub = torch.stack([torch.zeros(20, dtype=torch.int64), torch.arange(10, 30)])
        data.edge_index = torch.cat([data.edge_index, hub], dim=1)  # uneven degrees
        graph = tt.DistributedGraph(data)
        a = ref.operators(data.edge_index, 60)["sum"].to_dense()
        self.assertGreater(a.sum(1).max(), 2 * a.sum(1).min())
        a2 = a + 2.0 * torch.eye(60)
        scale = a2.sum(1).rsqrt()
        operator = scale[:, None] * a2 * scale[None, :]
        for f_in, f_out in ((5, 3), (3, 8)):
            conv = tt.GCNConv(f_in, f_out, improved=True)
            torch.nn.init.normal_(conv.bias)
            x = torch.randn(60, f_in, requires_grad=True)
            x_ref = x.detach().clone().requires_grad_(True)
            out = conv(x, graph)
            expected = operator @ (x_ref @ conv.lin.weight.detach().T) + conv.bias.detach()
            torch.testing.assert_close(out, expected)
            upstream = torch.randn(60, f_out)
            out.backward(upstream)
            expected.backward(upstream)
            torch.testing.assert_close(x.grad, x_ref.grad)

    def test_a_widening_gcn_aggregates_first_with_the_same_values_and_gradients(self):
        # in < out: GCNConv computes (A x) W + b, which must equal PyG's A (x W) + b, gradients
        # of x, weight and bias included.
        data = ring_data()
        graph = tt.DistributedGraph(data)
        ops = ref.operators(data.edge_index, 60)
        for normalize, bias in ((True, True), (False, False)):
            conv = tt.GCNConv(3, 8, normalize=normalize, bias=bias)
            if bias:
                torch.nn.init.normal_(conv.bias)
            x = torch.randn(60, 3, requires_grad=True)
            x_ref = x.detach().clone().requires_grad_(True)
            w_ref = conv.lin.weight.detach().clone().requires_grad_(True)
            b_ref = conv.bias.detach().clone().requires_grad_(True) if bias else None
            out = conv(x, graph)
            expected = torch.sparse.mm(ops["gcn" if normalize else "sum"], x_ref @ w_ref.T)
            if bias:
                expected = expected + b_ref
            torch.testing.assert_close(out, expected)
            upstream = torch.randn(60, 8)
            out.backward(upstream)
            expected.backward(upstream)
            torch.testing.assert_close(x.grad, x_ref.grad)
            torch.testing.assert_close(conv.lin.weight.grad, w_ref.grad)
            if bias:
                torch.testing.assert_close(conv.bias.grad, b_ref.grad)


    def test_the_layers_linear_equals_torchs_with_its_gradients(self):
        # tessera.torch's Linear of float32 rows (its results in Tessera's memory) gives
        # F.linear's values and gradients, with and without bias, with and without x's gradient;
        # other dtypes go to F.linear itself.
        for bias, x_grad in ((True, True), (False, True), (True, False)):
            with self.subTest(bias=bias, x_grad=x_grad):
                x = torch.randn(60, 7, requires_grad=x_grad)
                lin = torch.nn.Linear(7, 5, bias=False)
                w = lin.weight
                b = torch.randn(5, requires_grad=True) if bias else None
                refs = [t.detach().clone().requires_grad_(t.requires_grad) if t is not None
                        else None for t in (x, w, b)]
                out = tt._linear(x, lin, b)
                expected = torch.nn.functional.linear(*refs)
                torch.testing.assert_close(out, expected, rtol=0, atol=0)
                upstream = torch.randn(60, 5)
                out.backward(upstream)
                expected.backward(upstream)
                for ours, theirs in zip((x, w, b), refs):
                    if ours is not None and ours.requires_grad:
                        torch.testing.assert_close(ours.grad, theirs.grad)
        double = torch.randn(60, 7, dtype=torch.float64, requires_grad=True)
        lin = torch.nn.Linear(7, 2).double()
        self.assertTrue(torch.autograd.gradcheck(lambda t: tt._linear(t, lin), (double,)))

    def test_a_pruned_layer_uses_its_pruned_weight(self):
        # torch's pruning recomputes lin.weight in a forward pre-hook: the layer must run it.
        graph = tt.DistributedGraph(ring_data())
        x = torch.randn(60, 5)
        for conv, lin in ((tt.GCNConv(5, 3), "lin"), (tt.GCNConv(5, 8), "lin"),
                          (tt.SAGEConv(5, 3), "lin_l")):
            with self.subTest(conv=repr(conv)):
                module = getattr(conv, lin)
                torch.nn.utils.prune.l1_unstructured(module, "weight", amount=0.5)
                with torch.no_grad():
                    module.weight_orig.mul_(2.0)  # the pre-hook makes weight from it again
                out = conv(x, graph)
                torch.nn.utils.prune.remove(module, "weight")  # weight: 2 orig * mask, no hook
                torch.testing.assert_close(out, conv(x, graph))


class Aggregation(unittest.TestCase):
    def setUp(self):
        self.graph = tt.DistributedGraph(ring_data())

    def test_in_place_on_the_callers_memory(self):
        x = torch.randn(60, 4)
        out = torch.zeros(60, 4)
        self.graph._core.aggregate("sum", out.numpy(), x.numpy(), 0)  # writes into out's memory
        torch.testing.assert_close(out, tt.aggregate(x, self.graph, "sum"))

    def test_results_reuse_tesseras_freed_blocks(self):
        # A result of 7.5 MiB lives in Tessera's host memory: freed, its block serves the next
        # result of the same size (no fresh mapping whose pages fault in again).
        x = torch.randn(60, 32768)
        first = tt.aggregate(x, self.graph, "sum")
        address, expected = first.data_ptr(), first.clone()
        del first
        second = tt.aggregate(x, self.graph, "sum")
        self.assertEqual(second.data_ptr(), address, "the freed result's block was not reused")
        torch.testing.assert_close(second, expected)
        block = tessera._core.empty_rows(3, 5)
        self.assertEqual((block.shape, block.dtype), ((3, 5), np.float32))
        self.assertTrue(block.flags.c_contiguous and block.flags.writeable)
        with self.assertRaisesRegex(ValueError, r"empty_rows: expected rows, cols >= 0, got -1, 5"):
            tessera._core.empty_rows(-1, 5)

    def test_other_float_dtypes(self):
        x = torch.randn(60, 4, dtype=torch.float64, requires_grad=True)
        out = tt.aggregate(x, self.graph, "mean")
        self.assertEqual(out.dtype, torch.float64)
        out.sum().backward()
        self.assertEqual(x.grad.dtype, torch.float64)
        torch.testing.assert_close(out.float(), tt.aggregate(x.detach().float(), self.graph,
                                                             "mean"))
        half = tt.aggregate(x.detach().to(torch.bfloat16), self.graph, "sum")
        self.assertEqual(half.dtype, torch.bfloat16)

    def test_gradient_reduction_and_broadcast_on_one_rank(self):
        model = tt.GCNConv(5, 3)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        tt.broadcast_parameters(model, self.graph)
        for k, v in model.state_dict().items():
            torch.testing.assert_close(v, state[k], rtol=0, atol=0)
        model(self.graph.x, self.graph).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        tt.all_reduce_gradients(model, self.graph)
        for p, g in zip(model.parameters(), grads):
            torch.testing.assert_close(p.grad, g, rtol=0, atol=0)
        self.assertEqual(self.graph.global_sum(torch.tensor([1.5, 2.0])), 3.5)


class SessionWeightsInPyGLayout(unittest.TestCase):
    """A Session's weights read and set under PyG's names and layouts: loaded into a torch model
    of tessera.torch layers, it computes the Session's logits; set back from that model, the
    Session computes the torch model's."""

    class Convs(torch.nn.Module):
        def __init__(self, conv, widths):
            super().__init__()
            self.convs = torch.nn.ModuleList(conv(a, b) for a, b in zip(widths[:-1], widths[1:]))

        def forward(self, x, graph):
            for conv in self.convs[:-1]:
                x = conv(x, graph).relu()
            return self.convs[-1](x, graph)

    def test_read_and_set_both_ways(self):
        data = ring_data()
        graph = tt.DistributedGraph(data)
        for kind, conv in (("gcn", tt.GCNConv), ("sage", tt.SAGEConv)):
            with self.subTest(model=kind):
                session = tessera.Session(num_layers=2, hidden_channels=8, epochs=5, model=kind,
                                          lr=0.05)
                session.load(tessera.Graph(**vars(data)))
                session.train()
                model = self.Convs(conv, [5, 8, 2])
                state = {k: torch.from_numpy(v) for k, v in session.state_dict().items()}
                model.load_state_dict(state)  # strict: the same names and shapes
                # The session's rows are its nodes in its (renumbered) order; the graph's are in
                # the dataset's.
                rows = torch.from_numpy(session.node_ids())
                with torch.no_grad():
                    torch.testing.assert_close(model(graph.x, graph)[rows],
                                               torch.from_numpy(session.logits()),
                                               rtol=1e-5, atol=1e-5)
                    for p in model.parameters():
                        p.add_(0.25)
                    session.load_state_dict(model.state_dict())
                    torch.testing.assert_close(torch.from_numpy(session.logits()),
                                               model(graph.x, graph)[rows], rtol=1e-5, atol=1e-5)

    def test_bad_weights_name_the_problem(self):
        data = ring_data()
        session = tessera.Session(num_layers=2, hidden_channels=8, epochs=2)
        session.load(tessera.Graph(**vars(data)))
        with self.assertRaisesRegex(ValueError, r"train \(or predict\) first"):
            session.set_weights({})
        session.train()
        state = session.state_dict()
        with self.assertRaisesRegex(ValueError, r"state: 'convs.1.bias' is missing"):
            session.load_state_dict({k: v for k, v in state.items() if k != "convs.1.bias"})
        with self.assertRaisesRegex(ValueError, r"'convs.0.weight' is 8 x 4 with 32 values, "
                                                r"expected 5 x 8"):
            session.load_state_dict({**state, "convs.0.lin.weight": np.zeros((4, 8), np.float32)})
        with self.assertRaisesRegex(ValueError, r"unknown weight 'convs.9.weight'"):
            session.set_weights({**session.weights(), "convs.9.weight": np.zeros((2, 2))})
        with self.assertRaisesRegex(ValueError, r"'convs.0.bias'\[1\] is nan"):
            bad = dict(session.weights())
            bad["convs.0.bias"] = bad["convs.0.bias"].copy()
            bad["convs.0.bias"][0, 1] = np.nan
            session.set_weights(bad)


# Run in a fresh interpreter: how much of a freed 64 MB tensor stays resident, before and after
# the first DistributedGraph, then after keep_freed_memory().
_HEAP_PROBE = """
import torch
import tessera.torch as tt
def kept_mb():
    def resident():
        return int(open("/proc/self/statm").read().split()[1]) * 4096
    base = resident()
    t = torch.ones(16 * 2**20)  # 64 MB, every page touched
    del t
    return (resident() - base) / 2**20
before = kept_mb()
v = torch.arange(8)
tt.DistributedGraph(torch.stack([v, (v + 1) % 8]), x=torch.ones(8, 2), y=v % 2,
                    train_idx=v[:4], valid_idx=v[4:6], test_idx=v[6:])
with_graph = kept_mb()
assert tt.keep_freed_memory()
print(before, with_graph, kept_mb())
"""


class FreedMemory(unittest.TestCase):
    def probe(self, **env):
        # glibc's policy, with torch's own allocator (Tessera's keeps freed blocks: TorchMemory).
        env = {**os.environ, "TESSERA_TORCH_MEMORY": "off", **env}
        out = subprocess.run([sys.executable, "-c", _HEAP_PROBE], check=True, text=True,
                             capture_output=True, env=env).stdout
        return [float(value) for value in out.split()]

    def test_freed_blocks_are_kept_for_reuse_only_when_asked(self):
        # glibc returns a freed 64 MB block at once (its own mmap); keep_freed_memory() (or
        # TESSERA_TORCH_MALLOC=keep at the first graph) makes it stay for the next result.
        before, with_graph, kept = self.probe()
        self.assertLess(before, 16, "glibc returned the block before any graph")
        self.assertLess(with_graph, 16, "a graph alone must not change malloc's policy")
        self.assertGreater(kept, 48, "keep_freed_memory() returned the freed block")
        before, with_graph, kept = self.probe(TESSERA_TORCH_MALLOC="keep")
        self.assertLess(before, 16)
        self.assertGreater(with_graph, 48, "TESSERA_TORCH_MALLOC=keep did not apply")


# Run in a fresh interpreter with TESSERA_TORCH_MEMORY as given: where torch's tensors come from.
_ALLOCATOR_PROBE = """
import torch
import tessera.torch as tt
big = torch.ones(3 * 2**20)  # 12 MiB
print(tt.tensor_memory(), big.data_ptr() % 2**21, sep="|")
"""


class TorchMemory(unittest.TestCase):
    """torch's CPU tensors of 4 MiB and more in Tessera's host memory (2 MiB aligned blocks,
    kept when freed for the next tensor of the size), smaller ones and the values unchanged."""

    def setUp(self):
        if tt._memory_module is None:  # not built, or not for this torch
            self.skipTest(tt.tensor_memory())
        self.assertTrue(tt.use_tessera_memory(True))

    def tearDown(self):
        tt.use_tessera_memory(True)

    def test_large_tensors_come_from_tesseras_blocks_and_are_reused(self):
        self.assertEqual(tt.tensor_memory(), "tessera (blocks of 4 MiB and more)")
        big = torch.empty(2**20 + 5)  # just over 4 MiB
        self.assertEqual(big.data_ptr() % 2**21, 0, "not one of Tessera's 2 MiB-aligned blocks")
        address = big.data_ptr()
        del big
        again = torch.empty(2**20 + 5)
        self.assertEqual(again.data_ptr(), address, "the freed block was not reused")
        small = torch.empty(1000)
        self.assertEqual(small.data_ptr() % 64, 0)
        relu = torch.relu(torch.full((3000, 1000), -1.5).index_fill_(1, torch.tensor([7]), 2.0))
        self.assertEqual(relu.data_ptr() % 2**21, 0)
        self.assertEqual(float(relu.sum()), 2.0 * 3000)

    def test_torchs_allocator_is_given_back_and_taken_again(self):
        kept = torch.arange(2**21, dtype=torch.float32)  # 8 MiB, made in Tessera's memory
        self.assertFalse(tt.use_tessera_memory(False))
        self.assertEqual(tt.tensor_memory(), "torch's (use_tessera_memory(False))")
        other = torch.empty(2**22)
        self.assertNotEqual(other.data_ptr() % 2**21, 0, "still Tessera's block")
        self.assertTrue(tt.use_tessera_memory(True))
        del other  # freed by torch's allocator, which made it
        self.assertEqual(float(kept[-1]), 2**21 - 1)

    def test_training_gives_the_same_bits_in_either_memory(self):
        # (5000, 256) float32 activations: 5 MB, so every hidden result is one of Tessera's blocks.
        graph = tt.DistributedGraph(ring_data(n=5000, f=32))

        def train(tessera_memory):
            tt.use_tessera_memory(tessera_memory)
            torch.manual_seed(0)
            convs = torch.nn.ModuleList([tt.GCNConv(32, 256), tt.GCNConv(256, 2)])
            optimizer = torch.optim.Adam(convs.parameters(), lr=0.01)
            losses = []
            for epoch in range(3):
                graph.set_epoch(epoch)
                optimizer.zero_grad()
                h = tt.dropout(torch.relu(convs[0](graph.x, graph)), graph, p=0.5)
                out = convs[1](h, graph)
                loss = F.cross_entropy(out[graph.train_mask], graph.y[graph.train_mask])
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            return losses, [p.detach().clone() for p in convs.parameters()]

        losses, weights = train(True)
        torch_losses, torch_weights = train(False)
        self.assertEqual(losses, torch_losses)
        for mine, theirs in zip(weights, torch_weights):
            self.assertTrue(torch.equal(mine, theirs))

    def test_release_memory_gives_the_freed_blocks_back(self):
        def resident():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

        big = torch.ones(16 * 2**20)  # 64 MiB in one of Tessera's blocks, every page touched
        del big  # kept for the next tensor of its size
        kept = resident()
        self.assertGreaterEqual(tt.release_memory(), 64 * 2**20)
        self.assertLess(resident(), kept - 48 * 2**20, "the freed block is still resident")
        self.assertEqual(tt.release_memory(), 0)
        small = torch.ones(10)  # in use, and torch's: untouched
        tt.release_memory()
        self.assertEqual(float(small.sum()), 10.0)

    def test_another_torch_version_or_a_missing_library_leaves_torchs_allocator(self):
        with mock.patch.object(torch, "__version__", "2.1.0+cpu"):
            module, why = tt._torch_memory_module()
        self.assertIsNone(module)
        self.assertRegex(why, r"^tessera._torch_memory was built for torch 1\.\d+, this is torch "
                              r"2\.1\.0\+cpu$")
        missing = ImportError("libc10.so.1.13: cannot open shared object file")
        with mock.patch.object(importlib, "import_module", side_effect=missing):
            module, why = tt._torch_memory_module()
        self.assertIsNone(module)
        self.assertRegex(why, r"^tessera._torch_memory_\d+_\d+ does not load: libc10.so.1.13: "
                              r"cannot open")

    def probe(self, value):
        env = {**os.environ, "TESSERA_TORCH_MEMORY": value}
        return subprocess.run([sys.executable, "-c", _ALLOCATOR_PROBE], text=True,
                              capture_output=True, env=env)

    def test_the_environment_chooses_at_import(self):
        memory, offset = self.probe("on").stdout.strip().split("|")
        self.assertEqual((memory, offset), ("tessera (blocks of 4 MiB and more)", "0"))
        memory, offset = self.probe("off").stdout.strip().split("|")
        self.assertEqual(memory, "torch's (TESSERA_TORCH_MEMORY=off)")
        self.assertNotEqual(offset, "0")
        bad = self.probe("yes")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("ValueError: TESSERA_TORCH_MEMORY=yes: expected on or off", bad.stderr)


class Devices(unittest.TestCase):
    def test_a_cpu_graph_holds_cpu_tensors(self):
        graph = tt.DistributedGraph(ring_data())
        self.assertEqual(graph.device, torch.device("cpu"))
        for name in ("x", "y", "train_mask", "train_idx", "node_ids"):
            self.assertEqual(getattr(graph, name).device, graph.device, name)
        self.assertEqual(tt.aggregate(graph.x, graph).device, graph.device)

    def test_device_cuda_without_a_gpu_is_refused_on_every_rank(self):
        try:
            graph = tt.DistributedGraph(ring_data(), device="cuda")
        except RuntimeError as e:
            self.assertRegex(str(e), r"device 'cuda' requested, but (no usable CUDA GPU|this "
                                     r"build of Tessera has no CUDA)")
            return
        self.assertEqual(graph.device.type, "cuda")
        self.skipTest(f"Tessera uses a GPU here ({graph.device}): torch_cuda.py tests it")


class BadInputIsValueError(unittest.TestCase):
    def test_bad_inputs_name_the_argument(self):
        data = ring_data()
        graph = tt.DistributedGraph(data)
        x = torch.randn(60, 4)
        cases = [
            (r"x: expected shape \(num_local = 60, F\), got \(59, 4\)",
             lambda: tt.aggregate(x[:59], graph)),
            (r"op: expected one of gcn, mean, sum, got 'max'", lambda: tt.aggregate(x, graph, "max")),
            (r"x: expected a floating-point torch tensor", lambda: tt.aggregate(x.long(), graph)),
            (r"graph: expected a tessera.torch.DistributedGraph", lambda: tt.aggregate(x, "g")),
            (r"edge_index: expected a tessera.torch.DistributedGraph .* got torch.Tensor",
             lambda: tt.GCNConv(4, 2)(x, data.edge_index)),
            (r"edge_weight: the graph's operators are unweighted",
             lambda: tt.GCNConv(4, 2)(x, graph, torch.ones(120))),
            (r"aggr: expected 'mean', 'sum' or 'add', got 'max'",
             lambda: tt.SAGEConv(4, 2, aggr="max")),
            (r"flow: GCNConv aggregates along the edges' direction \(source_to_target\), "
             r"got 'target_to_source'", lambda: tt.GCNConv(4, 2, flow="target_to_source")),
            (r"flow: SAGEConv aggregates", lambda: tt.SAGEConv(4, 2, flow="target_to_source")),
            (r"node_dim: the rows are \(nodes, channels\)", lambda: tt.GCNConv(4, 2, node_dim=1)),
            (r"decomposed_layers: expected a positive int, got 0",
             lambda: tt.SAGEConv(4, 2, decomposed_layers=0)),
            (r"fill_value: not an option of PyG's GCNConv that tessera.torch takes",
             lambda: tt.GCNConv(4, 2, fill_value=2.0)),
            (r"x: float64 value .* has no exact float32",
             lambda: tt.DistributedGraph(data.edge_index, x=data.x.double() + 1e-9, y=data.y,
                                         train_mask=data.train_mask)),
            (r"train_mask: a mask needs num_nodes = 60 entries, got 59",
             lambda: tt.DistributedGraph(data.edge_index, x=data.x, y=data.y,
                                         train_mask=data.train_mask[:59])),
            (r"y: expected integer labels, got float32",
             lambda: tt.DistributedGraph(data.edge_index, x=data.x, y=data.x[:, 0],
                                         train_mask=data.train_mask)),
            (r"edge_index: expected shape \(2, E\), got \(3, 120\)",
             lambda: tt.DistributedGraph(torch.zeros(3, 120, dtype=torch.long), x=data.x,
                                         y=data.y, train_mask=data.train_mask)),
            (r"x: the node features are required",
             lambda: tt.DistributedGraph(data.edge_index, y=data.y, train_mask=data.train_mask)),
            (r"source: expected a PyG Data", lambda: tt.DistributedGraph(None)),
            (r"unknown option 'codex'", lambda: tt.DistributedGraph(data, codex="int8")),
            (r"codec=adaptive re-plans its bits", lambda: tt.DistributedGraph(data,
                                                                               codec="adaptive")),
            (r"parallel=pipeline", lambda: tt.DistributedGraph(data, parallel="pipeline")),
            (r"feature_dtype=bf16 is how Tessera's own trainer keeps its features",
             lambda: tt.DistributedGraph(data, feature_dtype="bf16")),
            (r"tensor: expected a float32 or float64 torch tensor",
             lambda: graph.all_reduce_(torch.ones(3, dtype=torch.int32))),
            (r"call 2 is not in \[0, num_layers = 2\)",
             lambda: tt.aggregate(x, graph, call=2)),
            (r"p: expected a probability in \[0, 1\), got 1.0",
             lambda: tt.dropout(x, graph, p=1.0)),
            (r"x: expected shape \(num_local = 60, F\)", lambda: tt.dropout(x[:3], graph)),
            (r"x: the tensor is on meta, the graph's rows on cpu \(x.to\(graph.device\)\)",
             lambda: tt.aggregate(torch.empty(60, 4, device="meta"), graph)),
        ]
        for pattern, call in cases:
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(ValueError, pattern):
                    call()

    def test_the_extension_checks_its_arrays(self):
        graph = tt.DistributedGraph(ring_data())._core
        x = np.zeros((60, 4), np.float32)
        read_only = np.zeros((60, 4), np.float32)
        read_only.flags.writeable = False
        cases = [
            (r"out: shares memory with x", lambda: graph.aggregate("gcn", x, x, 0)),
            (r"out: the array is read-only", lambda: graph.aggregate("gcn", read_only, x, 0)),
            (r"d_x: expected 4 columns as d_out, got 3",
             lambda: graph.aggregate_backward("gcn", np.zeros((60, 3), np.float32), x, 0)),
            (r"x: expected dtype float32, got float64",
             lambda: graph.aggregate("gcn", x, np.zeros((60, 4)), 0)),
            (r"x: expected 60 rows \(this rank's num_local\), got 6",
             lambda: graph.aggregate("gcn", x, x[:6].copy(), 0)),
            (r"values: expected dtype float32 or float64, got int64",
             lambda: graph.all_reduce_sum(np.zeros(3, np.int64))),
            (r"split: expected train, valid or test, got 'val'", lambda: graph.split_rows("val")),
            (r"aggregate_on_device: this graph's rows are host memory",
             lambda: graph.aggregate_on_device("gcn", x.ctypes.data, x.ctypes.data, 4, 0,
                                                  False)),
            (r"dropout_on_device: this graph's rows are host memory",
             lambda: graph.dropout_on_device(x.ctypes.data, x.ctypes.data, 4, 0.5, 0, False)),
        ]
        for pattern, call in cases:
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(ValueError, pattern):
                    call()


if __name__ == "__main__":
    unittest.main()
