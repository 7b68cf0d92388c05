// Communicator: the one interface through which ranks talk (MPI and NCCL implementations plug
// in here). This file also holds SelfCommunicator, the single-process implementation, and the
// traffic counter that records every byte crossing a rank by category.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace tessera {

enum class TrafficCategory { HaloForward, HaloBackward, Pipeline, AllReduce, Count };
std::string_view to_string(TrafficCategory category);

// Bytes sent by this rank, per category, before (raw) and after message encoding (sent).
class TrafficCounter {
 public:
  void add(TrafficCategory category, std::uint64_t raw_bytes, std::uint64_t sent_bytes);
  std::uint64_t raw(TrafficCategory category) const;
  std::uint64_t sent(TrafficCategory category) const;
  std::uint64_t total_sent() const;
  void reset();

 private:
  std::array<std::uint64_t, static_cast<int>(TrafficCategory::Count)> raw_{};
  std::array<std::uint64_t, static_cast<int>(TrafficCategory::Count)> sent_{};
};

// A pending non-blocking operation.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place sums over all ranks.
  virtual void all_reduce_sum(std::span<float> values, TrafficCategory category) = 0;
  virtual void all_reduce_sum(std::span<double> values, TrafficCategory category) = 0;
  virtual std::unique_ptr<Request> isend(std::span<const std::byte> buffer, int peer, int tag,
                                         TrafficCategory category) = 0;
  virtual std::unique_ptr<Request> irecv(std::span<std::byte> buffer, int peer, int tag) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job with `code`; never returns.
  [[noreturn]] virtual void abort(int code) = 0;

  TrafficCounter& traffic() { return traffic_; }
  const TrafficCounter& traffic() const { return traffic_; }

 private:
  TrafficCounter traffic_;
};

// One rank: reductions are the identity, point-to-point messages to oneself are refused
// (a single-process plan has no peers).
class SelfCommunicator final : public Communicator {
 public:
  SelfCommunicator();
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(std::span<float>, TrafficCategory) override {}
  void all_reduce_sum(std::span<double>, TrafficCategory) override {}
  std::unique_ptr<Request> isend(std::span<const std::byte> buffer, int peer, int tag,
                                 TrafficCategory category) override;
  std::unique_ptr<Request> irecv(std::span<std::byte> buffer, int peer, int tag) override;
  void barrier() override {}
  [[noreturn]] void abort(int code) override;
};

}  // namespace tessera
