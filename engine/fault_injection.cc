// SPDX-License-Identifier: Apache-2.0
// TESSERA_FAULT_INJECT parsing and the faults themselves (engine/fault_injection.h).
#include "engine/fault_injection.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace tessera {

FaultInjection fault_injection_from_env() {
  FaultInjection f;
  const char* text = std::getenv("TESSERA_FAULT_INJECT");
  if (text == nullptr || *text == '\0') return f;
  char mode[16] = "throw";
  const int fields = std::sscanf(text, "%d:%d:%15s", &f.rank, &f.epoch, mode);
  const std::string m = mode;
  TESSERA_CHECK(
      fields >= 2 && f.rank >= 0 && f.epoch >= 1 &&
          (m == "throw" || m == "kill" || m == "usr1" || m == "checkpoint" || m == "outputs"),
      InvalidArgument, "TESSERA_FAULT_INJECT='", text,
      "', expected RANK:EPOCH[:throw|kill|usr1|checkpoint|outputs]");
  f.mode = m == "kill"         ? FaultMode::Kill
           : m == "usr1"       ? FaultMode::Usr1
           : m == "checkpoint" ? FaultMode::Checkpoint
           : m == "outputs"    ? FaultMode::Outputs
                               : FaultMode::Throw;
  return f;
}

void inject_fault(const FaultInjection& f, int epoch) {
  switch (f.mode) {
    case FaultMode::Throw:
      TESSERA_FAIL(Internal, "fault injected at epoch ", epoch, " (TESSERA_FAULT_INJECT)");
    case FaultMode::Kill:
      std::fprintf(stderr, "rank %d: killing itself at epoch %d (TESSERA_FAULT_INJECT)\n", f.rank,
                   epoch);
      std::fflush(stderr);
      std::raise(SIGKILL);
      break;
    case FaultMode::Usr1: std::raise(SIGUSR1); break;
    case FaultMode::Checkpoint:      // at the checkpoint write
    case FaultMode::Outputs: break;  // in inject_output_fault
  }
}

void inject_output_fault(const FaultInjection& f, int rank) {
  TESSERA_CHECK(f.mode != FaultMode::Outputs || f.rank != rank, Internal,
                "fault injected while writing the outputs (TESSERA_FAULT_INJECT)");
}

}  // namespace tessera
