// SPDX-License-Identifier: Apache-2.0
// Agreement at phase boundaries (load, partition, set-up, end of a run): every rank runs its
// part of the phase, then all ranks learn whether any failed. If one did, every rank throws
// AgreedError carrying the lowest failing rank's message, so the job ends on every rank with
// the same message and a normal non-zero exit, without MPI_Abort. Inside the hot loop errors
// are not agreed: the app's main aborts the communicator instead.
#pragma once

#include <exception>
#include <string_view>
#include <type_traits>
#include <utility>

#include "comm/communicator.h"
#include "core/error.h"

namespace tessera {

// Thrown on every rank when a phase failed somewhere, with the same message everywhere.
// failed_rank() is the rank that failed (rank() and the what() prefix name the local rank);
// category() is the failing rank's category, which tells who is at fault.
class AgreedError : public Error {
 public:
  AgreedError(ErrorCategory category, std::string message, int failed_rank, const char* file,
              int line);
  int failed_rank() const { return failed_rank_; }

 private:
  int failed_rank_;
};

// Collective: exchanges "did this rank fail" (one all-reduce; a broadcast of the message only
// when something failed). Returns normally when no rank failed; throws AgreedError otherwise.
// `local_error` is null when this rank succeeded.
void agree_on_status(Communicator& comm, std::string_view phase, std::exception_ptr local_error);

// A timeout (a peer is gone) and a notice that another rank ends the job (Error(Remote)) are
// passed on as they are: no rank would answer an agreement.
inline bool not_agreed(const Error& e) {
  return e.category() == ErrorCategory::Timeout || e.category() == ErrorCategory::Remote;
}

// Runs fn() and agrees on the outcome: fn's result when every rank succeeded. fn must not call
// collectives that a failure could make some ranks skip, unless they are themselves agreed
// phases: an AgreedError from inside fn is passed on as it is (all ranks hold it already). So is
// a Timeout (a rank that did not answer within --comm-timeout would not answer the agreement
// either): the error names the step that waited, and no second timeout follows.
template <class F>
auto run_agreed(Communicator& comm, std::string_view phase, F&& fn) {
  std::exception_ptr error;
  if constexpr (std::is_void_v<decltype(fn())>) {
    try {
      fn();
    } catch (const AgreedError&) {
      throw;  // agreed inside fn: every rank already holds this same error
    } catch (const Error& e) {
      if (not_agreed(e)) throw;  // a peer is gone or ends the job: nobody to agree with
      error = std::current_exception();
    } catch (...) {
      error = std::current_exception();
    }
    agree_on_status(comm, phase, error);
  } else {
    decltype(fn()) result{};
    try {
      result = fn();
    } catch (const AgreedError&) {
      throw;  // agreed inside fn: every rank already holds this same error
    } catch (const Error& e) {
      if (not_agreed(e)) throw;  // a peer is gone or ends the job: nobody to agree with
      error = std::current_exception();
    } catch (...) {
      error = std::current_exception();
    }
    agree_on_status(comm, phase, error);
    return result;
  }
}

}  // namespace tessera
