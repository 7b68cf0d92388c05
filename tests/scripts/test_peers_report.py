# SPDX-License-Identifier: Apache-2.0
"""The peer benchmark's parsing and table code on canned outputs, with no network and no peer
run: time to accuracy and epoch medians on hand-made metrics; run_peers.py's flags, commands and
rotation; bench/peers/report.py on the files of a small real run (data/peers/: Cora and
arxiv-like, DGL marked unavailable), checked against figures recomputed here from those files;
run_models.py's flags, commands and report on a hand-made run of one case.

  python3 tests/scripts/test_peers_report.py SOURCE_DIR WORK_DIR
"""
import contextlib
import io
import json
import os
import statistics
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peers_fixture  # noqa: E402

SOURCE = None
report = None
run_peers = None
run_models = None
WORK = None


def metrics(valid, epoch_s=1.0, eval_s=0.5):
    return [{"epoch": i + 1, "valid_acc": v, "epoch_s": epoch_s, "eval_s": eval_s}
            for i, v in enumerate(valid)]


def run_sweep(args, curves, tessera_1_seconds=None):
    """run_peers.sage_sweep with target 0.7 and each setting's run faked: curves[batch size] =
    (validation accuracies, wall seconds). Returns (batch size, target, give_up_after) of each
    run in order."""
    calls = []

    def fake_run(args, manifest, system, dataset, path, rep, epochs, target, setting,
                 give_up_after):
        calls.append((setting["batch_size"], target, give_up_after))
        valid, wall = curves[setting["batch_size"]]
        stem = f"m{setting['batch_size']}.jsonl"
        os.makedirs(args.work, exist_ok=True)
        with open(os.path.join(args.work, stem), "w") as f:
            for row in metrics(valid, epoch_s=1.0, eval_s=0.0):
                f.write(json.dumps(row) + "\n")
        return {"metrics": stem, "wall_s": wall}

    saved = run_peers.run_system, report.tta_target, report.tessera_1_time_to_target
    run_peers.run_system = fake_run
    report.tta_target = lambda runs, root, dataset: 0.7
    report.tessera_1_time_to_target = lambda runs, root, dataset, target: tessera_1_seconds
    try:
        run_peers.sage_sweep(args, {"runs": []}, "arxiv-like", "DATA")
    finally:
        run_peers.run_system, report.tta_target, report.tessera_1_time_to_target = saved
    return calls


class TimeToAccuracy(unittest.TestCase):
    def test_wall_time_less_the_epochs_after_the_first_hit(self):
        got = report.time_to_accuracy(metrics([0.5, 0.7, 0.8, 0.9]), wall_s=10.0, target=0.75)
        # Epoch 3 reaches 0.8 >= 0.75; epoch 4 (1 s + 0.5 s eval) came after it.
        self.assertEqual(got, {"seconds": 8.5, "epoch": 3})

    def test_target_met_exactly_counts(self):
        got = report.time_to_accuracy(metrics([0.5, 0.75]), wall_s=4.0, target=0.75)
        self.assertEqual(got, {"seconds": 4.0, "epoch": 2})

    def test_unevaluated_epochs_are_skipped_and_never_reached_is_none(self):
        self.assertIsNone(report.time_to_accuracy(metrics([None, 0.5, None]), 5.0, 0.6))
        got = report.time_to_accuracy(metrics([None, 0.7, None]), 6.0, 0.6)
        self.assertEqual(got, {"seconds": 4.5, "epoch": 2})

    def test_epoch_median_leaves_out_the_warm_up(self):
        rows = [{"epoch": i + 1, "epoch_s": s} for i, s in enumerate([9.0, 8.0, 1.0, 2.0, 3.0])]
        self.assertEqual(report.timed_epoch_median(rows, warmup=2), 2.0)
        self.assertEqual(report.timed_epoch_median(rows, warmup=10), 3.0)  # too few: all


