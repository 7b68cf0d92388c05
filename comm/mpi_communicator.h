// SPDX-License-Identifier: Apache-2.0
// MpiCommunicator: the Communicator over MPI (MPICH). Every MPI call is checked
// (TESSERA_MPI_CHECK, errors returned, not fatal); every wait, collectives included, polls
// with a deadline so that a lost peer ends in Error(Timeout) instead of a hang. MpiSession owns
// MPI_Init/MPI_Finalize for a program's main.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/abort_notice.h"
#include "comm/communicator.h"

namespace tessera {

// Initialises MPI (MPI_THREAD_FUNNELED: only the main thread calls MPI; OpenMP threads compute)
// unless it already is, and finalises it on destruction when it initialised it.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `comm` (so Tessera's messages never mix with the caller's), sets
  // MPI_ERRORS_RETURN on the duplicate and records the rank for error messages. A second
  // duplicate carries abort notices (comm/abort_notice.h), shared with the communicators split
  // from this one.
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD, double timeout_s = 900.0);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  // MPI_Abort on the world communicator, once the other ranks have cleaned up (abort notices).
  [[noreturn]] void abort(int code) override;
  void set_timeout(double seconds) override { timeout_s_ = seconds; }
  double timeout() const override { return timeout_s_; }
  MPI_Comm handle() const { return comm_; }
  // Ranks of this communicator on this node (MPI_COMM_TYPE_SHARED), this one included.
  int ranks_on_node() const { return local_size_; }
  // This rank's place among them (0-based, in rank order).
  int rank_on_node() const { return local_rank_; }
  // Throws Error(Remote) when another rank has announced that it ends the job; every wait of
  // this communicator calls it (for waits of its own, such as NCCL's).
  void check_notices(std::string_view waiting_in);

 protected:
  void do_all_reduce_sum(std::span<float> values) override;
  void do_all_reduce_sum(std::span<double> values) override;
  void do_all_reduce_max(std::span<std::int64_t> values) override;
  void do_broadcast(std::span<std::byte> buffer, int root) override;
  std::unique_ptr<Request> do_isend(std::span<const std::byte> buffer, int peer,
                                    int tag) override;
  std::unique_ptr<Request> do_irecv(std::span<std::byte> buffer, int peer, int tag) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  // A communicator split from another: `comm` is duplicated, the notices are the parent's.
  MpiCommunicator(MPI_Comm comm, double timeout_s, std::shared_ptr<AbortNotices> notices);
  void set_up(MPI_Comm comm);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int local_size_ = 1;
  int local_rank_ = 0;
  double timeout_s_ = 900.0;
  std::shared_ptr<AbortNotices> notices_;
};

}  // namespace tessera

// Checks an MPI return code; throws Error(Mpi) with MPI's error string and the call.
#define TESSERA_MPI_CHECK(call)                                                        \
  do {                                                                                 \
    const int tessera_mpi_rc_ = (call);                                                \
    if (tessera_mpi_rc_ != MPI_SUCCESS) [[unlikely]] {                                 \
      TESSERA_FAIL(Mpi, #call, " failed: ", ::tessera::mpi_error_string(tessera_mpi_rc_)); \
    }                                                                                  \
  } while (0)

namespace tessera {
std::string mpi_error_string(int code);

// Ends the whole MPI job (MPI_Abort on the world communicator) after flushing stdout and stderr
// and a 200 ms pause, so that the launcher forwards this rank's last message first.
[[noreturn]] void abort_mpi_job(int code);

namespace detail {
// Test hook: sets the largest number of bytes one MPI call moves (messages and collectives
// above it are split) and returns the previous value. Every rank must use the same value.
std::size_t set_mpi_chunk_bytes(std::size_t bytes);
}  // namespace detail
}  // namespace tessera
