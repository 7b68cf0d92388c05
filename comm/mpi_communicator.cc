// SPDX-License-Identifier: Apache-2.0
// MpiCommunicator over MPICH. Blocking calls (all-reduce, broadcast, barrier, Request::wait) are
// posted non-blocking and polled against a deadline, so a lost peer ends in Error(Timeout)
// instead of a hang; messages and collectives over one chunk (1 GiB) are split so that no MPI
// count exceeds INT_MAX. Relies on MPI_THREAD_FUNNELED: only the main thread calls MPI.
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

#include "comm/stall_injection.h"
#include "comm/wait.h"
#include "core/error.h"

namespace tessera {
namespace {

// Messages and collectives move at most this many bytes per MPI call. Large messages are split
// into chunks, each its own MPI request with the same tag: MPI's non-overtaking rule (same
// source, tag and communicator) matches the k-th chunk sent with the k-th chunk received. This
// was chosen over MPI_Type_contiguous because it needs no derived types, keeps MPI_Get_count
// meaningful per chunk, and its boundaries can be moved by a test. 1 GiB stays far below
// INT_MAX for every element size.
constexpr std::size_t kDefaultChunkBytes = std::size_t{1} << 30;
std::atomic<std::size_t> g_chunk_bytes{kDefaultChunkBytes};

// How long a pending request's destructor lets a send finish (or a cancelled receive report
// back) before it hands the request to MPI with MPI_Request_free.
constexpr double kReleaseGraceSeconds = 1.0;
constexpr double kEndingGraceSeconds = 0.05;

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);  // callable at any time, even after MPI_Finalize
  return finalized != 0;
}

// Polls one collective request until it completes; throws Error(Timeout) at the deadline, and
// Error(Remote) when `notices` has one (another rank ends the job). A
// collective request cannot be cancelled or freed (MPI forbids both), so after a timeout the
// request stays pending: the buffer may still be written and the communicator must only be
// aborted or destroyed.
void poll_collective(MPI_Request& request, const Deadline& deadline, double timeout_s, int ranks,
                     std::string_view what, AbortNotices* notices = nullptr) {
  WaitPacer pacer;
  for (;;) {
    int done = 0;
    TESSERA_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (notices != nullptr) notices->check(what);
    if (deadline.passed()) {
      TESSERA_FAIL(Timeout, what, " did not complete within ", timeout_s,
                   " s (waiting for the other ", ranks - 1, " of ", ranks,
                   " ranks; at least one did not join)");
    }
    pacer.pause();  // several ranks may share a core: let the others run
  }
}

// Runs one collective per chunk of `values` (at least one, so that every rank issues the same
// number of calls whatever the size); `post(data, count, &request)` starts it.
template <class T, class Post>
void chunked_collective(std::span<T> values, double timeout_s, int ranks, std::string_view what,
                        AbortNotices* notices, Post post) {
  const std::size_t chunk_elements = std::max<std::size_t>(1, g_chunk_bytes.load() / sizeof(T));
  const Deadline deadline(timeout_s);
  std::size_t offset = 0;
  do {
    const std::size_t count = std::min(chunk_elements, values.size() - offset);
    MPI_Request request = MPI_REQUEST_NULL;
    post(values.data() + offset, static_cast<int>(count), &request);
    poll_collective(request, deadline, timeout_s, ranks, what, notices);
    offset += count;
  } while (offset < values.size());
}

std::string describe_collective(std::string_view operation, std::size_t count,
                                std::string_view element) {
  return detail::concat(operation, " of ", count, ' ', element);
}

// A point-to-point message: one MPI request per chunk, all with the same peer and tag.
class MpiRequest final : public Request {
 public:
  enum class Kind { Send, Receive };

  MpiRequest(Kind kind, int peer, int tag, std::size_t bytes, double timeout_s,
             std::shared_ptr<AbortNotices> notices)
      : kind_(kind),
        peer_(peer),
        tag_(tag),
        bytes_(bytes),
        timeout_s_(timeout_s),
        notices_(std::move(notices)) {}
  MpiRequest(const MpiRequest&) = delete;
  MpiRequest& operator=(const MpiRequest&) = delete;

