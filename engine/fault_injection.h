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
//   outputs     throw while the run's output files are written, after the last epoch: after
//               --save-predictions, --save-embeddings and --save-model, before the summary
//               (EPOCH is not used)
enum class FaultMode { Throw, Kill, Usr1, Checkpoint, Outputs };

struct FaultInjection {
  int rank = -1;
  int epoch = -1;
  FaultMode mode = FaultMode::Throw;
};

FaultInjection fault_injection_from_env();
// Acts as f.mode says at the start of `epoch` (the Checkpoint mode acts at the checkpoint write,
// the Outputs mode in inject_output_fault).
void inject_fault(const FaultInjection& f, int epoch);
// Throws on the injected rank when f.mode is Outputs.
void inject_output_fault(const FaultInjection& f, int rank);

}  // namespace tessera
