// SPDX-License-Identifier: Apache-2.0
// Tessera's GPU work inside a call from a library that queues its own kernels on a CUDA stream of
// its own (torch): the call runs on the caller's device, after what the caller queued before it,
// and what the caller queues after it runs after the call's results are written. Everything
// here does nothing on the CPU.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace tessera {

// One call's scope. The constructor makes `device` the current GPU of this thread and has
// Tessera's compute stream there wait for the work queued on `stream` so far (a cudaStream_t as
// an integer; 0 is the legacy default stream). finish() has `stream` wait for the work Tessera
// queued on its compute stream since. The destructor restores the thread's previous GPU (also
// when the call ends with an exception, when finish() is not reached).
class CallerStream {
 public:
  CallerStream(Device device, std::uintptr_t stream);
  ~CallerStream();
  CallerStream(const CallerStream&) = delete;
  CallerStream& operator=(const CallerStream&) = delete;
  void finish();

 private:
  Device device_;
  std::uintptr_t stream_ = 0;
  int previous_ = -1;  // the thread's GPU before the call (-1: none was set or on the CPU)
};

// Whether `ptr` is memory of `device`: for the CPU, memory no GPU owns; for a GPU, memory CUDA
// allocated on that GPU (device or managed memory).
bool memory_on(Device device, const void* ptr);

}  // namespace tessera
