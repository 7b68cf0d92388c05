// SPDX-License-Identifier: Apache-2.0
// One level's KernelTable (core/cpu/kernels_cpu.h): the addresses of the kernels compiled for
// the level of this compilation (TESSERA_CPU_LEVEL).
#include "core/cpu/kernels_cpu.h"

namespace tessera::cpu::TESSERA_CPU_NS {

const KernelTable& kernel_table() {
#define TESSERA_CPU_ADDRESS(type, name) &name,
  static constexpr KernelTable table = {TESSERA_CPU_KERNELS(TESSERA_CPU_ADDRESS)};
#undef TESSERA_CPU_ADDRESS
  return table;
}

}  // namespace tessera::cpu::TESSERA_CPU_NS
