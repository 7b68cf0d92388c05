// SPDX-License-Identifier: Apache-2.0
// The CPU kernels' level chosen once (core/cpu/dispatch.h): GCC's CPU detection (which also
// checks that the operating system saves the wide registers), TESSERA_CPU, and the tables of
// the levels compiled into this build.
#include "core/cpu/dispatch.h"

#include <cblas.h>
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif
#include <omp.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <unistd.h>

#include "core/error.h"

namespace tessera::cpu {
#ifdef TESSERA_CPU_DISPATCH
namespace avx {
const KernelTable& kernel_table();
}
namespace avx2 {
const KernelTable& kernel_table();
}
namespace avx512 {
const KernelTable& kernel_table();
}
#endif

namespace {

constexpr CpuLevel kLevels[] = {CpuLevel::Baseline, CpuLevel::Avx, CpuLevel::Avx2,
                                CpuLevel::Avx512};

bool built(CpuLevel level) {
#ifdef TESSERA_CPU_DISPATCH
  (void)level;
  return true;
#else
  return level == CpuLevel::Baseline;
#endif
}

const KernelTable& table_of(CpuLevel level) {
  switch (level) {
#ifdef TESSERA_CPU_DISPATCH
    case CpuLevel::Avx: return avx::kernel_table();
    case CpuLevel::Avx2: return avx2::kernel_table();
    case CpuLevel::Avx512: return avx512::kernel_table();
#endif
    default: return baseline::kernel_table();
  }
}

// A level this build has and this CPU runs, else InvalidArgument naming `source`.
CpuLevel checked(CpuLevel level, const std::string& source) {
  TESSERA_CHECK(built(level), InvalidArgument, source, ": this build has the ", to_string(level),
                " kernels only with TESSERA_CPU_DISPATCH (it has: baseline)");
  TESSERA_CHECK(cpu_supports(level), InvalidArgument, source, ": this CPU does not run the ",
                to_string(level), " kernels (the widest it runs: ", to_string([] {
                  CpuLevel best = CpuLevel::Baseline;
                  for (CpuLevel l : kLevels)
                    if (built(l) && cpu_supports(l)) best = l;
                  return best;
                }()),
                ")");
  return level;
}

CpuLevel initial_level() {
  if (const char* name = std::getenv("TESSERA_CPU"); name != nullptr && *name != '\0') {
    for (CpuLevel level : kLevels)
      if (std::string(name) == to_string(level))
        return checked(level, std::string("TESSERA_CPU=") + name);
    TESSERA_FAIL(InvalidArgument, "TESSERA_CPU=", name, ": expected baseline, avx, avx2 or avx512");
  }
  CpuLevel best = CpuLevel::Baseline;
  for (CpuLevel level : kLevels)
    if (built(level) && cpu_supports(level)) best = level;
  return best;
}

std::atomic<int> g_level{-1};  // the level in use; -1 until the first kernel asks
std::atomic<const KernelTable*> g_table{nullptr};
std::atomic<int> g_prefetch{-1};  // the SpMM prefetch target; -1 until the first SpMM asks

// The choice held in `slot` (an enumerator's value, -1 until first asked), made by `initial` the
// first time.
template <class Choice>
Choice chosen_once(std::atomic<int>& slot, Choice (*initial)()) {
  int value = slot.load(std::memory_order_acquire);
  if (value < 0) {
    value = static_cast<int>(initial());
    slot.store(value, std::memory_order_release);
  }
  return static_cast<Choice>(value);
}

// The CPU's vendor and family (CPUID leaf 1: the base family, plus the extended family where the
// base is 0xF); {false, 0} off x86.
struct CpuFamily {
  bool amd = false;
  int family = 0;
};
CpuFamily cpu_family() {
  CpuFamily out;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  out.amd = __builtin_cpu_is("amd");
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0) {
    const int base = static_cast<int>((eax >> 8) & 0xF);
    out.family = base == 0xF ? base + static_cast<int>((eax >> 20) & 0xFF) : base;
  }
#endif
  return out;
}

PrefetchTarget initial_prefetch_target() {
  if (const char* name = std::getenv("TESSERA_SPMM_PREFETCH"); name != nullptr && *name != '\0') {
    for (PrefetchTarget target : {PrefetchTarget::L1, PrefetchTarget::L2})
      if (std::string(name) == to_string(target)) return target;
    TESSERA_FAIL(InvalidArgument, "TESSERA_SPMM_PREFETCH=", name, ": expected l1 or l2");
  }
  const CpuFamily cpu = cpu_family();
  return default_spmm_prefetch_target(cpu.amd, cpu.family);
}

}  // namespace

PrefetchTarget default_spmm_prefetch_target(bool amd, int family) {
  return amd && family >= 0x17 && family <= 0x19 ? PrefetchTarget::L2 : PrefetchTarget::L1;
}

const char* to_string(CpuLevel level) {
  switch (level) {
    case CpuLevel::Baseline: return "baseline";
    case CpuLevel::Avx: return "avx";
    case CpuLevel::Avx2: return "avx2";
    case CpuLevel::Avx512: return "avx512";
  }
  return "?";
}

const char* to_string(PrefetchTarget target) { return target == PrefetchTarget::L2 ? "l2" : "l1"; }

PrefetchTarget spmm_prefetch_target() { return chosen_once(g_prefetch, initial_prefetch_target); }

void set_spmm_prefetch_target(PrefetchTarget target) {
  g_prefetch.store(static_cast<int>(target), std::memory_order_release);
}

