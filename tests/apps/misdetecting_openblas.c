// SPDX-License-Identifier: Apache-2.0
// Preloaded by test_train_gcn_cli: an OpenBLAS that does not know this CPU. With
// OPENBLAS_CORETYPE unset, openblas_get_corename() answers "Prescott", the SSE3 core OpenBLAS
// 0.3.21 falls back to on CPUs it does not know (a Xeon with AVX512-FP16); with the variable set
// it answers what the real library chose. So the restart with a better core can be tested on a
// CPU that OpenBLAS does know.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

char* openblas_get_corename(void) {
  if (getenv("OPENBLAS_CORETYPE") == NULL) return "Prescott";
  char* (*real)(void) = (char* (*)(void))dlsym(RTLD_NEXT, "openblas_get_corename");
  return real != NULL ? real() : "unknown";
}
