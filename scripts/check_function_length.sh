#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Lists every function longer than MAX lines (default 80) in the library parts (core, comm,
# datasets, partition, layers, engine, api), longest first, using Universal Ctags (Debian's
# universal-ctags) for where each function starts and ends; .cu files count as C++.
# Exit status 1 when there is any, so CI (ctest: function_length) keeps them short.
#   scripts/check_function_length.sh [MAX]
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-80}
command -v ctags >/dev/null || { echo "ctags not found: install Debian's universal-ctags" >&2; exit 2; }
ctags --version 2>/dev/null | grep -q "Universal Ctags" ||
  { echo "ctags is not Universal Ctags: install Debian's universal-ctags" >&2; exit 2; }
offenders=$(ctags -R --languages=C++ --map-C++=+.cu --kinds-C++=f --fields=+ne -x \
    --_xformat="%{line} %{end} %{input} %{name}" core comm datasets partition layers engine api |
  awk -v max="$max" '$2 > 0 && $2 - $1 + 1 > max {print $2 - $1 + 1, $3 ":" $1, $4}' | sort -rn)
if [ -n "$offenders" ]; then
  echo "functions over $max lines (lines, file:line, name):"
  echo "$offenders"
  exit 1
fi
echo "no function over $max lines in core comm datasets partition layers engine api"
