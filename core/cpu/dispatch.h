// SPDX-License-Identifier: Apache-2.0
// Which CPU kernels run: the instruction-set levels this build has (the baseline, and with
// TESSERA_CPU_DISPATCH also AVX, AVX2 and AVX-512; core/cpu/cpu_level.h), the widest this CPU
// and its operating system support, and the one in use — that one unless the TESSERA_CPU
// environment variable names another (baseline, avx, avx2 or avx512). Every level gives the
// same bits, so the choice changes speed only. Also the OpenMP thread count.
#pragma once

#include <string>
#include <vector>

#include "core/cpu/kernels_cpu.h"

namespace tessera::cpu {

enum class CpuLevel { Baseline, Avx, Avx2, Avx512 };

const char* to_string(CpuLevel level);  // "baseline", "avx", "avx2", "avx512"
std::vector<CpuLevel> built_cpu_levels();
bool cpu_supports(CpuLevel level);  // this CPU and operating system run it
// The level in use: $TESSERA_CPU, else the widest built level the CPU supports. InvalidArgument
// naming TESSERA_CPU when it names no level, one not built, or one this CPU lacks.
CpuLevel cpu_level();
// Tests and benchmarks: run `level` from now on (InvalidArgument as above).
void set_cpu_level(CpuLevel level);

// The kernels of the level in use.
const KernelTable& kernels();

// Where the SpMM kernels prefetch the rows of x they are about to gather (core/cpu/spmm.cc):
// into L1 (prefetcht0) or into L2 only (prefetcht1). Whole rows prefetched into L1 hold the L1's
// few miss buffers; on an AMD EPYC (Zen 4) prefetching into L2 made SpMM 1.4-1.6 times as fast
// from 32 columns up, and training epochs 1.08-1.25 times as fast; on an AMD EPYC (Zen 5) it
// gained nothing, L1 being as fast or a little faster (docs/performance.md). The same values
// either way. $TESSERA_SPMM_PREFETCH (l1 or l2), else default_spmm_prefetch_target of this CPU;
// InvalidArgument naming the variable when it names neither.
enum class PrefetchTarget { L1, L2 };
const char* to_string(PrefetchTarget target);  // "l1", "l2"
PrefetchTarget spmm_prefetch_target();
// The default for a CPU of this vendor and family (CPUID's, extended family included): L2 on
// AMD's families 0x17 and 0x19 (Zen 1 to 4), L1 on Zen 5 (0x1A) and on every other CPU.
PrefetchTarget default_spmm_prefetch_target(bool amd, int family);
// Tests and benchmarks: prefetch into `target` from now on.
void set_spmm_prefetch_target(PrefetchTarget target);

// OpenBLAS's GEMM kernels against this CPU: the core OpenBLAS chose (DYNAMIC_ARCH builds pick
// one when the library loads) and the widest of its x86-64 cores this CPU runs. OpenBLAS 0.3.21
// falls back to an older core on CPUs it does not know (Prescott, SSE3 only, on a Xeon with
// AVX512-FP16; Haswell on an AMD EPYC with AVX-512), and GEMM is then slower than it can be.
// OPENBLAS_CORETYPE=<best>, set before the program starts, selects the better core; Tessera's
// programs set it themselves (use_best_blas_core).
struct BlasKernels {
  std::string chosen;   // openblas_get_corename(), e.g. "SkylakeX"
  std::string best;     // e.g. "SkylakeX"; empty when no claim can be made
  bool weaker = false;  // chosen is a known core with narrower vectors than best
  std::string own;      // OpenBLAS's own choice when use_best_blas_core replaced it, else empty
};
BlasKernels blas_kernels();
// The first call in a program's main(), before MPI or any thread of the program's own starts.
// When OPENBLAS_CORETYPE is unset and OpenBLAS chose a weaker core than this CPU runs, the
// program starts again in the same process (execv of /proc/self/exe with the same argv) with
// OPENBLAS_CORETYPE=<best>: OpenBLAS reads the variable only when it loads. A value the user
// set is kept, a weaker one included. Returns when nothing is to be done, in the restarted
// program (which then reports the replaced core as BlasKernels::own), or when the exec failed.
void use_best_blas_core(char** argv);
// The OpenBLAS cores worth comparing on this CPU, narrowest first: one per vector width it runs
// (Prescott, SandyBridge, Haswell, SkylakeX), Zen beside Haswell, Cooperlake when it has
// AVX512-BF16. Benchmarks measure GEMM with each (OPENBLAS_CORETYPE in a child process).
std::vector<std::string> openblas_cores_this_cpu_runs();
// The ISA level of an OpenBLAS x86-64 core name (any case), or -1 when unknown: 0 SSE, 1 AVX,
// 2 AVX2, 3 AVX-512.
int openblas_core_level(const std::string& core);

// "avx512 (built: baseline, avx, avx2, avx512), SpMM prefetch l2; BLAS: OpenBLAS 0.3.21 ...
// Haswell ...", and
// when OpenBLAS's core is weaker than the CPU allows, "; OpenBLAS core Haswell is weaker than
// this CPU's SkylakeX (set OPENBLAS_CORETYPE=SkylakeX)", or after use_best_blas_core replaced
// the core, "; OpenBLAS core SkylakeX chosen by Tessera (OpenBLAS chose Haswell)": what --version
// and the summary's provenance say of the CPU code.
std::string cpu_kernels_description();

// OpenMP threads of the kernels (threads <= 0: unchanged).
void set_num_threads(int threads);
int num_threads();

}  // namespace tessera::cpu