  // Destroying a pending request never throws and never waits longer than the grace period:
  // - a receive is cancelled (MPI_Cancel) and then tested to completion; MPI guarantees that a
  //   cancelled receive completes locally, after which MPI no longer writes the buffer;
  // - a send is not cancelled (cancelling sends is deprecated in MPI 4.0 and has no effect in
  //   MPICH's ch4 device): it gets the grace period to be received.
  // Whatever is still pending after that is released with MPI_Request_free: MPI may then still
  // use the buffer if the peer turns up later. That only happens on an error path, which ends in
  // an agreed error or an abort.
  ~MpiRequest() override {
    if (mpi_finalized() || all_done()) return;
    if (kind_ == Kind::Receive) {
      for (MPI_Request& handle : handles_) {
        if (handle != MPI_REQUEST_NULL) MPI_Cancel(&handle);
      }
    }
    // A job that is ending (abort notices) waits for nothing: its ranks only clean up.
    const double grace_s = job_is_ending() ? kEndingGraceSeconds : kReleaseGraceSeconds;
    const Deadline grace(timeout_s_ > 0.0 ? std::min(timeout_s_, grace_s) : grace_s);
    for (;;) {
      for (MPI_Request& handle : handles_) {
        if (handle == MPI_REQUEST_NULL) continue;
        int done = 0;
        if (MPI_Test(&handle, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
          handle = MPI_REQUEST_NULL;  // in an undefined state: leave it to MPI
        }
      }
      if (all_done()) return;
      if (grace.passed()) break;
      std::this_thread::yield();
    }
    for (MPI_Request& handle : handles_) {
      if (handle != MPI_REQUEST_NULL) MPI_Request_free(&handle);
    }
  }

  // Slots for the chunk requests, filled by the poster; the expected size of each chunk.
  void add_chunk(int bytes) {
    handles_.push_back(MPI_REQUEST_NULL);
    chunk_bytes_.push_back(bytes);
  }
  MPI_Request* handle(std::size_t chunk) { return &handles_[chunk]; }

  bool test() override {
    bool all_complete = true;
    for (std::size_t chunk = 0; chunk < handles_.size(); ++chunk) {
      if (handles_[chunk] == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Status status;
      try {
        TESSERA_MPI_CHECK(MPI_Test(&handles_[chunk], &done, &status));
      } catch (const Error& error) {
        handles_[chunk] = MPI_REQUEST_NULL;  // failed requests are MPI's to clean up
        TESSERA_FAIL(Mpi, describe(), ": ", error.message());
      }
      if (!done) {
        all_complete = false;
      } else if (kind_ == Kind::Receive) {
        check_received(chunk, status);
      }
    }
    return all_complete;
  }

  void wait() override {
    const Deadline deadline(timeout_s_);
    WaitPacer pacer;
    while (!test()) {
      if (notices_) notices_->check(describe());
      if (deadline.passed()) {
        TESSERA_FAIL(Timeout, describe(), " did not complete within ", timeout_s_, " s (rank ",
                     peer_, kind_ == Kind::Send ? " did not receive it)" : " did not send it)");
      }
      pacer.pause();
    }
  }

 private:
  bool all_done() const {
    return std::all_of(handles_.begin(), handles_.end(),
                       [](MPI_Request handle) { return handle == MPI_REQUEST_NULL; });
  }

  std::string describe() const {
    return detail::concat(kind_ == Kind::Send ? "send to rank " : "receive from rank ", peer_,
                          " (tag ", tag_, ", ", bytes_, " bytes in ", handles_.size(),
                          handles_.size() == 1 ? " chunk)" : " chunks)");
  }

  // A shorter message than the buffer means the two sides disagree on the size; a longer one
  // already failed in MPI_Test (MPI_ERR_TRUNCATE).
  void check_received(std::size_t chunk, const MPI_Status& status) const {
    int count = 0;
    TESSERA_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
    TESSERA_CHECK(count == chunk_bytes_[chunk], InvalidArgument, describe(), ": chunk ", chunk,
                  " expected ", chunk_bytes_[chunk], " bytes, received ", count,
                  " (sender and receiver disagree on the message size)");
  }

  Kind kind_;
  int peer_;
  int tag_;
  std::size_t bytes_;
  double timeout_s_;
  std::shared_ptr<AbortNotices> notices_;
  std::vector<MPI_Request> handles_;
  std::vector<int> chunk_bytes_;
};

void check_tag(MPI_Comm comm, int tag, const char* operation) {
  void* value = nullptr;
  int found = 0;
  TESSERA_MPI_CHECK(MPI_Comm_get_attr(comm, MPI_TAG_UB, &value, &found));
  const int tag_ub = found ? *static_cast<int*>(value) : 32767;  // 32767: MPI's guaranteed minimum
  TESSERA_CHECK(tag >= 0 && tag <= tag_ub, InvalidArgument, operation,
                ": expected a tag in [0, ", tag_ub, "], got ", tag);
}

// Splits `bytes` into chunks and posts each with `post(offset, count, request)`; a zero-byte
// message is still one (empty) message so that it is matched like any other.
template <class Post>
std::unique_ptr<Request> post_chunks(MpiRequest::Kind kind, std::size_t bytes, int peer, int tag,
                                     double timeout_s, std::shared_ptr<AbortNotices> notices,
                                     Post post) {
  const std::size_t chunk = g_chunk_bytes.load();
  auto request =
      std::make_unique<MpiRequest>(kind, peer, tag, bytes, timeout_s, std::move(notices));
  std::size_t offset = 0;
  std::size_t index = 0;
  do {
    const auto count = static_cast<int>(std::min(chunk, bytes - offset));
    request->add_chunk(count);
    // If posting fails, the request's destructor releases the chunks already posted.
    post(offset, count, request->handle(index));
    offset += static_cast<std::size_t>(count);
    ++index;
  } while (offset < bytes);
  return request;
}

}  // namespace

namespace detail {
std::size_t set_mpi_chunk_bytes(std::size_t bytes) {
  TESSERA_CHECK(bytes >= 1 && bytes <= kDefaultChunkBytes, InvalidArgument,
                "MPI chunk size: expected 1 to ", kDefaultChunkBytes, " bytes, got ", bytes);
  return g_chunk_bytes.exchange(bytes);
}
}  // namespace detail

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return detail::concat("unknown MPI error code ", code);
  }
  return detail::concat(std::string_view(text, static_cast<std::size_t>(length)), " (MPI code ",
                        code, ')');
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  TESSERA_MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized) return;
  int provided = MPI_THREAD_SINGLE;
  TESSERA_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    TESSERA_FAIL(Mpi, "MPI_Init_thread: expected thread support MPI_THREAD_FUNNELED (",
                 MPI_THREAD_FUNNELED, ") or better, MPI provides level ", provided);
  }
  owns_ = true;
}

