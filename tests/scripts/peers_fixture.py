# SPDX-License-Identifier: Apache-2.0
"""The peer benchmark's results rebuilt from canned outputs: data/peers/ holds the manifest and
the per-run metrics and summary files of one small run_peers.py run (Cora and arxiv-like, a few
epochs; DGL marked unavailable by hand, log files and local paths left out), which
bench/peers/report.py turns into the results object that run_peers.py writes and
scripts/plot.py draws.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "peers")


def report_module(source):
    sys.path.insert(0, os.path.join(source, "bench", "peers"))
    import report
    return report


def manifest():
    with open(os.path.join(DATA, "manifest.json")) as f:
        return json.load(f)


def results(source):
    return report_module(source).results_from_manifest(manifest(), DATA)
