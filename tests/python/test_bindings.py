# SPDX-License-Identifier: Apache-2.0
"""The Python module on one process: Cora through the bindings equals train_gcn with the same
seed; a Graph built from NumPy arrays trains and hands back embeddings, logits, predictions and
weights; every class of bad argument is a ValueError with a clear message (never a crash)."""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import tessera
from shared_datasets import CORA, need_cora

TRAIN_GCN = os.environ.get("TESSERA_TRAIN_GCN", "")
FAST = dict(num_layers=2, hidden_channels=16, epochs=20, lr=0.05)


def two_rings(n=400, f=6):
    """Nodes v and v + 2 are linked, so each parity forms a ring; labels are the parity."""
    v = np.arange(n, dtype=np.int64)
    edge_index = np.stack([v, (v + 2) % n])
    rng = np.random.default_rng(0)
    x = rng.random((n, f), dtype=np.float32)
    y = v % 2
    x[np.arange(n), y] += 0.5
    split = v % 10
    return dict(num_nodes=n, edge_index=edge_index, x=x, y=y, train_idx=v[split < 6],
                valid_idx=v[(split >= 6) & (split < 8)], test_idx=v[split >= 8])


def blas_environment():
    """The environment for a train_gcn that runs this process's OpenBLAS kernels: train_gcn
    starts again with the best core for the CPU when OpenBLAS chose a weaker one (an imported
    module cannot), and other GEMM kernels round differently."""
    env = dict(os.environ)
    try:
        blas = ctypes.CDLL("libopenblas.so.0")  # the one the module loaded
        blas.openblas_get_corename.restype = ctypes.c_char_p
        env.setdefault("OPENBLAS_CORETYPE", blas.openblas_get_corename().decode())
    except (OSError, AttributeError):
        pass  # another BLAS: no core to match
    return env


class CoraMatchesTrainGcn(unittest.TestCase):
    def test_same_accuracy_and_loss_as_train_gcn(self):
        need_cora(self)
        flags = dict(num_layers=2, hidden_channels=16, dropout=0.5, input_dropout=0.5, lr=0.01,
                     weight_decay=5e-4, epochs=60, seed=3, normalize_features=True)
        session = tessera.Session(**flags)
        session.load(CORA)
        self.assertEqual(session.metric, "acc")
        runs = session.train()["runs"]
        with tempfile.TemporaryDirectory() as tmp:
            summary = os.path.join(tmp, "summary.json")
            cli = [TRAIN_GCN, "--dataset", CORA, "--summary", summary, "--quiet"]
            for key, value in flags.items():
                flag = "--" + key.replace("_", "-")
                cli += [flag] if value is True else [flag, str(value)]
            subprocess.run(cli, check=True, stdout=subprocess.DEVNULL, env=blas_environment())
            with open(summary) as f:
                cli_run = json.load(f)["per_run"][0]
        self.assertEqual(runs[0]["final_test"], cli_run["final_test_acc"])
        self.assertEqual(runs[0]["best_valid"], cli_run["best_valid_acc"])
        self.assertAlmostEqual(runs[0]["final_loss"], cli_run["final_loss"], places=12)
        self.assertGreater(runs[0]["final_test"], 0.7)


