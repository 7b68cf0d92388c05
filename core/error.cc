// SPDX-License-Identifier: Apache-2.0
// Error construction and the process-wide rank used in error messages.
#include "core/error.h"

#include <atomic>
#include <cstring>

namespace tessera {
namespace {
std::atomic<int> g_error_rank{-1};

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

std::string format(ErrorCategory category, const std::string& message, const char* file, int line,
                   int rank) {
  std::ostringstream out;
  out << '[' << to_string(category) << ']';
  if (rank >= 0) out << " rank " << rank;
  out << " (" << base_name(file) << ':' << line << "): " << message;
  return out.str();
}
}  // namespace

std::string_view to_string(ErrorCategory category) {
  switch (category) {
    case ErrorCategory::InvalidArgument: return "invalid argument";
    case ErrorCategory::InvalidInput: return "invalid input";
    case ErrorCategory::Io: return "I/O error";
    case ErrorCategory::Mpi: return "MPI error";
    case ErrorCategory::Nccl: return "NCCL error";
    case ErrorCategory::Cuda: return "CUDA error";
    case ErrorCategory::Remote: return "remote rank failed";
    case ErrorCategory::Timeout: return "timeout";
    case ErrorCategory::Internal: return "internal error";
  }
  return "unknown error";
}

Error::Error(ErrorCategory category, std::string message, const char* file, int line)
    : std::runtime_error(format(category, message, file, line, g_error_rank.load())),
      category_(category),
      message_(std::move(message)),
      file_(file),
      line_(line),
      rank_(g_error_rank.load()) {}

void set_error_rank(int rank) { g_error_rank.store(rank); }
int error_rank() { return g_error_rank.load(); }

std::string detail::join_names(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return list;
}

}  // namespace tessera
