# SPDX-License-Identifier: Apache-2.0
# Checks shared by the benchmark smoke tests (sourced). Each prints FAIL: ... and exits 1.
# check_status STATUS NAME: the benchmark exited 0.
check_status() {
  if [ "$1" -ne 0 ]; then
    echo "FAIL: $2 exited with status $1" >&2
    exit 1
  fi
}
# check_lines OUT PATTERN...: every pattern matches a line of OUT.
check_lines() {
  out=$1
  shift
  for pattern in "$@"; do
    grep -q "$pattern" "$out" || { echo "FAIL: no line matching '$pattern'" >&2; exit 1; }
  done
}
# check_json_copy OUT LINES: the --json file holds as many JSON lines as stdout printed.
check_json_copy() {
  if [ "$(grep -c '^{' "$1")" -ne "$(grep -c '^{' "$2")" ]; then
    echo "FAIL: --json file does not hold the JSON lines printed on stdout" >&2
    exit 1
  fi
}
# check_no_scratch WORK: no tessera_bench_* scratch directory was left in WORK.
check_no_scratch() {
  if ls "$1" | grep -q '^tessera_bench_'; then
    echo "FAIL: the scratch directory was left behind in $1" >&2
    exit 1
  fi
}
