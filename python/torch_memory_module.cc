// SPDX-License-Identifier: Apache-2.0
// The Python module `tessera._torch_memory_<major>_<minor>`: torch's CPU allocator (c10) served
// from Tessera's host memory for blocks of `min_bytes` or more, so that the large tensors torch
// allocates afresh every step (a ReLU's result, its gradient) reuse the blocks freed the step
// before instead of faulting a new mapping's pages in again (core/host_memory.h); smaller blocks
// stay with the allocator torch had. Built against libtorch-dev's c10 of that torch version only:
// tessera.torch imports it when torch's version matches the name.
#include <pybind11/pybind11.h>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "tessera/distributed_graph.h"

namespace {

// The size of each block handed out, by its address: free_rows takes the size given to
// allocate_rows, and c10's raw deleter gets the address alone (context == data, as for torch's
// own allocator, so raw_allocate and raw_deallocate work too). Large blocks only: a few dozen.
class BlockSizes {
 public:
  void add(void* data, std::size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    bytes_[data] = bytes;
  }
  // The block's size, forgotten; 0 when `data` is not one of these blocks.
  std::size_t take(void* data) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = bytes_.find(data);
    if (it == bytes_.end()) return 0;
    const std::size_t bytes = it->second;
    bytes_.erase(it);
    return bytes;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> bytes_;
};

BlockSizes& block_sizes() {
  // Never destroyed: tensors in static storage may be freed after any other static object.
  static auto* sizes = new BlockSizes();
  return *sizes;
}

// The previous allocator's raw deleter, for the small blocks raw_allocate got from it.
c10::DeleterFnPtr g_previous_raw_deleter = nullptr;

void free_block(void* data) {
  if (data == nullptr) return;
  if (const std::size_t bytes = block_sizes().take(data); bytes > 0) {
    tessera::free_rows(data, bytes);
  } else if (g_previous_raw_deleter != nullptr) {
    g_previous_raw_deleter(data);
  }
}

// Every CPU tensor's memory: Tessera's for large blocks, the previous allocator's for the rest.
// Each DataPtr carries its own deleter, so tensors allocated before install() or after
// uninstall() are freed by whichever allocator made them.
class TesseraCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t bytes) const override {
    if (bytes == 0 || bytes < min_bytes_) return previous_->allocate(bytes);
    void* data = tessera::allocate_rows(bytes);
    block_sizes().add(data, bytes);
    return {data, data, &free_block, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }

  // c10 keeps the allocator of the highest priority set so far; the same priority replaces it,
  // so uninstall() can put the previous one back.
  static constexpr std::uint8_t kPriority = 10;

  bool installed() const { return c10::GetCPUAllocator() == this; }
  std::size_t min_bytes() const { return min_bytes_; }

  void install(std::size_t min_bytes) {
    if (!installed()) {
      previous_ = c10::GetCPUAllocator();
      g_previous_raw_deleter = previous_->raw_deleter();
    }
    min_bytes_ = min_bytes;
    c10::SetCPUAllocator(this, kPriority);
  }

  void uninstall() {
    if (installed()) c10::SetCPUAllocator(previous_, kPriority);
  }

 private:
  c10::Allocator* previous_ = nullptr;
  std::size_t min_bytes_ = 0;
};

TesseraCpuAllocator& allocator() {
  // Never destroyed: tensors in static storage may be freed after any other static object.
  static auto* instance = new TesseraCpuAllocator();
  return *instance;
}

}  // namespace

PYBIND11_MODULE(TESSERA_TORCH_MEMORY_MODULE, m) {
  m.doc() = "torch's CPU allocator served from Tessera's host memory for large blocks";
  m.def(
      "install", [](std::size_t min_bytes) { allocator().install(min_bytes); },
      pybind11::arg("min_bytes"),
      "Serve torch's CPU blocks of min_bytes or more from Tessera's host memory from now on.");
  m.def(
      "uninstall", [] { allocator().uninstall(); },
      "Give torch back the allocator it had before install().");
  m.def(
      "installed", [] { return allocator().installed(); },
      "Whether torch's CPU tensors are allocated here now.");
  m.def(
      "min_bytes", [] { return allocator().min_bytes(); },
      "The smallest block served from Tessera's host memory.");
}
