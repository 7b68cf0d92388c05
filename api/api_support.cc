// SPDX-License-Identifier: Apache-2.0
// The API boundary's shared pieces (api/api_support.h).
#include "api/api_support.h"

#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "comm/mpi_communicator.h"
#include "core/cpu/dispatch.h"
#include "core/device.h"

namespace tessera::api {

void ensure_mpi() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    static std::optional<MpiSession> session;  // destroyed (MPI_Finalize) at exit
    session.emplace(nullptr, nullptr);
  });
}

std::unique_ptr<MpiCommunicator> make_communicator(MPI_Comm comm, double timeout_s) {
  try {
    if (comm == MPI_COMM_NULL) {
      ensure_mpi();
      comm = MPI_COMM_WORLD;
    }
    return std::make_unique<MpiCommunicator>(comm, timeout_s);
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::Timeout) {
      std::fprintf(stderr, "tessera: error: %s\n", e.what());
      abort_mpi_job(1);
    }
    rethrow_public(e);
  }
}

TrainConfig to_config(const Options& options) {
  TrainConfig config(options);
  config.device = resolve_device_number(options.device);  // OGB's --device N
  validate(config);
  return config;
}

void rethrow_public(const Error& e) {
  const bool bad_input =
      e.category() == ErrorCategory::InvalidArgument || e.category() == ErrorCategory::InvalidInput;
  const std::string text =
      bad_input ? e.message() : "[" + std::string(to_string(e.category())) + "] " + e.message();
  if (e.category() == ErrorCategory::InvalidArgument) throw OptionError(text);
  if (bad_input) throw std::invalid_argument(text);
  throw std::runtime_error(text);
}

void warn_about_blas(const Communicator& comm, int verbosity) {
  static std::once_flag once;
  if (comm.rank() != 0 || verbosity < 1) return;
  std::call_once(once, [] {
    const cpu::BlasKernels blas = cpu::blas_kernels();
    if (!blas.weaker) return;
    std::fprintf(stderr,
                 "Warning: OpenBLAS chose its %s GEMM kernels, but this CPU runs its %s "
                 "kernels, which are faster; start with OPENBLAS_CORETYPE=%s to use them\n",
                 blas.chosen.c_str(), blas.best.c_str(), blas.best.c_str());
  });
}

Matrix to_matrix(const Tensor& t) {
  Matrix m;
  m.rows = t.rows();
  m.cols = t.cols();
  m.data = host_f32(t);
  return m;
}

}  // namespace tessera::api
