// Traffic counters and the single-process communicator.
#include "comm/communicator.h"

#include <cstdlib>

#include "engine/core/error.h"

namespace tessera {

std::string_view to_string(TrafficCategory category) {
  switch (category) {
    case TrafficCategory::HaloForward: return "halo_forward";
    case TrafficCategory::HaloBackward: return "halo_backward";
    case TrafficCategory::Pipeline: return "pipeline";
    case TrafficCategory::AllReduce: return "all_reduce";
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

SelfCommunicator::SelfCommunicator() = default;

std::unique_ptr<Request> SelfCommunicator::isend(std::span<const std::byte>, int peer, int,
                                                 TrafficCategory) {
  TESSERA_FAIL(InvalidArgument, "single-process communicator has no peer ", peer);
}

std::unique_ptr<Request> SelfCommunicator::irecv(std::span<std::byte>, int peer, int) {
  TESSERA_FAIL(InvalidArgument, "single-process communicator has no peer ", peer);
}

void SelfCommunicator::abort(int code) { std::_Exit(code); }

}  // namespace tessera
