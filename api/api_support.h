// SPDX-License-Identifier: Apache-2.0
// What the public classes (Session, DistributedGraph) share at the API boundary: MPI for a
// caller that gave no communicator, Options to a validated TrainConfig, internal errors turned
// into std:: exceptions, and the collective-call guard. Private to api/.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <memory>
#include <string>

#include "comm/agreement.h"
#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "core/error.h"
#include "core/tensor.h"
#include "engine/train_config.h"
#include "tessera/session.h"

namespace tessera::api {

// MPI initialised once (and finalised at exit) unless the caller has done it.
void ensure_mpi();

// The communicator of a Session or DistributedGraph over `comm` (MPI_COMM_NULL: MPI_COMM_WORLD,
// MPI initialised if need be), as std:: exceptions on failure. When a rank never joins, this
// one's wait ends after `timeout_s` and the job is aborted: the absent rank could not be told.
std::unique_ptr<MpiCommunicator> make_communicator(MPI_Comm comm, double timeout_s);

// The options validated, with OGB's --device N resolved.
TrainConfig to_config(const Options& options);

// std::invalid_argument for bad arguments and input, std::runtime_error for the rest, with the
// category in front of the message for the latter.
[[noreturn]] void rethrow_public(const Error& e);

// Runs the body of a collective call: errors every rank agreed on become std:: exceptions on
// every rank; an error of this rank alone ends the job (the others may be blocked in a
// collective waiting for it), unless it is a bad argument, which every rank sees alike.
template <class F>
auto guarded(Communicator* comm, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const AgreedError& e) {
    rethrow_public(e);
  } catch (const Error& e) {
    if (comm != nullptr && comm->size() > 1 && e.category() != ErrorCategory::InvalidArgument) {
      std::fprintf(stderr, "tessera: error: %s\n", e.what());
      std::fflush(stderr);
      comm->abort(1);
    }
    rethrow_public(e);
  }
}

// Rank 0, verbosity >= 1, once per process: a warning on stderr when OpenBLAS chose GEMM
// kernels weaker than this CPU runs (core/cpu/dispatch.h), with the variable that fixes it.
void warn_about_blas(const Communicator& comm, int verbosity);

// A host copy of t, wherever t lives.
Matrix to_matrix(const Tensor& t);

}  // namespace tessera::api
