// HaloExchange over the Communicator: one message per peer and direction, received in place
// (forward: straight into the peer's halo block; backward: into a (num_send, F) buffer that is
// then added into the owners' rows). Tags carry the layer and direction, so a stray message of
// another layer can never be taken for this one.
#include "comm/halo_exchange.h"

#include <chrono>
#include <string>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/kernels.h"

namespace tessera {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int forward_tag(int layer) { return 2 * layer; }
int backward_tag(int layer) { return 2 * layer + 1; }

std::span<std::byte> row_bytes_of(Tensor& t, std::int64_t begin, std::int64_t count) {
  const std::size_t row = static_cast<std::size_t>(t.cols()) * sizeof(float);
  return {static_cast<std::byte*>(t.raw()) + static_cast<std::size_t>(begin) * row,
          static_cast<std::size_t>(count) * row};
}
std::span<const std::byte> row_bytes_of(const Tensor& t, std::int64_t begin, std::int64_t count) {
  const std::size_t row = static_cast<std::size_t>(t.cols()) * sizeof(float);
  return {static_cast<const std::byte*>(t.raw()) + static_cast<std::size_t>(begin) * row,
          static_cast<std::size_t>(count) * row};
}

void check_offsets(const std::vector<std::int64_t>& offsets, int k, const char* name,
                   const std::string& where) {
  TESSERA_CHECK(static_cast<int>(offsets.size()) == k + 1, InvalidInput, where, ": ", name,
                " has ", offsets.size(), " entries, expected ", k + 1);
  TESSERA_CHECK(offsets.front() == 0, InvalidInput, where, ": ", name, " must start at 0");
  for (int p = 0; p < k; ++p) {
    TESSERA_CHECK(offsets[p] <= offsets[p + 1], InvalidInput, where, ": ", name,
                  " decreases at peer ", p);
  }
}

}  // namespace

void HaloPlan::validate(std::int64_t num_owned, int self, const std::string& where) const {
  const int k = num_peers();
  TESSERA_CHECK(k >= 1, InvalidInput, where, ": halo plan has no peers");
  check_offsets(send_offsets, k, "send offsets", where);
  check_offsets(recv_offsets, k, "receive offsets", where);
  TESSERA_CHECK(static_cast<std::int64_t>(send_rows.size()) == num_send(), InvalidInput, where,
                ": ", send_rows.size(), " send rows, offsets say ", num_send());
  for (NodeId row : send_rows) {
    TESSERA_CHECK(row >= 0 && row < num_owned, InvalidInput, where, ": send row ", row,
                  " is not an owned row (", num_owned, " owned)");
  }
  TESSERA_CHECK(self >= 0 && self < k, InvalidInput, where, ": part ", self, " of ", k);
  TESSERA_CHECK(send_count(self) == 0 && recv_count(self) == 0, InvalidInput, where,
                ": part ", self, " exchanges rows with itself");
}

HaloExchange::HaloExchange(Communicator& comm, const HaloPlan& plan) : comm_(comm), plan_(plan) {
  TESSERA_CHECK(plan.num_peers() == comm.size(), InvalidArgument, "halo plan for ",
                plan.num_peers(), " parts used on ", comm.size(), " ranks");
}

HaloExchange::~HaloExchange() = default;

void HaloExchange::start_forward(const Tensor& x, Tensor& halo, int layer) {
  TESSERA_CHECK(!active_, Internal, "halo exchange started while another is in flight");
  const double start = now_s();
  const std::int64_t f = x.cols();
  halo.resize(plan_.num_halo(), f);
  send_buffer_.resize(plan_.num_send(), f);
  gather_rows(send_buffer_, x, plan_.send_rows);
  requests_.clear();
  const int tag = forward_tag(layer);
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.recv_count(p) > 0) {
      requests_.push_back(
          comm_.irecv(row_bytes_of(halo, plan_.recv_offsets[p], plan_.recv_count(p)), p, tag));
    }
  }
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.send_count(p) > 0) {
      requests_.push_back(comm_.isend(
          row_bytes_of(std::as_const(send_buffer_), plan_.send_offsets[p], plan_.send_count(p)),
          p, tag, TrafficCategory::HaloForward));
    }
  }
  active_ = true;
  complete_ = requests_.empty();
  start_time_ = start;
  done_time_ = now_s();
  times_.exposed_s += done_time_ - start;
}

void HaloExchange::start_backward(const Tensor& d_halo, int layer) {
  TESSERA_CHECK(!active_, Internal, "halo exchange started while another is in flight");
  check_shape(d_halo, plan_.num_halo(), d_halo.cols(), "HaloExchange::start_backward d_halo");
  const double start = now_s();
  const std::int64_t f = d_halo.cols();
  send_buffer_.resize(plan_.num_send(), f);  // receives the gradients of the rows we sent
  requests_.clear();
  const int tag = backward_tag(layer);
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.send_count(p) > 0) {
      requests_.push_back(comm_.irecv(
          row_bytes_of(send_buffer_, plan_.send_offsets[p], plan_.send_count(p)), p, tag));
    }
  }
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.recv_count(p) > 0) {
      requests_.push_back(
          comm_.isend(row_bytes_of(d_halo, plan_.recv_offsets[p], plan_.recv_count(p)), p, tag,
                      TrafficCategory::HaloBackward));
    }
  }
  active_ = true;
  complete_ = requests_.empty();
  start_time_ = start;
  done_time_ = now_s();
  times_.exposed_s += done_time_ - start;
}

bool HaloExchange::poll() {
  if (!active_ || complete_) return true;
  if (test_all(requests_)) {
    complete_ = true;
    done_time_ = now_s();
  }
  return complete_;
}

void HaloExchange::wait_all_timed() {
  TESSERA_CHECK(active_, Internal, "halo exchange finished without being started");
  if (!complete_) {
    const double wait_start = now_s();
    wait_all(requests_);
    done_time_ = now_s();
    times_.exposed_s += done_time_ - wait_start;
    complete_ = true;
  }
  times_.comm_s += done_time_ - start_time_;
  requests_.clear();
  active_ = false;
}

void HaloExchange::finish_forward() { wait_all_timed(); }

void HaloExchange::finish_backward(Tensor& d_x) {
  wait_all_timed();
  const double start = now_s();
  scatter_add_rows(d_x, send_buffer_, plan_.send_rows);
  times_.exposed_s += now_s() - start;
}

}  // namespace tessera