class ArraysInResultsOut(unittest.TestCase):
    def test_graph_from_arrays_trains_and_returns_arrays(self):
        data = two_rings()
        graph = tessera.Graph(**data, name="two-rings")
        session = tessera.Session(**FAST)
        self.assertEqual((session.rank, session.size), (0, 1))
        session.load(graph)
        self.assertEqual(session.num_nodes, 400)
        epochs = []
        runs = session.train(on_epoch=epochs.append)["runs"]
        self.assertEqual([e["epoch"] for e in epochs], list(range(1, 21)))
        self.assertGreater(runs[0]["final_test"], 0.9)
        ids = session.node_ids()  # the dataset's ids, in the renumbered (RCM) order of the rows
        np.testing.assert_array_equal(np.sort(ids), np.arange(400))
        self.assertFalse((ids == np.arange(400)).all())
        h = session.embeddings(0)
        self.assertEqual((h.shape, h.dtype), ((400, 16), np.float32))
        self.assertTrue((h >= 0).all())  # after ReLU
        logits = session.logits()
        self.assertEqual(logits.shape, (400, 2))
        np.testing.assert_array_equal(session.predictions(), logits.argmax(axis=1))
        np.testing.assert_array_equal(session.gather_embeddings(1)[ids], logits)
        weights = session.weights()
        self.assertEqual(weights["convs.0.weight"].shape, (6, 16))
        self.assertEqual(weights["convs.1.weight"].shape, (16, 2))
        self.assertIn("Run 01", session.report())

    def test_csr_input_equals_coo_input(self):
        data = two_rings()
        src, dst = data.pop("edge_index")
        order = np.argsort(dst, kind="stable")
        indptr = np.zeros(401, dtype=np.int64)
        np.add.at(indptr, dst + 1, 1)
        results = []
        for edges in (dict(edge_index=np.stack([src, dst])),
                      dict(indptr=np.cumsum(indptr), indices=src[order].copy())):
            session = tessera.Session(**FAST)
            session.load(tessera.Graph(**data, **edges))
            results.append((session.train()["runs"][0]["final_loss"], session.logits()))
        self.assertEqual(results[0][0], results[1][0])
        np.testing.assert_array_equal(results[0][1], results[1][1])

    def test_inputs_are_not_modified(self):
        data = two_rings()
        copies = {k: v.copy() for k, v in data.items() if isinstance(v, np.ndarray)}
        session = tessera.Session(normalize_features=True, **FAST)
        session.load(tessera.Graph(**data))
        session.train()
        for key, before in copies.items():
            np.testing.assert_array_equal(data[key], before, err_msg=key)


    def test_saved_model_predicts_what_training_predicted(self):
        data = two_rings()
        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(tmp, "model.h5")
            trained = os.path.join(tmp, "trained.npy")
            session = tessera.Session(save_model=model, save_predictions=trained,
                                      restore_best=True, **FAST)
            session.load(tessera.Graph(**data))
            run = session.train()["runs"][0]
            probabilities = np.load(trained)
            self.assertEqual(probabilities.shape, (400, 2))
            np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
            predicted = os.path.join(tmp, "predicted.npy")
            session = tessera.Session(predict=model, save_predictions=predicted, num_layers=7)
            session.load(tessera.Graph(**data))
            scores = session.predict()
            self.assertEqual(scores["valid"], run["best_valid"])  # restore_best's weights
            self.assertEqual(scores["test"], run["test_at_best_valid"])
            np.testing.assert_array_equal(np.load(predicted), probabilities)
            np.testing.assert_array_equal(session.predictions(),  # this rank's rows, by node_ids
                                          probabilities.argmax(axis=1)[session.node_ids()])
            with self.assertRaisesRegex(ValueError, "call predict"):
                session.train()


class InputsAsUsersHaveThem(unittest.TestCase):
    """int32 ids, exact float64 features, OGB's (N, 1) labels, boolean masks, lists and
    non-contiguous arrays train exactly as int64 / float32 / id arrays do; nothing is modified."""

    def train(self, **data):
        session = tessera.Session(**FAST)
        session.load(tessera.Graph(**data))
        run = session.train()["runs"][0]
        del run["epoch_s_median"]  # a time
        return run

    def test_converted_inputs_train_identically(self):
        data = two_rings()
        expected = self.train(**data)
        v = np.arange(400)
        wide = np.repeat(data["x"], 2, axis=1)
        converted = dict(num_nodes=400, edge_index=data["edge_index"].astype(np.int32),
                         x=wide[:, ::2].astype(np.float64), y=data["y"][:, None].astype(np.uint8),
                         train_mask=np.isin(v, data["train_idx"]),
                         valid_idx=data["valid_idx"].tolist(),
                         test_idx=data["test_idx"].astype(np.uint32))
        before = {k: np.array(a, copy=True) for k, a in converted.items() if k != "num_nodes"}
        self.assertEqual(self.train(**converted), expected)
        for key, value in before.items():
            np.testing.assert_array_equal(np.asarray(converted[key]), value, err_msg=key)


