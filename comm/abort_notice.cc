// SPDX-License-Identifier: Apache-2.0
// Abort notices (comm/abort_notice.h). Tags on the notices' own communicator: a notice carries
// the failing rank; an acknowledgement says "cleaned up, end the job".
#include "comm/abort_notice.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "comm/mpi_communicator.h"
#include "core/error.h"

namespace tessera {
namespace {

constexpr int kNoticeTag = 1;
constexpr int kAcknowledgeTag = 2;

std::atomic<bool> g_job_ending{false};

using Clock = std::chrono::steady_clock;

Clock::time_point seconds_from_now(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

bool finalized() {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

}  // namespace

bool job_is_ending() { return g_job_ending.load(); }

AbortNotices::AbortNotices(MPI_Comm own) : comm_(own) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  noticed_.assign(static_cast<std::size_t>(size_), 0);
  if (!post_receive()) {
    MPI_Comm_free(&comm_);
    TESSERA_FAIL(Mpi, "MPI_Irecv of the abort notices failed");
  }
}

AbortNotices::~AbortNotices() {
  if (finalized()) return;
  if (receive_ != MPI_REQUEST_NULL) {
    // A cancelled receive completes locally (MPI guarantees it): no wait on any peer.
    MPI_Cancel(&receive_);
    MPI_Wait(&receive_, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&comm_);
}

bool AbortNotices::post_receive() {
  if (MPI_Irecv(&incoming_, 1, MPI_INT, MPI_ANY_SOURCE, kNoticeTag, comm_, &receive_) ==
      MPI_SUCCESS)
    return true;
  receive_ = MPI_REQUEST_NULL;  // no notice can arrive any more; waits still end at their deadline
  return false;
}

void AbortNotices::check(std::string_view waiting_in) {
  if (failed_rank_ < 0 && receive_ != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_Status status;
    TESSERA_MPI_CHECK(MPI_Test(&receive_, &done, &status));
    if (!done) return;
    failed_rank_ = status.MPI_SOURCE;
    noticed_[static_cast<std::size_t>(failed_rank_)] = 1;
    g_job_ending = true;
    post_receive();  // a second failing rank's notice counts as its acknowledgement
  }
  if (failed_rank_ < 0) return;
  TESSERA_FAIL(Remote, "rank ", failed_rank_,
               " failed and ends the job (its error is above); this rank stopped while waiting "
               "in ",
               waiting_in);
}

double AbortNotices::acknowledge_seconds(double timeout_s) {
  return timeout_s <= 0.0 ? 30.0 : std::clamp(timeout_s, 1.0, 30.0);
}

void AbortNotices::end_job(int code, double timeout_s) {
  if (size_ > 1) {
    g_job_ending = true;
    const double seconds = acknowledge_seconds(timeout_s);
    if (failed_rank_ >= 0) {
      acknowledge_and_wait(seconds + kFollowerExtraSeconds);
    } else {
      announce_and_wait(seconds);
    }
  }
  abort_mpi_job(code);
}

void AbortNotices::announce_and_wait(double seconds) {
  std::vector<MPI_Request> sends(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  std::vector<MPI_Request> acks(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  std::vector<int> ack_values(static_cast<std::size_t>(size_), 0);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const auto p = static_cast<std::size_t>(peer);
    // Errors are ignored: the job ends in MPI_Abort whatever happens here.
    MPI_Isend(&rank_, 1, MPI_INT, peer, kNoticeTag, comm_, &sends[p]);
    MPI_Irecv(&ack_values[p], 1, MPI_INT, peer, kAcknowledgeTag, comm_, &acks[p]);
  }
  const auto deadline = seconds_from_now(seconds);
  for (;;) {
    int waiting = 0;
    for (int peer = 0; peer < size_; ++peer) {
      const auto p = static_cast<std::size_t>(peer);
      if (peer == rank_ || noticed_[p]) continue;
      int done = 0;
      if (acks[p] != MPI_REQUEST_NULL &&
          MPI_Test(&acks[p], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
        noticed_[p] = 1;
        continue;
      }
      ++waiting;
    }
    // Another rank that failed at the same time sends a notice instead of an acknowledgement.
    int done = 0;
    MPI_Status status;
    if (receive_ != MPI_REQUEST_NULL && MPI_Test(&receive_, &done, &status) == MPI_SUCCESS &&
        done) {
      noticed_[static_cast<std::size_t>(status.MPI_SOURCE)] = 1;
      post_receive();
      continue;
    }
    if (waiting == 0 || Clock::now() > deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void AbortNotices::acknowledge_and_wait(double seconds) {
  // Every other rank gets the acknowledgement, not only the one whose notice came first: when two
  // ranks fail at once, the others may each have heard a different one first, and each failing
  // rank waits for every rank's acknowledgement (a rank that did not fail never reads one).
  std::vector<MPI_Request> sends(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_)
      MPI_Isend(&rank_, 1, MPI_INT, peer, kAcknowledgeTag, comm_,
                &sends[static_cast<std::size_t>(peer)]);
  }
  // The failing rank's MPI_Abort ends this process; this one aborts by itself only when that
  // does not come (the failing rank died, or waits on a rank that never acknowledges).
  const auto deadline = seconds_from_now(seconds);
  while (Clock::now() < deadline) {
    for (MPI_Request& send : sends) {
      int done = 0;
      if (send != MPI_REQUEST_NULL) MPI_Test(&send, &done, MPI_STATUS_IGNORE);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace tessera
