#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The unit and multi-rank tests under AddressSanitizer + UndefinedBehaviorSanitizer (.ci/run
# runs this after the main suite). A tree of its own (-O1, every error fatal), without the
# Python module, benchmarks and CPU dispatch.
# Environment: TESSERA_SANITIZE_BUILD_DIR (build-asan); extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TESSERA_SANITIZE_BUILD_DIR:-build-asan}
datasets=${TESSERA_SHARED_DATASETS:-$PWD/../shared/datasets}
# -Werror stays off here: GCC 12 reports false -Wmaybe-uninitialized inside libstdc++ (std::regex)
# when instrumented. -g1: line tables only, enough for file:line in the reports (a fifth less
# compile time than -g).
# Ninja: one invocation builds the chosen targets in parallel (make runs its goals one by one).
if [ -f "$build/CMakeCache.txt" ] &&
   ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build/CMakeCache.txt"; then
  rm -rf "$build"  # a tree of another generator, from before
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DTESSERA_SANITIZE=address,undefined -DTESSERA_CUDA=OFF -DTESSERA_CPU_DISPATCH=OFF \
  -DTESSERA_BUILD_PYTHON=OFF -DTESSERA_BUILD_BENCH=OFF -DTESSERA_REQUIRE_DATASETS=ON \
  -DTESSERA_SHARED_DATASETS="$datasets" >/dev/null
# Leaks inside MPICH, HDF5, OpenMP and OpenBLAS (their own, at exit) are not Tessera's.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/sanitize.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# MPICH's hwloc loads the PCI plugin of libhwloc-plugins (which Open MPI's packages, installed
# for PT-Scotch, bring in); what it allocates is reported after the plugin is unloaded, under no
# module name a suppression could match. MPICH does not need the PCI topology here.
export HWLOC_COMPONENTS=-pci
# Left to the main suite: accuracy and long training runs (2 to 6 minutes each under ASan on two
# cores: the pipeline and codec equivalence suites at 2 and 4 ranks, synthetic training to
# accuracy), the scripted tests of train_gcn's exit codes, messages and outputs (30 to 80 s each
# under ASan; the library code they reach is instrumented in the suites above), the install
# tests (a second, uninstrumented build), and tests of the docs, plots, Slurm and the include
# rules (no instrumented code).
skipped='test_ogb_conventions|test_train_cora|test_train_synthetic|test_codec_training_np4'
skipped+='|test_pipeline_training_np2|test_pipeline_training_np4|test_slurm_job|docs_commands'
skipped+='|test_distributed_cli|test_checkpoint_cli|test_outputs'
skipped+='|test_plot|test_peers_report|layering_.*|function_length|test_installed_package|test_pip_install'
cd "$build"
# Only the programs the selected tests run (their targets pull in the apps they call): the
# skipped suites are not compiled. The programs are the build-tree paths in the tests' commands
# as CMake wrote them (CTestTestfile.cmake; ctest's own listing omits programs not yet built),
# less folders and files with an extension (work dirs, scripts).
targets=$(find . -name CTestTestfile.cmake -exec cat {} + | python3 -c '
import os, re, sys
build, skipped = sys.argv[1], re.compile("^(" + sys.argv[2] + ")$")
names = set()
for line in sys.stdin:
    test = re.match(r"add_test\(\[=\[(.*?)\]=\] (.*)\)\s*$", line)
    if not test or skipped.match(test.group(1)):
        continue
    for path in re.findall(re.escape(build) + r"/[^\s=\"]+", test.group(2)):
        if "." not in os.path.basename(path) and not os.path.isdir(path):  # work dirs
            names.add(os.path.basename(path))
print(" ".join(sorted(names)))' "$(pwd -P)" "$skipped")
[ -n "$targets" ] || { echo "sanitize.sh: found no test programs to build" >&2; exit 1; }
# shellcheck disable=SC2086  # a list of target names
cmake --build . -j "$(nproc)" --target $targets
ctest --output-on-failure --timeout 900 \
  -E "^(${skipped})$" \
  "$@"
