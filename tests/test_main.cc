// SPDX-License-Identifier: Apache-2.0
// main() for the single-process GoogleTest suites (see tessera_add_gtest). Like every Tessera
// program, a suite first puts OpenBLAS on the best core this CPU runs (use_best_blas_core: a
// restart with OPENBLAS_CORETYPE set when OpenBLAS chose a weaker one), so that the tests run the
// GEMM kernels the programs run, at their speed.
#include <gtest/gtest.h>

#include "core/cpu/dispatch.h"

int main(int argc, char** argv) {
  tessera::cpu::use_best_blas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
