# SPDX-License-Identifier: Apache-2.0
"""Run under mpiexec -n K: the same script as on one process, the graph cut into K parts.
Every rank gets the same run statistics, its own nodes' embeddings, and rank 0 the whole graph's
embeddings through gather_embeddings; the accuracy equals the one-process run's."""
import sys

import numpy as np

import tessera

options = dict(num_layers=2, hidden_channels=16, epochs=20, lr=0.05, seed=1)
session = tessera.Session(**options)
session.load("synth:default")
runs = session.train()["runs"]
h = session.embeddings(0)
ids = session.node_ids()
assert h.shape == (len(ids), 16), h.shape
assert 0 < len(ids) < session.num_nodes or session.size == 1
everything = session.gather_embeddings(0)
if session.rank == 0:
    assert everything.shape == (session.num_nodes, 16), everything.shape
    np.testing.assert_array_equal(everything[ids], h)
    expected = float(sys.argv[1]) if len(sys.argv) > 1 else None
    print(f"ranks {session.size}: final test {runs[0]['final_test']:.6f}")
    if expected is not None:
        assert abs(runs[0]["final_test"] - expected) < 1e-9, (runs[0]["final_test"], expected)
else:
    assert everything.shape == (0, 0) or everything.size == 0

# The same model trained as a pipeline (every rank a stage; with 4 ranks also 2 parts x 2 stages):
# every rank reports the same run, each holds only its stage's weights (together all of them),
# and embeddings are refused with a ValueError naming the mode.
modes = [dict(parallel="pipeline")]
if session.size == 4:
    modes.append(dict(parallel="hybrid", stages=2))
for mode in modes:
    piped = tessera.Session(**{**options, "num_layers": 4}, **mode)  # a layer per stage at least
    piped.load("synth:default")
    piped_runs = piped.train()["runs"]
    assert len(piped_runs) == 1 and piped_runs[0]["final_test"] > 0.0, piped_runs
    names = sorted(piped.weights().keys())
    assert names and all(n.startswith("convs.") for n in names), names
    try:
        piped.embeddings(0)
        raise AssertionError("embeddings() accepted in pipeline mode")
    except ValueError as e:
        assert "parallel=" + mode["parallel"] in str(e), str(e)
    if session.rank == 0:
        print(f"ranks {session.size}, {mode}: final test {piped_runs[0]['final_test']:.6f}")

# Early stopping asked by rank 0 alone ends training on every rank after the same epoch.
stopping = tessera.Session(**options)
stopping.load("synth:default")
result = stopping.train(on_epoch=lambda e: stopping.rank != 0 or e["epoch"] < 5)
assert result["early_stopped"] and result["stop_epoch"] == 5, result

# Weights set back under PyG's names on every rank (collective, with an evaluation pass): the
# logits of this rank's nodes stay what training left.
before = stopping.logits()
stopping.load_state_dict(stopping.state_dict())
np.testing.assert_allclose(stopping.logits(), before, rtol=1e-6, atol=1e-6)