class StoppingTraining(unittest.TestCase):
    """on_epoch returning False ends training there as finished (outputs written); an exception
    in on_epoch comes out of train(); Ctrl-C ends train() with KeyboardInterrupt."""

    def test_on_epoch_false_is_early_stopping(self):
        with tempfile.TemporaryDirectory() as tmp:
            summary = os.path.join(tmp, "summary.json")
            session = tessera.Session(**{**FAST, "runs": 2, "summary": summary})
            session.load(tessera.Graph(**two_rings()))
            seen = []
            result = session.train(on_epoch=lambda e: seen.append(e["epoch"]) or e["epoch"] < 7)
            self.assertEqual(seen, list(range(1, 8)))
            self.assertTrue(result["early_stopped"])
            self.assertFalse(result["stopped"])
            self.assertEqual((len(result["runs"]), result["stop_epoch"]), (1, 7))
            self.assertGreater(result["runs"][0]["final_test"], 0.0)  # evaluated at the stop
            self.assertTrue(os.path.exists(summary))
        session = tessera.Session(**FAST)
        session.load(tessera.Graph(**two_rings()))
        self.assertFalse(session.train(on_epoch=lambda e: None)["early_stopped"])

    def test_an_exception_in_on_epoch_comes_out_of_train(self):
        session = tessera.Session(**FAST)
        session.load(tessera.Graph(**two_rings()))

        def fail(e):
            if e["epoch"] == 3:
                raise KeyError("from on_epoch")
        with self.assertRaisesRegex(KeyError, "from on_epoch"):
            session.train(on_epoch=fail)

    def test_ctrl_c_is_keyboard_interrupt(self):
        script = ("import sys, tessera\n"
                  "s = tessera.Session(num_layers=2, hidden_channels=16, epochs=1000000)\n"
                  "s.load('synth:default')\n"
                  "try:\n"
                  "    print('training', flush=True)\n"
                  "    s.train()\n"
                  "except KeyboardInterrupt:\n"
                  "    sys.exit(42)\n")
        import signal
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                 text=True, preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                                             signal.SIG_DFL))
        self.assertEqual(child.stdout.readline().strip(), "training")
        child.send_signal(signal.SIGINT)
        self.assertEqual(child.wait(timeout=60), 42)


class SlowBlasKernelsAreNamed(unittest.TestCase):
    """A Python process cannot start again with better GEMM kernels as train_gcn does: importing
    the module warns once, on rank 0 only, and names the variable to set."""

    @staticmethod
    def import_tessera(**variables):
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENBLAS_CORETYPE", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
                            "SLURM_PROCID")}
        env.update(variables)
        done = subprocess.run([sys.executable, "-c", "import tessera; print(*tessera.blas_cores())"],
                              capture_output=True, text=True, env=env, check=True)
        return done.stdout.split(), done.stderr

    def test_prescott_on_a_wider_cpu_warns_on_rank_0(self):
        cores, err = self.import_tessera(OPENBLAS_CORETYPE="Prescott")
        if len(cores) < 2:
            self.skipTest("this CPU runs no OpenBLAS kernels faster than Prescott's")
        self.assertEqual(cores[0], "Prescott")
        self.assertIn("RuntimeWarning: OpenBLAS chose its Prescott GEMM kernels", err)
        self.assertIn(f"OPENBLAS_CORETYPE={cores[1]}", err)
        self.assertEqual(err.count("RuntimeWarning"), 1, err)
        for variable in ("PMI_RANK", "SLURM_PROCID"):
            _, quiet = self.import_tessera(OPENBLAS_CORETYPE="Prescott", **{variable: "1"})
            self.assertNotIn("RuntimeWarning", quiet, variable)
        # mpiexec inside an allocation: every rank sees SLURM_PROCID=0; the launcher's rank rules.
        _, quiet = self.import_tessera(OPENBLAS_CORETYPE="Prescott", SLURM_PROCID="0", PMI_RANK="2")
        self.assertNotIn("RuntimeWarning", quiet)
        better, err = self.import_tessera(OPENBLAS_CORETYPE=cores[1])
        self.assertEqual(better, [cores[1]])
        self.assertNotIn("RuntimeWarning", err)