std::vector<CpuLevel> built_cpu_levels() {
  std::vector<CpuLevel> out;
  for (CpuLevel level : kLevels)
    if (built(level)) out.push_back(level);
  return out;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
namespace {
// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
}  // namespace
#endif

bool cpu_supports(CpuLevel level) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  const bool avx = __builtin_cpu_supports("avx");
  const bool avx2 = avx && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && has_f16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  switch (level) {
    case CpuLevel::Baseline: return true;
    case CpuLevel::Avx: return avx;
    case CpuLevel::Avx2: return avx2;
    case CpuLevel::Avx512: return avx512;
  }
  return false;
#else
  return level == CpuLevel::Baseline;
#endif
}

CpuLevel cpu_level() { return chosen_once(g_level, initial_level); }

void set_cpu_level(CpuLevel level) {
  checked(level, std::string("set_cpu_level(") + to_string(level) + ")");
  g_level.store(static_cast<int>(level), std::memory_order_release);
  g_table.store(&table_of(level), std::memory_order_release);
}

const KernelTable& kernels() {
  const KernelTable* table = g_table.load(std::memory_order_acquire);
  if (table == nullptr) {
    table = &table_of(cpu_level());
    g_table.store(table, std::memory_order_release);
  }
  return *table;
}

int openblas_core_level(const std::string& core) {
  std::string name;
  for (char c : core) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::map<std::string, int> kLevel = {
      {"katmai", 0},        {"coppermine", 0}, {"northwood", 0},   {"prescott", 0},
      {"banias", 0},        {"core2", 0},      {"penryn", 0},      {"dunnington", 0},
      {"nehalem", 0},       {"atom", 0},       {"opteron", 0},     {"opteron_sse3", 0},
      {"barcelona", 0},     {"bobcat", 0},     {"nano", 0},        {"sandybridge", 1},
      {"bulldozer", 1},     {"piledriver", 1}, {"steamroller", 1}, {"excavator", 2},
      {"haswell", 2},       {"zen", 2},        {"skylakex", 3},    {"cooperlake", 3},
      {"sapphirerapids", 3}};
  const auto it = kLevel.find(name);
  return it == kLevel.end() ? -1 : it->second;
}

namespace {
// Set for the restarted program only, to OpenBLAS's own choice; removed once read.
constexpr const char* kOwnCoreVariable = "TESSERA_OPENBLAS_OWN_CORE";
std::string& replaced_core() {
  static std::string core;
  return core;
}
}  // namespace

void use_best_blas_core(char** argv) {
  if (const char* own = std::getenv(kOwnCoreVariable); own != nullptr) {
    replaced_core() = own;
    unsetenv(kOwnCoreVariable);
    return;
  }
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || argv == nullptr) return;
  const BlasKernels blas = blas_kernels();
  if (!blas.weaker) return;
  setenv("OPENBLAS_CORETYPE", blas.best.c_str(), 1);
  setenv(kOwnCoreVariable, blas.chosen.c_str(), 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);
  // No restart (no /proc?): the program goes on with OpenBLAS's core, and says so.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kOwnCoreVariable);
}

std::vector<std::string> openblas_cores_this_cpu_runs() {
  std::vector<std::string> cores = {"Prescott"};
  if (cpu_supports(CpuLevel::Avx)) cores.push_back("SandyBridge");
  if (cpu_supports(CpuLevel::Avx2)) cores.insert(cores.end(), {"Haswell", "Zen"});
  if (cpu_supports(CpuLevel::Avx512)) cores.push_back("SkylakeX");
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // CPUID leaf 7 subleaf 1, EAX bit 5: AVX512-BF16
  if (cpu_supports(CpuLevel::Avx512) && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 &&
      (eax & (1u << 5)) != 0)
    cores.push_back("Cooperlake");
#else
  cores.clear();
#endif
  return cores;
}

BlasKernels blas_kernels() {
  BlasKernels b;
  b.own = replaced_core();
  const char* core = openblas_get_corename();
  b.chosen = core != nullptr ? core : "";
  if (cpu_supports(CpuLevel::Avx512)) {
    b.best = "SkylakeX";
  } else if (cpu_supports(CpuLevel::Avx2)) {
    b.best = "Haswell";
  } else if (cpu_supports(CpuLevel::Avx)) {
    b.best = "SandyBridge";
  }
  const int chosen = openblas_core_level(b.chosen);
  b.weaker = !b.best.empty() && chosen >= 0 && chosen < openblas_core_level(b.best);
  return b;
}

std::string cpu_kernels_description() {
  std::string built_list;
  for (CpuLevel level : built_cpu_levels())
    built_list += std::string(built_list.empty() ? "" : ", ") + to_string(level);
  // OpenBLAS's configuration names the kernels it chose for this CPU (DYNAMIC_ARCH builds).
  std::string text = std::string(to_string(cpu_level())) + " (built: " + built_list +
                     "), SpMM prefetch " + to_string(spmm_prefetch_target()) +
                     "; BLAS: " + openblas_get_config();
  const BlasKernels blas = blas_kernels();
  if (blas.weaker) {
    text += "; OpenBLAS core " + blas.chosen + " is weaker than this CPU's " + blas.best +
            " (set OPENBLAS_CORETYPE=" + blas.best + ")";
  } else if (!blas.own.empty()) {
    text +=
        "; OpenBLAS core " + blas.chosen + " chosen by Tessera (OpenBLAS chose " + blas.own + ")";
  }
  return text;
}

void set_num_threads(int threads) {
  if (threads <= 0) return;
  omp_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace tessera::cpu
