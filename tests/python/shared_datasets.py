# SPDX-License-Identifier: Apache-2.0
"""The real datasets the Python tests read (TESSERA_SHARED_DATASETS): a test of them skips where
the folder is absent, and fails instead where the build requires them
(TESSERA_REQUIRE_DATASETS=1, set by the ctest of a -DTESSERA_REQUIRE_DATASETS=ON build, as CI's)."""
import os

CORA = os.path.join(os.environ.get("TESSERA_SHARED_DATASETS", ""), "cora")


def need_cora(test):
    """Skips (or fails) `test`, a unittest.TestCase, unless Cora is there."""
    path = os.path.join(CORA, "raw", "edge.csv.gz")
    if os.path.exists(path):
        return
    if os.environ.get("TESSERA_REQUIRE_DATASETS") == "1":
        test.fail(f"{path} not found: this build requires the shared datasets")
    test.skipTest(f"Cora not found at {CORA} (the shared datasets folder is absent)")
