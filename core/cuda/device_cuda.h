// SPDX-License-Identifier: Apache-2.0
// The CUDA DeviceBackend (core/device.h): memory from the caching pool, copies and
// zeroing queued on the compute stream. device.cc registers it for DeviceKind::Cuda.
#pragma once

#include "core/device.h"

namespace tessera::cuda {

// The backend of GPU `index`; throws Error(Cuda) with the reason when no such GPU is usable.
DeviceBackend& device_backend(int index);

}  // namespace tessera::cuda