class BadInputIsValueError(unittest.TestCase):
    def assert_graph_refused(self, pattern, **changes):
        data = two_rings()
        data.update(changes)
        with self.assertRaisesRegex(ValueError, pattern):
            session = tessera.Session(**FAST)
            session.load(tessera.Graph(**data))

    def test_conversions_only_when_exact(self):
        data = two_rings()
        self.assert_graph_refused(r"x: float64 value .* at flat position 0 has no exact float32",
                                  x=data["x"].astype(np.float64) + 1e-9)
        self.assert_graph_refused(r"y: expected integer labels, got float32 with the "
                                  r"non-integral value 1?.5 at position 3",
                                  y=np.where(data["y"] == 1, 1.0, 0.0).astype(np.float32) +
                                  (np.arange(400) == 3) * np.float32(0.5))
        self.assert_graph_refused(r"train_idx: the value \d+ does not fit int64",
                                  train_idx=np.array([0, 2**63], dtype=np.uint64))
        self.assert_graph_refused(r"y: expected an array \(NumPy, torch or a sequence\), got "
                                  r"builtins.dict", y={"a": 1})
        self.assert_graph_refused(r"edge_index: expected integer node ids, got a boolean",
                                  edge_index=np.ones((2, 4), dtype=bool))
        self.assert_graph_refused(r"train_mask: a mask needs num_nodes = 400 entries, got 399",
                                  train_idx=None, train_mask=np.ones(399, dtype=bool))
        self.assert_graph_refused(r"valid_idx and valid_mask: give one of them",
                                  valid_mask=np.ones(400, dtype=bool))
        self.assert_graph_refused(r"y: expected labels of shape \(N\) or \(N, 1\), got "
                                  r"\(400, 2\)", y=np.stack([data["y"], data["y"]], axis=1))

    def test_the_extension_itself_takes_exact_dtypes_only(self):
        data = two_rings()
        with self.assertRaisesRegex(ValueError, r"x: expected dtype float32, got float64"):
            tessera._core.Graph(**{**data, "x": data["x"].astype(np.float64)})
        with self.assertRaisesRegex(ValueError, r"edge_index: expected dtype int64, got int32"):
            tessera._core.Graph(**{**data, "edge_index": data["edge_index"].astype(np.int32)})
        wide = np.repeat(data["x"], 2, axis=1)
        with self.assertRaisesRegex(ValueError, r"x: the array is not C-contiguous"):
            tessera._core.Graph(**{**data, "x": wide[:, ::2]})
        with self.assertRaisesRegex(ValueError, r"expected a numpy array"):
            tessera._core.Graph(**{**data, "y": [0, 1]})

    def test_out_of_range_indices(self):
        data = two_rings()
        edges = data["edge_index"].copy()
        edges[1, 7] = 400
        self.assert_graph_refused(r"GraphView.dst\[7\] = 400 is not a node id in \[0, 400\)",
                                  edge_index=edges)
        self.assert_graph_refused(r"GraphView.train_idx\[1\] = -3 is not a node id",
                                  train_idx=np.array([0, -3], dtype=np.int64))
        labels = data["y"].copy()
        labels[5] = 7
        self.assert_graph_refused(r"label", y=labels, num_classes=2)

    def test_bad_options(self):
        with self.assertRaisesRegex(ValueError, r"unknown option 'epoch'"):
            tessera.Session(epoch=3)
        with self.assertRaisesRegex(ValueError, r"option 'epochs': cannot use a value of type"):
            tessera.Session(epochs="ten")
        with self.assertRaisesRegex(ValueError, r"--epochs must be >= 1, got 0"):
            tessera.Session(epochs=0)
        with self.assertRaisesRegex(ValueError, r"load a dataset first"):
            tessera.Session(**FAST).train()
        with self.assertRaisesRegex(ValueError, r"layer 5 is not in \[0, 2\)"):
            session = tessera.Session(**FAST)
            session.load(tessera.Graph(**two_rings()))
            session.train()
            session.embeddings(5)


class OptionsFromTheTable(unittest.TestCase):
    """Session's keywords and signature are the option table's (include/tessera/options.h)."""

    def test_signature_lists_every_option_with_its_default(self):
        import inspect
        parameters = inspect.signature(tessera.Session).parameters
        options = tessera.options()
        self.assertGreaterEqual(len(options), 30)
        self.assertEqual([p for p in parameters], [o["name"] for o in options])
        for o in options:
            p = parameters[o["name"]]
            self.assertEqual(p.kind, inspect.Parameter.KEYWORD_ONLY, o["name"])
            self.assertEqual(p.default, o["default"], o["name"])
            self.assertIn(o["name"], tessera.Session.__doc__)

    def test_every_option_is_accepted_at_its_default(self):
        for o in tessera.options():
            with self.subTest(option=o["name"]):
                tessera.Session(**{o["name"]: o["default"]})


if __name__ == "__main__":
    unittest.main()