class Harness(unittest.TestCase):
    def test_quick_and_defaults(self):
        args = run_peers.parse_flags(["--quick"])
        self.assertEqual((args.reps, args.epochs_arxiv, args.sage_epochs), (1, 15, 1))
        args = run_peers.parse_flags([])
        self.assertEqual(args.systems, run_peers.DEFAULT_SYSTEMS)
        self.assertEqual(args.datasets, ["cora", "arxiv-like"])

    def test_bad_flags_are_refused(self):
        for bad in (["--systems", "tessera-1,torch-magic"], ["--datasets", "products"],
                    ["--threads", "1"]):
            err = io.StringIO()
            with self.subTest(flags=bad), self.assertRaises(SystemExit), \
                    contextlib.redirect_stderr(err):
                run_peers.parse_flags(bad)
            self.assertIn(bad[0], err.getvalue())

    def test_every_system_gets_the_same_model_and_its_threads(self):
        args = run_peers.parse_flags(["--threads", "4", "--build", "B", "--venv", "V"])
        for system in run_peers.ALL_SYSTEMS:
            with self.subTest(system=system):
                cmd = run_peers.command(args, system, "DATA", 100, 1, "M.jsonl", "S.json")
                flag = dict(zip(cmd, cmd[1:]))
                self.assertEqual(flag["--dataset"], "DATA")
                self.assertEqual(flag["--num-layers"], "3")
                self.assertEqual(flag["--hidden-channels"], "256")
                self.assertEqual(flag["--dropout"], "0.5")
                self.assertEqual(flag["--seed"], "1")
                self.assertEqual((flag["--metrics"], flag["--summary"]), ("M.jsonl", "S.json"))
                if system == "pyg-sage-minibatch":
                    self.assertEqual(flag["--epochs"], str(args.sage_epochs))
                    # The sweep's first setting, with its own learning rate.
                    self.assertEqual((flag["--batch-size"], flag["--fanouts"], flag["--lr"]),
                                     ("1024", "5,5,5", "0.003"))
                else:
                    self.assertEqual(flag["--epochs"], "100")
                    self.assertEqual(flag["--lr"], "0.01")
                if system == "tessera-2":
                    self.assertEqual(cmd[1:3], ["-n", "2"])
                    self.assertEqual(flag["--threads"], "2")
                else:
                    self.assertEqual(flag["--threads"], "4")
                if system.startswith("tessera"):
                    self.assertIn(os.path.join("B", "apps", "train_gcn"), cmd)
                else:
                    self.assertEqual(cmd[0], os.path.join("V", "bin", "python"))

    def test_the_sweep_is_parsed_and_bad_settings_are_refused(self):
        args = run_peers.parse_flags(["--sage-sweep", "512:10,5,2:0.004  2048:5,5,5:1e-2"])
        self.assertEqual(args.sage_sweep, [{"batch_size": 512, "fanouts": [10, 5, 2], "lr": 0.004},
                                           {"batch_size": 2048, "fanouts": [5, 5, 5], "lr": 0.01}])
        self.assertEqual(len(run_peers.parse_flags([]).sage_sweep), 4)
        self.assertEqual(len(run_peers.parse_flags(["--quick"]).sage_sweep), 1)
        self.assertEqual(run_peers.parse_flags(["--datasets", "products-like"]).datasets,
                         ["products-like"])
        for bad, why in (("1024:5,5:0.01", "2 fan-outs for 3 layers"),
                         ("1024:5,5,5", "expected BATCH:FANOUTS:LR"),
                         ("big:5,5,5:0.01", "must be integers"),
                         ("0:5,5,5:0.01", "must be positive"), ("", "no setting given")):
            err = io.StringIO()
            with self.subTest(sweep=bad), self.assertRaises(SystemExit), \
                    contextlib.redirect_stderr(err):
                run_peers.parse_flags(["--sage-sweep", bad])
            self.assertIn("--sage-sweep", err.getvalue())
            self.assertIn(why, err.getvalue())

    def test_a_setting_runs_with_its_flags_and_give_up_time(self):
        args = run_peers.parse_flags(["--build", "B", "--venv", "V"])
        setting = {"batch_size": 512, "fanouts": [10, 5, 2], "lr": 0.004}
        cmd = run_peers.command(args, "pyg-sage-minibatch", "DATA", 100, 0, "M", "S", 0.7,
                                setting, 42.25)
        flag = dict(zip(cmd, cmd[1:]))
        self.assertEqual((flag["--batch-size"], flag["--fanouts"], flag["--lr"]),
                         ("512", "10,5,2", "0.004"))
        self.assertEqual((flag["--stop-at-valid"], flag["--give-up-after"]), ("0.700000", "42.2"))
        self.assertNotIn("--give-up-after", run_peers.command(args, "pyg-sage-minibatch", "D",
                                                              1, 0, "M", "S", 0.7, setting))
        self.assertEqual(report.sage_name(setting), "pyg-sage-minibatch 512:10,5,2:0.004")
        self.assertEqual(report.file_stem(report.sage_name(setting)),
                         "pyg-sage-minibatch-512_10-5-2_0.004")

    def test_the_sweep_gives_each_run_the_best_time_so_far(self):
        # Settings that reach the target (0.7) at 30 s, never, and at 20 s: the second runs with
        # 30 s to beat, the third too, and a fourth would get 20 s.
        args = run_peers.parse_flags(["--work", os.path.join(WORK, "sweep"), "--sage-sweep",
                                      "1:1,1,1:0.1 2:1,1,1:0.1 3:1,1,1:0.1 4:1,1,1:0.1"])
        curves = {1: ([0.5, 0.71], 30.0), 2: ([0.5, 0.6], 50.0), 3: ([0.72], 20.0),
                  4: ([0.75], 10.0)}
        self.assertEqual(run_sweep(args, curves),
                         [(1, 0.7, None), (2, 0.7, 30.0), (3, 0.7, 30.0), (4, 0.7, 20.0)])

    def test_the_give_up_factor_caps_every_setting_at_a_multiple_of_tessera_1(self):
        # tessera-1 reached the target at 10 s; factor 4: a 40 s limit until a setting beats it.
        args = run_peers.parse_flags(["--work", os.path.join(WORK, "sweep-cap"), "--sage-sweep",
                                      "1:1,1,1:0.1 2:1,1,1:0.1 3:1,1,1:0.1",
                                      "--sage-give-up-factor", "4"])
        curves = {1: ([0.5], 45.0), 2: ([0.5, 0.71], 30.0), 3: ([0.5], 31.0)}
        self.assertEqual(run_sweep(args, curves, tessera_1_seconds=10.0),
                         [(1, 0.7, 40.0), (2, 0.7, 40.0), (3, 0.7, 30.0)])
        for bad in ("0", "-2", "nan"):
            with self.subTest(bad=bad), contextlib.redirect_stderr(io.StringIO()) as err, \
                    self.assertRaises(SystemExit):
                run_peers.parse_flags(["--sage-give-up-factor", bad])
            self.assertIn("--sage-give-up-factor", err.getvalue())

    def test_a_setting_given_up_before_its_first_evaluation_is_recorded(self):
        # The run's summary has no accuracy at all (best_valid_acc null, no metrics lines); the
        # harness logs it as such, keeps it in the manifest and the report gives a bound for it.
        args = run_peers.parse_flags(["--work", os.path.join(WORK, "no-eval"), "--sage-sweep",
                                      "4096:5,5,5:0.003"])
        setting = args.sage_sweep[0]

        def fake_run_one(cmd, env, log_path, timeout):
            flag = dict(zip(cmd, cmd[1:]))
            open(flag["--metrics"], "w").close()
            with open(flag["--summary"], "w") as f:
                json.dump({"best_valid_acc": None, "stopped": "gave_up"}, f)
            return 0, 800.0, 1 << 30, 2.0

        manifest = {"runs": []}
        with mock.patch.object(run_peers, "run_one", fake_run_one), \
                contextlib.redirect_stdout(io.StringIO()) as out:
            entry = run_peers.run_system(args, manifest, report.SAGE, "g", "DATA", 0, 5, 0.7,
                                         setting, 790.0)
        self.assertIn("800.0 s, best valid none (no evaluation)", out.getvalue())
        self.assertEqual(manifest["runs"], [entry])
        self.assertEqual(entry["give_up_after"], 790.0)
        name = report.sage_name(setting)
        records = [{"system": "tessera-1", "dataset": "g", "rep": 0, "wall_s": 400.0,
                    "best_valid_acc": 0.8, "valid_curve": [0.8], "epoch_s_list": [1.0],
                    "eval_s_list": [0.0], "stopped": None},
                   {"system": name, "dataset": "g", "rep": 0, "wall_s": 800.0,
                    "best_valid_acc": None, "valid_curve": [], "epoch_s_list": [],
                    "eval_s_list": [], "stopped": "gave_up"}]
        text = report.markdown_tta(report.time_to_accuracy_table(records, "g",
                                                                 give_up_factor=2))
        self.assertIn("every setting needs more than 800 s. tessera-1 / the best setting: < 0.50.",
                      text)

    def test_each_run_gets_its_dataset_s_time_limit_and_a_stopped_run_says_so(self):
        work = os.path.join(WORK, "timeouts")
        limits = []

        def fake_run_one(cmd, env, log_path, timeout):
            limits.append(timeout)
            with open(log_path, "w") as f:
                f.write("epoch 24\n")
            return -9, timeout + 0.5, 1 << 30, 2.0

        for flags, dataset, limit in (([], "arxiv-like", 1800.0),
                                      ([], "products-like", 14400.0),
                                      (["--timeout", "60"], "products-like", 60.0)):
            args = run_peers.parse_flags(["--work", work] + flags)
            with self.subTest(flags=flags, dataset=dataset), \
                    mock.patch.object(run_peers, "run_one", fake_run_one), \
                    contextlib.redirect_stdout(io.StringIO()), \
                    self.assertRaises(SystemExit) as stopped:
                run_peers.run_system(args, {"runs": []}, "tessera-1", dataset, "D", 0, 3)
            self.assertEqual(limits[-1], limit)
            self.assertIn(f"tessera-1 on {dataset} was stopped at --timeout {limit:g} s",
                          str(stopped.exception.code))
            self.assertIn("epoch 24", str(stopped.exception.code))
        for bad in ("0", "-5", "nan"):
            with self.subTest(bad=bad), contextlib.redirect_stderr(io.StringIO()) as err, \
                    self.assertRaises(SystemExit):
                run_peers.parse_flags(["--timeout", bad])
            self.assertIn("--timeout", err.getvalue())

    def test_tessera_1_time_to_target_reads_its_run(self):
        root = os.path.join(WORK, "t1-tta")
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, "t1.jsonl"), "w") as f:
            for row in metrics([0.5, 0.7, 0.8], epoch_s=2.0, eval_s=1.0):
                f.write(json.dumps(row) + "\n")
        runs = [{"system": "tessera-2", "dataset": "g", "rep": 0, "metrics": "none",
                 "wall_s": 1.0},
                {"system": "tessera-1", "dataset": "g", "rep": 0, "metrics": "t1.jsonl",
                 "wall_s": 20.0}]
        # Epoch 2 reaches 0.7; epoch 3 (3 s) came after it.
        self.assertEqual(report.tessera_1_time_to_target(runs, root, "g", 0.7), 17.0)
        self.assertIsNone(report.tessera_1_time_to_target(runs, root, "g", 0.9))
        self.assertIsNone(report.tessera_1_time_to_target(runs, root, "other", 0.7))

    def test_rotation_puts_every_system_first_once(self):
        systems = ["a", "b", "c", "d"]
        orders = [run_peers.rotation(systems, rep) for rep in range(len(systems))]
        self.assertEqual(sorted(o[0] for o in orders), systems)
        for o in orders:
            self.assertEqual(sorted(o), systems)


class CannedRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.manifest = peers_fixture.manifest()
        cls.results = report.results_from_manifest(cls.manifest, peers_fixture.DATA)
        cls.warmup = cls.manifest["settings"]["warmup"]

    def files(self, system, dataset, rep=0):
        e = next(e for e in self.manifest["runs"] if (e["system"], e["dataset"], e["rep"]) ==
                 (system, dataset, rep))
        with open(os.path.join(peers_fixture.DATA, e["summary"])) as f:
            summary = json.load(f)
        with open(os.path.join(peers_fixture.DATA, e["metrics"])) as f:
            rows = [json.loads(line) for line in f]
        return e, summary, rows

    def epoch_median(self, rows):
        return statistics.median(r["epoch_s"] for r in rows if r["epoch"] > self.warmup)

    def test_ratios_are_recomputed_from_the_files(self):
        for dataset in ("cora", "arxiv-like"):
            _, ts, tm = self.files("tessera-1", dataset)
            _, ps, pm = self.files("pyg-gcn", dataset)
            got = self.results["table"][dataset]["pyg-gcn"]["ratios"]["tessera-1"]
            with self.subTest(dataset=dataset):
                self.assertAlmostEqual(got["epoch_time"],
                                       self.epoch_median(tm) / self.epoch_median(pm))
                self.assertAlmostEqual(got["peak_rss"],
                                       ts["peak_rss_bytes_max"] / ps["peak_rss_bytes"])

    def test_two_ranks_report_the_largest_rank_and_the_sum(self):
        _, s, _ = self.files("tessera-2", "cora")
        row = self.results["table"]["cora"]["tessera-2"]
        self.assertEqual(row["ranks"], 2)
        self.assertEqual(row["peak_rss_bytes"], s["peak_rss_bytes_max"])
        self.assertEqual(row["peak_rss_bytes_sum"], s["peak_rss_bytes_sum"])

    def test_unavailable_peer_is_listed_with_its_reason(self):
        reason = self.manifest["unavailable"]["dgl-gcn"]
        for dataset, rows in self.results["table"].items():
            with self.subTest(dataset=dataset):
                self.assertEqual(rows["dgl-gcn"], {"system": "dgl-gcn", "unavailable": reason})
        self.assertIn(f"| dgl-gcn | not run: {reason} |", report.render(self.results))

    def test_time_to_accuracy_uses_tessera_1_best_valid_less_one_point(self):
        (tta,) = self.results["time_to_accuracy"]
        _, ts, _ = self.files("tessera-1", "arxiv-like")
        self.assertAlmostEqual(tta["target_valid_acc"], ts["best_valid_acc"] - 0.01)
        t1 = next(r for r in tta["systems"] if r["system"] == "tessera-1")
        self.assertEqual(t1["reached"], 1)  # its own best is above its target
        entry, _, rows = self.files("tessera-1", "arxiv-like")
        want = report.time_to_accuracy(rows, entry["wall_s"], tta["target_valid_acc"])
        self.assertAlmostEqual(t1["seconds"], want["seconds"])
        systems = [r["system"] for r in tta["systems"]]
        self.assertIn("pyg-sage-minibatch", systems)

    def test_the_anchor_is_the_fastest_setting_that_reached_the_target(self):
        def record(system, valid, wall, stopped=None):
            return {"system": system, "dataset": "g", "rep": 0, "wall_s": wall,
                    "best_valid_acc": max(valid), "valid_curve": valid,
                    "epoch_s_list": [1.0] * len(valid), "eval_s_list": [0.0] * len(valid),
                    "stopped": stopped}
        fast, slow, quit = (report.sage_name({"batch_size": b, "fanouts": [5], "lr": 0.01})
                            for b in (4096, 1024, 512))
        records = [record("tessera-1", [0.5, 0.8, 0.81], 12.0),  # target 0.80: at 11 s
                   record("tessera-2", [0.5, 0.6, 0.8], 22.0),
                   record(fast, [0.79, 0.8], 44.0), record(slow, [0.81], 100.0),
                   record(quit, [0.6], 50.0, "gave_up")]
        tta = report.time_to_accuracy_table(records, "g")
        anchor = tta["anchor"]
        self.assertEqual((anchor["system"], anchor["seconds"], anchor["settings_tried"]),
                         (fast, 44.0, 3))
        self.assertAlmostEqual(anchor["tessera_1_over_anchor"], 11.0 / 44.0)
        self.assertAlmostEqual(anchor["tessera_2_over_anchor"], 22.0 / 44.0)
        text = report.markdown_tta(tta)
        self.assertIn(f"`{fast}`, 44.0 s to the target. tessera-1 / anchor: 0.25. "
                      "tessera-2 / anchor: 0.50.", text)
        self.assertIn("> 50 (gave up: past the best so far)", text)
        records = records[:2] + [record(quit, [0.6], 50.0, "gave_up")]
        self.assertIn("No setting of the mini-batch sweep (1 tried) reached the target",
                      report.markdown_tta(report.time_to_accuracy_table(records, "g")))
        # Under a give-up factor (4 × tessera-1's 11 s = 44 s), a bound: a run that gave up
        # counts from the limit, one that ran out of epochs from its end.
        records = records[:2] + [record(quit, [0.6], 50.0, "gave_up"),
                                 record(slow, [0.6, 0.7], 60.0, "epochs")]
        text = report.markdown_tta(report.time_to_accuracy_table(records, "g", give_up_factor=4))
        self.assertIn("No anchor, but a bound: every setting needs more than 44 s. tessera-1 / "
                      "the best setting: < 0.25. tessera-2 / the best setting: < 0.50.", text)
        self.assertIn("> 50 (gave up: past 4× tessera-1's time)", text)
        records[-1] = record(slow, [0.6, 0.7], 30.0, "epochs")
        text = report.markdown_tta(report.time_to_accuracy_table(records, "g", give_up_factor=4))
        self.assertIn("every setting needs more than 30 s. tessera-1 / the best setting: < 0.37.",
                      text)

    def test_acceptance_figures(self):
        acc = self.results["acceptance"]
        row = self.results["table"]["arxiv-like"]
        t, p = row["tessera-1"], row["pyg-gcn"]
        self.assertAlmostEqual(acc["epoch_time_ratio"], t["epoch_s"] / p["epoch_s"])
        self.assertAlmostEqual(acc["peak_rss_ratio"], t["peak_rss_bytes"] / p["peak_rss_bytes"])
        self.assertAlmostEqual(acc["test_acc_at_best_valid_diff_points"],
                               100 * (t["test_acc_at_best_valid"] - p["test_acc_at_best_valid"]))

    def test_markdown_has_every_table_and_the_setup(self):
        md = report.render(self.results)
        for needle in ("#### cora", "#### arxiv-like", "#### Time to", "#### Acceptance",
                       "| tessera-1 | 1 × ", "| tessera-2 | 2 × ", "Versions: Tessera",
                       "Command: `bench/peers/run_peers.py"):
            with self.subTest(needle=needle):
                self.assertIn(needle, md)
        self.assertEqual(self.results["table"]["arxiv-like"]["pyg-sage-minibatch"].get("ratios"),
                         None)

    def test_the_setup_names_only_what_ran(self):
        """A run of Tessera alone names no peer versions and no mini-batch sweep."""
        self.assertIn("a sweep of", report.render(self.results))
        manifest = json.loads(json.dumps(self.manifest))
        manifest["runs"] = [e for e in manifest["runs"] if e["system"].startswith("tessera")]
        manifest["versions"] = {"tessera": "abc"}
        lines = report.setup_lines(report.results_from_manifest(manifest, peers_fixture.DATA))
        self.assertIn("Versions: Tessera abc.", lines)
        self.assertFalse(any("sweep" in line for line in lines), lines)

    def test_each_systems_blas_is_reported(self):
        # The peers' summaries name torch's BLAS; Tessera's its kernels and OpenBLAS's core.
        self.assertIn("pyg-gcn: torch's BLAS: mkl", report.render(self.results))
        summary = {"provenance": {"cpu_kernels": "avx512; BLAS: OpenBLAS 0.3.21 Cooperlake"}}
        record = report.run_record("tessera-1", "cora", 0, 0, 1.0, summary, metrics([0.5]), 0)
        self.assertEqual(report.blas_line([record]), "BLAS of each system, as it reported: "
                         "tessera-1: avx512; BLAS: OpenBLAS 0.3.21 Cooperlake.\n")

    def test_a_tessera_build_changed_mid_run_is_reported(self):
        manifest = json.loads(json.dumps(self.manifest))
        tessera = [e for e in manifest["runs"] if e["system"].startswith("tessera")]
        for i, e in enumerate(tessera):
            e["tessera_binary"] = "aaaa" if i == 0 else "bbbb"
        results = report.results_from_manifest(manifest, peers_fixture.DATA)
        self.assertIn("**Tessera's build changed during the run**: 2 different binaries "
                      "(aaaa, bbbb)", report.render(results))
        self.assertNotIn("build changed", report.render(self.results))

    def test_a_faster_peer_is_said_plainly(self):
        table = {"g": {"tessera-1": {"system": "tessera-1", "ranks": 1, "threads_per_rank": 2,
                                     "epoch_s": 2.0, "peak_rss_bytes": 100},
                       "pyg-gcn": {"system": "pyg-gcn", "ranks": 1, "threads_per_rank": 2,
                                   "epoch_s": 1.0, "peak_rss_bytes": 200}}}
        report.add_ratios(table)
        self.assertEqual(table["g"]["pyg-gcn"]["ratios"]["tessera-1"],
                         {"epoch_time": 2.0, "peak_rss": 0.5})
        (sentence,) = report.peer_faster_sentences(table)
        self.assertIn("pyg-gcn trains an epoch 2.00× faster", sentence)
        self.assertIn("**2.00** (peer better)", report._ratio(2.0))


