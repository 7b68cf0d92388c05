#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the build into a scratch prefix and uses only that prefix: the example consumer
# (examples/cpp) through find_package(Tessera) and through pkg-config, run at 1 and 2 ranks; the
# C++ and Python examples of docs/cpp.md and docs/python.md (the fenced blocks after each
# "<!-- ci: FILE -->" marker), built and run at 2 ranks; the installed Python module.
# Usage: test_installed_package.sh BUILD_DIR SOURCE_DIR MPIEXEC [PYTHON]
set -euo pipefail
build=$1 src=$2 mpiexec=$3 python=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

step() { echo "== $*"; }
fail() { echo "FAILED: $*" >&2; exit 1; }

step "install into $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/tessera/tessera.h lib/libtessera.so lib/cmake/Tessera/TesseraConfig.cmake \
         lib/pkgconfig/tessera.pc bin/train_gcn; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done

step "example consumer via find_package(Tessera)"
cmake -S "$src/examples/cpp" -B "$work/example" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/example" >/dev/null
# grep reads all of ldd's output (no -q): under pipefail, an early exit would end ldd by SIGPIPE
# and fail the check although the line matched.
ldd "$work/example/embed_ring" | grep -F "$prefix/lib/libtessera.so" >/dev/null ||
  fail "embed_ring does not load libtessera from the prefix: $(ldd "$work/example/embed_ring" | grep tessera)"
out=$("$mpiexec" -n 2 "$work/example/embed_ring")
echo "$out"
grep -Eq '^ranks 2, test accuracy (0\.9[0-9]*|1\.000)' <<<"$out" || fail "embed_ring at 2 ranks"

step "example consumer via pkg-config"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs tessera)
# shellcheck disable=SC2086
g++ "$src/examples/cpp/embed_ring.cc" $flags -o "$work/embed_ring_pc"
out=$("$work/embed_ring_pc")
echo "$out"
grep -q '^ranks 1, test accuracy' <<<"$out" || fail "embed_ring (pkg-config) at 1 rank"

step "installed train_gcn"
"$prefix/bin/train_gcn" --epochs 2 --num-layers 2 --hidden-channels 8 --quiet >/dev/null

# The fenced block after "<!-- ci: NAME -->" in the page $3 (under the source tree), written to
# $2/NAME.
extract() {
  awk -v name="$1" '
    $0 == "<!-- ci: " name " -->" { want = 1; next }
    want && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$src/$3" > "$2/$1"
  [ -s "$2/$1" ] || fail "$3 has no example marked <!-- ci: $1 -->"
}

step "docs/cpp.md: the C++ example"
mkdir -p "$work/readme-cpp"
extract CMakeLists.txt "$work/readme-cpp" docs/cpp.md
extract main.cc "$work/readme-cpp" docs/cpp.md
cmake -S "$work/readme-cpp" -B "$work/readme-cpp/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/readme-cpp/build" >/dev/null
binary=$(find "$work/readme-cpp/build" -maxdepth 1 -type f -executable | head -1)
(cd "$work/readme-cpp" && "$mpiexec" -n 2 "$binary")

if [ -n "$python" ]; then
  site=$prefix/lib/python3/dist-packages
  step "installed Python module"
  where=$(PYTHONPATH="$site" "$python" -c 'import tessera; print(tessera.__file__)')
  [[ $where == "$site"/* ]] || fail "python imported tessera from $where, not from the prefix"
  if [[ -f /usr/include/c10/core/CPUAllocator.h ]]; then  # libtorch-dev: torch's allocator module
    memory=$(PYTHONPATH="$site" "$python" -c 'import tessera.torch as t; print(t.tensor_memory())')
    [[ $memory == "tessera "* ]] || fail "the installed tessera.torch.tensor_memory() is $memory"
  fi
  step "docs/python.md: the Python example"
  mkdir -p "$work/readme-py"
  extract example.py "$work/readme-py" docs/python.md
  (cd "$work/readme-py" && PYTHONPATH="$site" "$mpiexec" -n 2 "$python" example.py)
fi
echo "installed package: OK"
