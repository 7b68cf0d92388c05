#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a trained model: set-up (packages, build), then
# train_gcn on the embedded default dataset (a synthetic graph generated on the fly).
# Extra arguments go to train_gcn, e.g. scripts/demo.sh --model sage --epochs 100.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec "${TESSERA_BUILD_DIR:-build}/apps/train_gcn" "$@"
