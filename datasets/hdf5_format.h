// SPDX-License-Identifier: Apache-2.0
// Internal to datasets/: the part of Tessera's HDF5 dataset format (hdf5_format.cc) that
// streaming writers share (ogb_npz.cc's converter writes the arrays itself, a block at a time).
#pragma once

#include "datasets/dataset.h"
#include "datasets/hdf5_io.h"

namespace tessera {

// The attributes of "/" but the fingerprint: format, format_version, name, task, eval_metric,
// num_classes, num_tasks, add_inverse_edge, num_edge_lines (from `dataset`'s fields; its arrays
// are not read). The arrays' layout is in hdf5_format.cc.
void write_hdf5_flags(const Dataset& dataset, hdf5::Writer& out);

}  // namespace tessera
