// SPDX-License-Identifier: Apache-2.0
// Abort notices: how a rank that fails inside the training loop lets the others clean up before
// the job ends. MPI_Abort makes the launcher kill every other rank (SIGKILL with MPICH's Hydra,
// so no destructor or handler runs there) and a half-written output would stay. Instead the
// failing rank first sends a notice to every other rank of its communicator; each of them,
// waiting in a message or collective (every wait polls its notices), throws Error(Remote),
// unwinds (its outputs are removed on the way), and acknowledges from its own abort; once every
// rank has acknowledged, or after 1 to 30 s, the failing rank calls MPI_Abort.
// Main thread only (MPI_THREAD_FUNNELED), like every MPI call of Tessera.
#pragma once

#include <mpi.h>

#include <string_view>
#include <vector>

namespace tessera {

class AbortNotices {
 public:
  // Takes `own` (a communicator of its own, duplicated for notices only; freed on destruction)
  // and posts the receive of a notice from any rank.
  explicit AbortNotices(MPI_Comm own);
  ~AbortNotices();
  AbortNotices(const AbortNotices&) = delete;
  AbortNotices& operator=(const AbortNotices&) = delete;

  // Throws Error(Remote) naming the failing rank when one has sent its notice (and again on
  // every later call): `waiting_in` names what this rank was waiting for.
  void check(std::string_view waiting_in);

  // Ends the job with MPI_Abort(code), after telling the other ranks: a rank that stopped for a
  // notice acknowledges it to every other rank (two ranks failing at once may each have been
  // heard first by different ranks) and waits for a failing rank's MPI_Abort (its own after
  // acknowledge_seconds() + kFollowerExtraSeconds); a rank that fails first sends its notices
  // and waits up to acknowledge_seconds(timeout_s) for every other rank's acknowledgement (or
  // its own notice: two ranks failing at once).
  [[noreturn]] void end_job(int code, double timeout_s);

  // How long a failing rank waits for the others: the communicator's timeout (<= 0: none),
  // within [1, 30] s — a rank deep in a long kernel sees the notice only at its next wait.
  static double acknowledge_seconds(double timeout_s);
  static constexpr double kFollowerExtraSeconds = 5.0;

 private:
  bool post_receive();  // false (and no receive pending) when MPI refuses it
  void announce_and_wait(double seconds);
  void acknowledge_and_wait(double seconds);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int incoming_ = -1;  // the receive buffer: the failing rank
  MPI_Request receive_ = MPI_REQUEST_NULL;
  int failed_rank_ = -1;       // the first notice's sender, once one came
  std::vector<char> noticed_;  // (size) a notice came from that rank
};

// True once this process has received or sent an abort notice: the job is ending, so pending
// messages get no grace period before they are released.
bool job_is_ending();

}  // namespace tessera
