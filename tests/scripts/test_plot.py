# SPDX-License-Identifier: Apache-2.0
"""scripts/plot.py renders every figure from the small files in data/ (a metrics file of two Cora
runs, four summaries at 1-3 ranks with codecs and partitioners, and peer-benchmark results built
from data/peers/ by bench/peers/report.py); each PNG must be valid (signature, CRCs, IHDR, image
data that inflates to its size) and non-trivial (size, coloured pixels). Bad input must fail with
the file named.

  /usr/bin/python3 tests/scripts/test_plot.py SOURCE_DIR WORK_DIR   (exit 77: no matplotlib)
"""
import glob
import importlib.util
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import png_check  # noqa: E402
import peers_fixture  # noqa: E402

SOURCE, WORK = None, None
EXPECTED = ["loss.png", "accuracy.png", "epoch_time.png", "bytes_per_epoch.png", "partition.png",
            "peers_epoch_time.png", "peers_time_to_accuracy.png"]
MIN_BYTES = 10_000            # an empty 800x500 figure with axes alone is smaller
MIN_WIDTH, MIN_HEIGHT = 400, 300
MIN_CHROMATIC_SHARE = 0.002   # data are drawn in colour: the sparsest figure here has 0.4%


def plot(*args):
    return subprocess.run([sys.executable, os.path.join(SOURCE, "scripts", "plot.py"), *args],
                          capture_output=True, text=True)


class PlotTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = os.path.join(WORK, "figures")
        os.makedirs(cls.out, exist_ok=True)
        for old in glob.glob(os.path.join(cls.out, "*.png")):
            os.remove(old)
        results = peers_fixture.results(SOURCE)
        cls.results_path = os.path.join(WORK, "peers_results.json")
        with open(cls.results_path, "w") as f:
            json.dump(results, f)
        data = os.path.join(HERE, "data")
        inputs = ([os.path.join(data, "metrics_cora.jsonl")]
                  + sorted(glob.glob(os.path.join(data, "summary_*.json")))
                  + [cls.results_path])
        cls.done = plot(*inputs, "-o", cls.out)

    def test_command_succeeds_and_lists_every_figure(self):
        self.assertEqual(self.done.returncode, 0, self.done.stderr)
        listed = sorted(os.path.basename(p) for p in self.done.stdout.split())
        self.assertEqual(listed, sorted(EXPECTED))

    def test_every_figure_is_a_valid_nontrivial_png(self):
        for name in EXPECTED:
            with self.subTest(figure=name):
                path = os.path.join(self.out, name)
                self.assertTrue(os.path.exists(path), f"{name} was not written")
                size = os.path.getsize(path)
                self.assertGreaterEqual(size, MIN_BYTES, f"{name}: only {size} bytes")
                info = png_check.read_png(path)
                self.assertGreaterEqual(info["width"], MIN_WIDTH, f"{name}: {info}")
                self.assertGreaterEqual(info["height"], MIN_HEIGHT, f"{name}: {info}")
                info.update(png_check.colour_stats(path))
                self.assertGreaterEqual(info["chromatic_share"], MIN_CHROMATIC_SHARE,
                                        f"{name}: almost nothing drawn in colour: {info}")

    def test_broken_png_is_detected(self):
        path = os.path.join(self.out, "loss.png")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF
        broken = os.path.join(WORK, "broken.png")
        with open(broken, "wb") as f:
            f.write(data)
        with self.assertRaises(png_check.PngError):
            png_check.read_png(broken)

    def test_unknown_json_is_refused_with_its_name(self):
        bad = os.path.join(WORK, "not_a_summary.json")
        with open(bad, "w") as f:
            json.dump({"hello": 1}, f)
        done = plot(bad, "-o", os.path.join(WORK, "bad"))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("not_a_summary.json", done.stderr)

    def test_missing_file_is_refused_with_its_name(self):
        done = plot(os.path.join(WORK, "missing.jsonl"), "-o", os.path.join(WORK, "bad"))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("missing.jsonl", done.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    SOURCE, WORK = sys.argv[1], sys.argv[2]
    os.makedirs(WORK, exist_ok=True)
    if importlib.util.find_spec("matplotlib") is None:
        print("test_plot: skipped: matplotlib is missing (apt-get install python3-matplotlib)")
        sys.exit(77)
    unittest.main(argv=[sys.argv[0], "-v"])
