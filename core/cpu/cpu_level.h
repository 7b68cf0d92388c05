// SPDX-License-Identifier: Apache-2.0
// The instruction-set level a CPU kernel source is compiled for. core/cpu's kernel sources are
// compiled once per level (core/CMakeLists.txt; comm's codec rows likewise) with
// TESSERA_CPU_LEVEL set: 0 the x86-64 baseline (SSE2), 1 AVX, 2 AVX2 with FMA, BMI1/2 and F16C,
// 3 AVX-512 (F, BW, DQ, VL) on top; the kernels choose one at run time (core/cpu/dispatch.h).
// In C++ the target pragma does not define __AVX2__ and its kind (the preprocessor has run by
// then): code for a level tests TESSERA_CPU_LEVEL instead. A level's code lives in namespace
// tessera::cpu::TESSERA_CPU_NS and is compiled for its instructions between
// TESSERA_CPU_TARGET_BEGIN and TESSERA_CPU_TARGET_END (GCC's target pragma), which the sources
// put after their includes: functions of other headers keep the baseline target, so the linker
// can never pick a wider copy of a shared inline function for a narrower path. Floating-point
// contraction is off in every build (cmake/TesseraWarnings.cmake), so the levels differ in
// vector width only: every kernel gives the same bits at every level (tested).
#pragma once

#ifndef TESSERA_CPU_LEVEL
#define TESSERA_CPU_LEVEL 0
#endif

#if TESSERA_CPU_LEVEL == 0
#define TESSERA_CPU_NS baseline
#define TESSERA_CPU_TARGET_BEGIN
#define TESSERA_CPU_TARGET_END
#else
#if !defined(__GNUC__) || defined(__clang__)
#error \
    "CPU kernels for several instruction sets need GCC's target pragma (TESSERA_CPU_DISPATCH=OFF)"
#endif
#define TESSERA_CPU_TARGET_END _Pragma("GCC pop_options")
#if TESSERA_CPU_LEVEL == 1
#define TESSERA_CPU_NS avx
#define TESSERA_CPU_TARGET_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx\")")
#elif TESSERA_CPU_LEVEL == 2
#define TESSERA_CPU_NS avx2
#define TESSERA_CPU_TARGET_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,bmi,bmi2,f16c\")")
#elif TESSERA_CPU_LEVEL == 3
#define TESSERA_CPU_NS avx512
#define TESSERA_CPU_TARGET_BEGIN \
  _Pragma("GCC push_options")    \
      _Pragma("GCC target(\"avx2,fma,bmi,bmi2,f16c,avx512f,avx512bw,avx512dq,avx512vl\")")
#else
#error "TESSERA_CPU_LEVEL must be 0 (baseline), 1 (avx), 2 (avx2) or 3 (avx512)"
#endif
#endif
