// SPDX-License-Identifier: Apache-2.0
// Waiting with a deadline, shared by the communicators (MPI, NCCL): a Deadline (`seconds` from
// now, <= 0 never), a WaitPacer (how a waiting rank spends the time between polls) and
// poll_until, the loop every bounded wait of a communicator runs. Pure CPU code, so that the
// timeout rules have tests without MPI peers or a GPU.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

namespace tessera {

// A point in time `seconds` from now; seconds <= 0 means never.
class Deadline {
 public:
  explicit Deadline(double seconds);
  bool passed() const;

 private:
  bool forever_;
  std::chrono::steady_clock::time_point at_{};
};

// How a waiting rank spends the time between polls: yielding (a busy poll that lets others on
// its core run) for the first kSpinFor of a wait, which keeps short waits as quick as a spin,
// then sleeping kNap between polls. Ranks often share cores (several stages of a pipeline on
// one node, or oversubscribed tests), and a rank that waits seconds for another stage must not
// take half a core from the rank it waits for: sched_yield in a tight loop does. A nap adds at
// most kNap to a wait that was long already.
class WaitPacer {
 public:
  void pause();

 private:
  static constexpr std::chrono::microseconds kSpinFor{2000};
  static constexpr std::chrono::microseconds kNap{50};
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Calls done() until it returns true, and between polls check() (which throws to end the wait:
// an error the transport reports, another rank ending the job) and a pause. Throws
// Error(Timeout) "WHAT did not complete within T s (WHY)" once `timeout_s` seconds have passed
// (never when timeout_s <= 0). done() is called at least once, so a finished operation
// completes even with a deadline already past.
void poll_until(std::string_view what, double timeout_s, std::string_view why,
                const std::function<bool()>& done, const std::function<void()>& check);

}  // namespace tessera