MpiSession::~MpiSession() {
  if (owns_ && !mpi_finalized()) MPI_Finalize();
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, double timeout_s) : timeout_s_(timeout_s) {
  set_up(comm);
  if (size_ == 1) return;  // nobody to notify
  // The notices' own duplicate: collective like the first, which every rank has joined.
  try {
    MPI_Comm own = MPI_COMM_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
    TESSERA_MPI_CHECK(MPI_Comm_idup(comm_, &own, &request));
    poll_collective(request, Deadline(timeout_s), timeout_s, size_, "creating the communicator");
    notices_ = std::make_shared<AbortNotices>(own);
  } catch (...) {
    MPI_Comm_free(&comm_);
    throw;
  }
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, double timeout_s,
                                 std::shared_ptr<AbortNotices> notices)
    : timeout_s_(timeout_s), notices_(std::move(notices)) {
  set_up(comm);
}

void MpiCommunicator::set_up(MPI_Comm comm) {
  const double timeout_s = timeout_s_;
  // The duplicate, under the deadline like every collective: a rank that never joins ends the
  // others' wait after timeout_s.
  {
    int ranks = 0, rank = 0;
    MPI_Comm_size(comm, &ranks);
    MPI_Comm_rank(comm, &rank);
    stall_if_injected(rank, "creating the communicator");
    MPI_Request request = MPI_REQUEST_NULL;
    TESSERA_MPI_CHECK(MPI_Comm_idup(comm, &comm_, &request));
    poll_collective(request, Deadline(timeout_s), timeout_s, ranks, "creating the communicator");
  }
  try {
    // Blocking, but only once every rank has joined the duplicate above (microseconds apart).
    TESSERA_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    TESSERA_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    TESSERA_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    // Ranks sharing this node's memory (and cores), for choosing threads per rank.
    MPI_Comm local = MPI_COMM_NULL;
    TESSERA_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL,
                                          &local));
    const int size_rc = MPI_Comm_size(local, &local_size_);
    const int rank_rc = MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_free(&local);
    TESSERA_MPI_CHECK(size_rc);
    TESSERA_MPI_CHECK(rank_rc);
  } catch (...) {
    MPI_Comm_free(&comm_);
    throw;
  }
  set_error_rank(rank_);
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  // MPI has no non-blocking split: every rank first meets in a barrier under the deadline, so
  // the blocking split starts only when all are there.
  stall_if_injected(rank_, "splitting the communicator");
  MPI_Request request = MPI_REQUEST_NULL;
  TESSERA_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  poll_collective(request, Deadline(timeout_s_), timeout_s_, size_, "splitting the communicator",
                  notices_.get());
  MPI_Comm part = MPI_COMM_NULL;
  TESSERA_MPI_CHECK(MPI_Comm_split(comm_, color, key, &part));
  try {
    auto split = std::unique_ptr<MpiCommunicator>(new MpiCommunicator(part, timeout_s_, notices_));
    MPI_Comm_free(&part);
    set_error_rank(rank_);  // errors keep naming the rank in the whole job
    return split;
  } catch (...) {
    MPI_Comm_free(&part);
    throw;
  }
}

