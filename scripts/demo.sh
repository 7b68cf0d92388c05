#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One command from a fresh Debian 12 machine to a trained model: set-up (packages, build), then
# train_gcn on the embedded default dataset (a synthetic graph generated on the fly) across
# TESSERA_RANKS MPI ranks (default 4), one METIS part per rank; it prints the halo traffic per
# epoch. Extra arguments go to train_gcn, e.g. scripts/demo.sh --model sage --epochs 100.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ranks=${TESSERA_RANKS:-4}
threads=$(( $(nproc) / ranks ))
[ "$threads" -lt 1 ] && threads=1
exec mpiexec -n "$ranks" "${TESSERA_BUILD_DIR:-build}/apps/train_gcn" --threads "$threads" "$@"
