#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One command from a fresh Debian 12 machine to the whole test suite: set-up (packages, a build
# with warnings as errors, requiring the shared datasets and PT-Scotch), then every test under
# ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
TESSERA_CMAKE_ARGS="-DTESSERA_WERROR=ON -DTESSERA_REQUIRE_DATASETS=ON -DTESSERA_REQUIRE_PTSCOTCH=ON ${TESSERA_CMAKE_ARGS:-}" scripts/setup.sh
cd "${TESSERA_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900 "$@"
