// SPDX-License-Identifier: Apache-2.0
// tessera::Error: the one exception type of the project. It carries a category saying who is at
// fault (caller, input data, I/O, a vendor library, a remote rank, a bug), the rank that raised
// it and the file:line of the failing check. TESSERA_CHECK / TESSERA_FAIL build it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

enum class ErrorCategory {
  InvalidArgument,  // a caller passed a value the API does not accept (flags, shapes)
  InvalidInput,     // a data file or array is malformed
  Io,               // a file could not be opened, read or written
  Mpi,
  Nccl,
  Cuda,
  Remote,           // another rank failed
  Timeout,          // a collective or message did not complete within the communicator's timeout
  Internal,         // a broken invariant: a bug in Tessera
};

std::string_view to_string(ErrorCategory category);

class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, std::string message, const char* file, int line);

  ErrorCategory category() const { return category_; }
  // The message without the "[category] file:line" prefix.
  const std::string& message() const { return message_; }
  const char* file() const { return file_; }
  int line() const { return line_; }
  int rank() const { return rank_; }

 private:
  ErrorCategory category_;
  std::string message_;
  const char* file_;
  int line_;
  int rank_;
};

// The rank reported in errors; set once by whoever knows it (the communicator). -1 = unknown.
void set_error_rank(int rank);
int error_rank();

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
// "a, b, c": names listed in a message (the choices of a flag, the entries of a registry).
std::string join_names(const std::vector<std::string>& names);
}  // namespace detail

}  // namespace tessera

// Throws tessera::Error(category, message) where the message is the concatenation of the args.
#define TESSERA_FAIL(category, ...)                                                       \
  throw ::tessera::Error(::tessera::ErrorCategory::category,                              \
                         ::tessera::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

// Checks a condition that is never evaluated for its side effects only.
#define TESSERA_CHECK(cond, category, ...)   \
  do {                                       \
    if (!(cond)) [[unlikely]] {              \
      TESSERA_FAIL(category, __VA_ARGS__);   \
    }                                        \
  } while (0)