MpiCommunicator::~MpiCommunicator() {
  // Frees the handle; MPI finishes any operation still pending on it first (no wait here).
  if (comm_ != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&comm_);
}

void MpiCommunicator::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  TESSERA_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  poll_collective(request, Deadline(timeout_s_), timeout_s_, size_, "barrier", notices_.get());
}

void MpiCommunicator::abort(int code) {
  if (notices_) notices_->end_job(code, timeout_s_);
  abort_mpi_job(code);
}

void MpiCommunicator::check_notices(std::string_view waiting_in) {
  if (notices_) notices_->check(waiting_in);
}

void abort_mpi_job(int code) {
  // The launcher forwards this rank's stderr asynchronously; MPI_Abort right after the last
  // write sometimes loses it (seen with MPICH's Hydra in a few percent of runs). A short pause
  // lets the message that names the failing rank get out first.
  std::fflush(stdout);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort should not return; make sure this process ends regardless
}

void MpiCommunicator::do_all_reduce_sum(std::span<float> values) {
  chunked_collective(values, timeout_s_, size_,
                     describe_collective("all_reduce_sum", values.size(), "floats"), notices_.get(),
                     [this](float* data, int count, MPI_Request* request) {
                       TESSERA_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, count, MPI_FLOAT,
                                                        MPI_SUM, comm_, request));
                     });
}

void MpiCommunicator::do_all_reduce_sum(std::span<double> values) {
  chunked_collective(values, timeout_s_, size_,
                     describe_collective("all_reduce_sum", values.size(), "doubles"),
                     notices_.get(), [this](double* data, int count, MPI_Request* request) {
                       TESSERA_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, count, MPI_DOUBLE,
                                                        MPI_SUM, comm_, request));
                     });
}

void MpiCommunicator::do_all_reduce_max(std::span<std::int64_t> values) {
  chunked_collective(values, timeout_s_, size_,
                     describe_collective("all_reduce_max", values.size(), "int64 values"),
                     notices_.get(), [this](std::int64_t* data, int count, MPI_Request* request) {
                       TESSERA_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, count, MPI_INT64_T,
                                                        MPI_MAX, comm_, request));
                     });
}

void MpiCommunicator::do_broadcast(std::span<std::byte> buffer, int root) {
  chunked_collective(buffer, timeout_s_, size_,
                     detail::concat("broadcast of ", buffer.size(), " bytes from rank ", root),
                     notices_.get(),
                     [this, root](std::byte* data, int count, MPI_Request* request) {
                       TESSERA_MPI_CHECK(
                           MPI_Ibcast(data, count, MPI_BYTE, root, comm_, request));
                     });
}

std::unique_ptr<Request> MpiCommunicator::do_isend(std::span<const std::byte> buffer, int peer,
                                                   int tag) {
  check_tag(comm_, tag, "isend");
  return post_chunks(MpiRequest::Kind::Send, buffer.size(), peer, tag, timeout_s_, notices_,
                     [&](std::size_t offset, int count, MPI_Request* request) {
                       TESSERA_MPI_CHECK(MPI_Isend(buffer.data() + offset, count, MPI_BYTE,
                                                   peer, tag, comm_, request));
                     });
}

std::unique_ptr<Request> MpiCommunicator::do_irecv(std::span<std::byte> buffer, int peer,
                                                   int tag) {
  check_tag(comm_, tag, "irecv");
  return post_chunks(MpiRequest::Kind::Receive, buffer.size(), peer, tag, timeout_s_, notices_,
                     [&](std::size_t offset, int count, MPI_Request* request) {
                       TESSERA_MPI_CHECK(MPI_Irecv(buffer.data() + offset, count, MPI_BYTE,
                                                   peer, tag, comm_, request));
                     });
}

}  // namespace tessera
