// SPDX-License-Identifier: Apache-2.0
// Traffic counters, the non-virtual Communicator calls (argument checks and traffic accounting
// around the implementation's do_* hooks), wait_all/test_all and the single-process
// communicator. Relies only on core/error.h.
#include "comm/communicator.h"

#include <cstdlib>

#include "core/error.h"

namespace tessera {
namespace {

// Bytes one rank sends in a ring all-reduce of `bytes`: reduce-scatter then all-gather, each
// (K-1) steps of bytes/K, i.e. bytes * 2 (K-1) / K. Integer arithmetic, multiplied before the
// division so that it is exact whenever K divides 2 (K-1) bytes (and rounds down otherwise);
// zero on one rank. No overflow below 2^63 / (2 K) bytes.
std::uint64_t ring_all_reduce_bytes(std::uint64_t bytes, int ranks) {
  const auto k = static_cast<std::uint64_t>(ranks);
  return k <= 1 ? 0 : bytes * 2 * (k - 1) / k;
}

void check_peer(const Communicator& comm, int peer, const char* operation) {
  TESSERA_CHECK(peer >= 0 && peer < comm.size(), InvalidArgument, operation,
                ": expected a peer rank in [0, ", comm.size(), "), got ", peer);
}

}  // namespace

std::string_view to_string(TrafficCategory category) {
  switch (category) {
    case TrafficCategory::HaloForward: return "halo_forward";
    case TrafficCategory::HaloBackward: return "halo_backward";
    case TrafficCategory::Pipeline: return "pipeline";
    case TrafficCategory::AllReduce: return "all_reduce";
    case TrafficCategory::Setup: return "setup";
    case TrafficCategory::Count: break;
  }
  return "unknown";
}

void TrafficCounter::add(TrafficCategory category, std::uint64_t raw_bytes,
                         std::uint64_t sent_bytes) {
  raw_[static_cast<int>(category)] += raw_bytes;
  sent_[static_cast<int>(category)] += sent_bytes;
}
std::uint64_t TrafficCounter::raw(TrafficCategory category) const {
  return raw_[static_cast<int>(category)];
}
std::uint64_t TrafficCounter::sent(TrafficCategory category) const {
  return sent_[static_cast<int>(category)];
}
std::uint64_t TrafficCounter::total_sent() const {
  std::uint64_t total = 0;
  for (std::uint64_t bytes : sent_) total += bytes;
  return total;
}
void TrafficCounter::reset() {
  raw_.fill(0);
  sent_.fill(0);
}

void wait_all(std::span<const std::unique_ptr<Request>> requests) {
  for (const auto& request : requests) {
    if (request) request->wait();
  }
}

bool test_all(std::span<const std::unique_ptr<Request>> requests) {
  bool all_done = true;
  for (const auto& request : requests) {
    // Test every request (no short cut) so that each one makes progress.
    if (request && !request->test()) all_done = false;
  }
  return all_done;
}

// Traffic is counted after the implementation returns: an operation that throws moved nothing
// this rank can vouch for.
void Communicator::all_reduce_sum(std::span<float> values, TrafficCategory category) {
  do_all_reduce_sum(values);
  const std::uint64_t bytes = ring_all_reduce_bytes(values.size_bytes(), size());
  traffic_->add(category, bytes, bytes);
}

void Communicator::all_reduce_sum(std::span<double> values, TrafficCategory category) {
  do_all_reduce_sum(values);
  const std::uint64_t bytes = ring_all_reduce_bytes(values.size_bytes(), size());
  traffic_->add(category, bytes, bytes);
}

void Communicator::all_reduce_max(std::span<std::int64_t> values) {
  do_all_reduce_max(values);
  const std::uint64_t bytes = ring_all_reduce_bytes(values.size_bytes(), size());
  traffic_->add(TrafficCategory::Setup, bytes, bytes);
}

void Communicator::broadcast(std::span<std::byte> buffer, int root, TrafficCategory category) {
  TESSERA_CHECK(root >= 0 && root < size(), InvalidArgument,
                "broadcast: expected a root rank in [0, ", size(), "), got ", root);
  do_broadcast(buffer, root);
  if (rank() == root) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(size() - 1) * buffer.size();
    traffic_->add(category, bytes, bytes);
  }
}

std::unique_ptr<Request> Communicator::isend(std::span<const std::byte> buffer, int peer,
                                             int tag, TrafficCategory category,
                                             std::uint64_t raw_bytes) {
  check_peer(*this, peer, "isend");
  std::unique_ptr<Request> request = do_isend(buffer, peer, tag);
  // Counted when posted: from here on the bytes leave this rank whether or not anyone waits.
  traffic_->add(category, raw_bytes != 0 ? raw_bytes : buffer.size(), buffer.size());
  return request;
}

std::unique_ptr<Request> Communicator::irecv(std::span<std::byte> buffer, int peer, int tag) {
  check_peer(*this, peer, "irecv");
  return do_irecv(buffer, peer, tag);
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  TESSERA_CHECK(color >= 0, InvalidArgument, "Communicator::split: color must be >= 0, got ",
                color);
  std::unique_ptr<Communicator> part = do_split(color, key);
  part->traffic_ = traffic_;
  return part;
}

SelfCommunicator::SelfCommunicator() = default;

std::unique_ptr<Communicator> SelfCommunicator::do_split(int, int) {
  auto part = std::make_unique<SelfCommunicator>();
  part->set_timeout(timeout_s_);
  return part;
}

std::unique_ptr<Request> SelfCommunicator::do_isend(std::span<const std::byte>, int peer, int) {
  TESSERA_FAIL(InvalidArgument, "isend: the single-process communicator has no peers, got a "
               "message for rank ", peer);
}

std::unique_ptr<Request> SelfCommunicator::do_irecv(std::span<std::byte>, int peer, int) {
  TESSERA_FAIL(InvalidArgument, "irecv: the single-process communicator has no peers, got a "
               "receive from rank ", peer);
}

void SelfCommunicator::abort(int code) { std::_Exit(code); }

}  // namespace tessera
