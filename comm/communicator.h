// SPDX-License-Identifier: Apache-2.0
// Communicator: the one interface through which ranks talk (MPI and NCCL implementations plug
// in here). This file also holds SelfCommunicator, the single-process implementation, and the
// traffic counter that records every byte crossing a rank by category. The public calls are
// non-virtual: they count traffic, then hand over to the implementation's do_* hooks.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessera {

enum class TrafficCategory { HaloForward, HaloBackward, Pipeline, AllReduce, Setup, Count };
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

// A pending non-blocking operation. wait() blocks until it completes or the communicator's
// timeout passes (then throws Error(Timeout) naming the peer); test() never blocks.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};

// Waits for every request in order (null entries are skipped).
void wait_all(std::span<const std::unique_ptr<Request>> requests);
// True when every request has completed (polls each; progresses the transport).
bool test_all(std::span<const std::unique_ptr<Request>> requests);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place sums over all ranks; every rank gets the same bits. Traffic is counted as the
  // bytes a ring all-reduce sends per rank: 2 (K-1)/K times the buffer.
  void all_reduce_sum(std::span<float> values, TrafficCategory category);
  void all_reduce_sum(std::span<double> values, TrafficCategory category);
  // In-place maxima over all ranks (status agreement, counts); counted as Setup traffic.
  void all_reduce_max(std::span<std::int64_t> values);
  // Root's bytes to every rank (same size everywhere); counted on the root, (K-1) times.
  void broadcast(std::span<std::byte> buffer, int root, TrafficCategory category);
  // Non-blocking point-to-point. `raw_bytes` is the size before message encoding
  // (0: the buffer is not encoded, raw = sent). The buffer must stay alive until completion.
  std::unique_ptr<Request> isend(std::span<const std::byte> buffer, int peer, int tag,
                                 TrafficCategory category, std::uint64_t raw_bytes = 0);
  std::unique_ptr<Request> irecv(std::span<std::byte> buffer, int peer, int tag);
  virtual void barrier() = 0;
  // Ends every rank of the job with `code`; never returns.
  [[noreturn]] virtual void abort(int code) = 0;
  // Seconds a wait may block before it throws Error(Timeout). <= 0: wait forever.
  virtual void set_timeout(double seconds) = 0;
  virtual double timeout() const = 0;

  // The ranks of this communicator with the same `color` (>= 0) as a new communicator, ordered
  // by `key` (then by rank). Collective over this communicator. The new one counts its traffic
  // in this one's counter, so a rank's bytes are in one place whatever it was sent through;
  // this communicator must outlive it.
  std::unique_ptr<Communicator> split(int color, int key);
  // From now on this communicator counts its traffic in `other`'s counter (which must outlive
  // it), as a split does: a rank's bytes stay in one place whichever communicator sent them.
  void count_traffic_in(Communicator& other) { traffic_ = other.traffic_; }
  // The same into a counter of the caller's (which must outlive this communicator): a
  // communicator that forwards to this one counts its bytes itself and gives this one a sink.
  void count_traffic_in(TrafficCounter& counter) { traffic_ = &counter; }

  TrafficCounter& traffic() { return *traffic_; }
  const TrafficCounter& traffic() const { return *traffic_; }

 protected:
  virtual void do_all_reduce_sum(std::span<float> values) = 0;
  virtual void do_all_reduce_sum(std::span<double> values) = 0;
  virtual void do_all_reduce_max(std::span<std::int64_t> values) = 0;
  virtual void do_broadcast(std::span<std::byte> buffer, int root) = 0;
  virtual std::unique_ptr<Request> do_isend(std::span<const std::byte> buffer, int peer,
                                            int tag) = 0;
  virtual std::unique_ptr<Request> do_irecv(std::span<std::byte> buffer, int peer, int tag) = 0;
  virtual std::unique_ptr<Communicator> do_split(int color, int key) = 0;

 private:
  TrafficCounter own_traffic_;
  TrafficCounter* traffic_ = &own_traffic_;  // a split's parent's counter
};

// One rank: reductions and broadcasts are the identity, point-to-point messages to oneself are
// refused (a single-process plan has no peers).
class SelfCommunicator final : public Communicator {
 public:
  SelfCommunicator();
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override;
  void set_timeout(double seconds) override { timeout_s_ = seconds; }
  double timeout() const override { return timeout_s_; }

 protected:
  void do_all_reduce_sum(std::span<float>) override {}
  void do_all_reduce_sum(std::span<double>) override {}
  void do_all_reduce_max(std::span<std::int64_t>) override {}
  void do_broadcast(std::span<std::byte>, int) override {}
  std::unique_ptr<Request> do_isend(std::span<const std::byte> buffer, int peer,
                                    int tag) override;
  std::unique_ptr<Request> do_irecv(std::span<std::byte> buffer, int peer, int tag) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  double timeout_s_ = 0.0;
};

}  // namespace tessera
