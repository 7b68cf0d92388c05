// SPDX-License-Identifier: Apache-2.0
// Fault injection for the tests of what happens when a rank fails, dies or is signalled.
#pragma once

namespace tessera {

// TESSERA_FAULT_INJECT=RANK:EPOCH[:MODE] makes that rank fail at that epoch of every run: how
// the tests check that failures, kills and signals end or stop the whole job. MODE:
//   throw       (default) throw an error at the start of the epoch
//   kill        SIGKILL itself at the start of the epoch (a node or rank lost)
//   usr1        send itself SIGUSR1 at the start of the epoch (a stop request on one rank)
//   checkpoint  SIGKILL itself after writing that epoch's checkpoint, before its rename
enum class FaultMode { Throw, Kill, Usr1, Checkpoint };

struct FaultInjection {
  int rank = -1;
  int epoch = -1;
  FaultMode mode = FaultMode::Throw;
};

FaultInjection fault_injection_from_env();
// Acts as f.mode says at the start of `epoch` (the Checkpoint mode acts at the checkpoint write).
void inject_fault(const FaultInjection& f, int epoch);

}  // namespace tessera
