// SPDX-License-Identifier: Apache-2.0
// Tessera's GPU work inside a call from a library that queues its own kernels on a CUDA stream of
// its own (torch): the call runs on the caller's device, after what the caller queued before it,
// and what the caller queues after it runs after the call's results are written; the caller's
// current GPU is as it was when the call returns. Everything here does nothing on the CPU.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace tessera {

// While alive: `device` is the current GPU of this thread (with `make_current` false, it is
// left as it is: the set-up in the scope chooses); the destructor restores the GPU that was
// current before (also when the scope ends with an exception). Work that allocates, uploads or
// frees on a GPU for a caller runs under one, so that the caller's current GPU stays its own.
class CurrentDevice {
 public:
  explicit CurrentDevice(Device device, bool make_current = true);
  ~CurrentDevice();
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  // The thread's GPU before (-1: nothing to restore, or on the CPU). [[maybe_unused]]: a build
  // without the CUDA backend keeps no GPU (clang's -Wunused-private-field).
  [[maybe_unused]] int previous_ = -1;
};

// One call's scope: `device` current (as CurrentDevice), and Tessera's compute stream there
// waits for the work queued on `stream` so far (a cudaStream_t as an integer; 0 is the legacy
// default stream). finish() has `stream` wait for the work Tessera queued on its compute stream
// since.
class CallerStream {
 public:
  CallerStream(Device device, std::uintptr_t stream);
  void finish();

 private:
  CurrentDevice current_;
  [[maybe_unused]] Device device_;
  [[maybe_unused]] std::uintptr_t stream_ = 0;
};

// Whether `ptr` is memory of `device`: for the CPU, memory no GPU owns; for a GPU, memory CUDA
// allocated on that GPU (device or managed memory). On a machine with a GPU the question makes a
// CUDA context, if the process has none.
bool memory_on(Device device, const void* ptr);

}  // namespace tessera
