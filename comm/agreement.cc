// SPDX-License-Identifier: Apache-2.0
// Phase agreement: one all-reduce (max) of "size - rank if this rank failed" finds the lowest
// failing rank; that rank broadcasts its error's category and message, and every rank throws the
// same AgreedError. All traffic is counted as Setup.
#include "comm/agreement.h"

#include <cstring>
#include <string>

#include "comm/stall_injection.h"

namespace tessera {
namespace {

struct LocalFailure {
  ErrorCategory category = ErrorCategory::Internal;
  std::string message;
};

// What this rank's exception says; non-Tessera exceptions count as Internal (a bug: library code
// throws tessera::Error).
LocalFailure describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    // The origin's file:line travels in the text (the AgreedError itself is raised here).
    const char* slash = std::strrchr(e.file(), '/');
    return {e.category(), detail::concat(e.message(), " (", slash ? slash + 1 : e.file(), ":",
                                         e.line(), ")")};
  } catch (const std::exception& e) {
    return {ErrorCategory::Internal, e.what()};
  } catch (...) {
    return {ErrorCategory::Internal, "unknown exception"};
  }
}

}  // namespace

AgreedError::AgreedError(ErrorCategory category, std::string message, int failed_rank,
                         const char* file, int line)
    : Error(category, std::move(message), file, line), failed_rank_(failed_rank) {}

void agree_on_status(Communicator& comm, std::string_view phase, std::exception_ptr local_error) {
  const int ranks = comm.size();
  stall_if_injected(comm.rank(), phase);
  // The maximum of (size - rank) over failing ranks picks the lowest failing rank; 0: none.
  std::int64_t vote = local_error ? ranks - comm.rank() : 0;
  try {
    comm.all_reduce_max(std::span<std::int64_t>(&vote, 1));
  } catch (const Error& e) {
    // A rank that never finishes the phase: say which phase it is stuck in.
    if (e.category() != ErrorCategory::Timeout) throw;
    TESSERA_FAIL(Timeout, "waiting for every rank to finish ", phase, ": ", e.message());
  }
  if (vote == 0) return;
  TESSERA_CHECK(vote >= 1 && vote <= ranks, Internal, "agree_on_status(", phase,
                "): expected a vote in [0, ", ranks, "], the all-reduce gave ", vote);
  const int failed_rank = static_cast<int>(ranks - vote);

  LocalFailure failure;
  if (comm.rank() == failed_rank) failure = describe(local_error);

  // Header: message length and category (two int64), then the message bytes.
  std::int64_t header[2] = {static_cast<std::int64_t>(failure.message.size()),
                            static_cast<std::int64_t>(failure.category)};
  comm.broadcast(std::as_writable_bytes(std::span<std::int64_t>(header)), failed_rank,
                 TrafficCategory::Setup);
  // Internal is the last ErrorCategory.
  TESSERA_CHECK(header[0] >= 0 && header[1] >= 0 &&
                    header[1] <= static_cast<std::int64_t>(ErrorCategory::Internal),
                Internal, "agree_on_status(", phase, "): expected a message length >= 0 and an "
                "error category, rank ", failed_rank, " sent length ", header[0], " and category ",
                header[1]);
  failure.message.resize(static_cast<std::size_t>(header[0]));
  if (!failure.message.empty()) {
    comm.broadcast(std::as_writable_bytes(std::span<char>(failure.message)), failed_rank,
                   TrafficCategory::Setup);
  }
  throw AgreedError(static_cast<ErrorCategory>(header[1]),
                    detail::concat("rank ", failed_rank, " failed during ", phase, ": ",
                                   failure.message),
                    failed_rank, __FILE__, __LINE__);
}

}  // namespace tessera