class ModelsHarness(unittest.TestCase):
    """run_models.py (GAT and GCNII against PyG): flags, commands and the report of a hand-made
    run of one case."""

    def test_every_system_gets_the_case_flags_and_its_threads(self):
        args = run_models.parse_flags(["--threads", "4", "--build", "B", "--venv", "V"])
        settings = dict(run_models.CASES["gcnii-cora"])
        for system in run_models.SYSTEMS:
            with self.subTest(system=system):
                cmd = run_models.command(args, system, settings, "DATA", 1, "R")
                flag = dict(zip(cmd, cmd[1:]))
                self.assertEqual(cmd[-len(settings["flags"]) - 12:-12], settings["flags"])
                self.assertEqual((flag["--dataset"], flag["--epochs"], flag["--seed"]),
                                 ("DATA", "100", "1"))
                self.assertEqual((flag["--metrics"], flag["--summary"]), ("R.jsonl", "R.json"))
                self.assertEqual(flag["--threads"], "2" if system == "tessera-2" else "4")

    def test_cases_and_flags(self):
        args = run_models.parse_flags(["--quick", "--cases", "gat-cora"])
        self.assertEqual((args.reps, args.datasets), (1, ["cora"]))
        err = io.StringIO()
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(err):
            run_models.parse_flags(["--cases", "gin-cora"])
        self.assertIn("gin-cora", err.getvalue())

    def test_report_of_one_case(self):
        root = os.path.join(WORK, "models")
        os.makedirs(os.path.join(root, "gat-cora"), exist_ok=True)
        runs = []
        for system, epoch_s, rss in (("tessera-1", 0.02, 100e6), ("tessera-2", 0.03, 60e6),
                                     ("pyg", 0.04, 400e6)):
            stem = os.path.join("gat-cora", f"{system}-rep0")
            with open(os.path.join(root, stem + ".jsonl"), "w") as f:
                for epoch in (1, 2, 3):
                    f.write(json.dumps({"epoch": epoch, "epoch_s": 9.0 if epoch == 1 else epoch_s,
                                        "eval_s": 0.01, "valid_acc": 0.8}) + "\n")
            with open(os.path.join(root, stem + ".json"), "w") as f:
                json.dump({"peak_rss_bytes_max": rss, "peak_rss_bytes": rss, "threads": 2,
                           "best_valid_acc": 0.8, "test_acc_at_best_valid": 0.81,
                           "final_test_acc": 0.8, "versions": {"torch": "T"}}, f)
            runs.append({"system": system, "dataset": "gat-cora", "rep": 0, "seed": 0,
                         "wall_s": 1.0, "metrics": stem + ".jsonl", "summary": stem + ".json",
                         "load_average": 0.5, "load_during": 0.6})
        manifest = {"date": "D", "command": "C", "machine": {"cores": 2}, "cpu": ["Model name: X"],
                    "settings": {"threads": 2, "reps": 1},
                    "cases": {"gat-cora": dict(run_models.CASES["gat-cora"], warmup=1, reps=1)},
                    "versions": {"tessera": "V", "train_gcn": "A\nB", "torch": "T"},
                    "case_loads": [{"case": "gat-cora", "rep": 0, "waited_s": 0,
                                    "before": [0.5, 0.4, 0.3], "after": [0.7, 0.5, 0.3]}],
                    "runs_dir": root, "runs": runs}
        res = run_models.results(manifest)
        pyg = res["table"]["gat-cora"]["pyg"]
        self.assertAlmostEqual(pyg["ratios"]["tessera-1"]["epoch_time"], 0.5)  # warm-up 1 left out
        self.assertAlmostEqual(pyg["ratios"]["tessera-2"]["peak_rss"], 0.15)
        text = run_models.render(res)
        self.assertIn("| gat-cora | 0 | 0 | 0.50 0.40 0.30 | 0.70 0.50 0.30 |", text)
        self.assertIn("| pyg | 1 × 2 | 40 |", text)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    SOURCE = sys.argv[1]
    report = peers_fixture.report_module(SOURCE)
    import run_peers as run_peers_module  # on the path since report_module
    run_peers = run_peers_module
    import run_models as run_models_module
    run_models = run_models_module
    WORK = sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
