// SPDX-License-Identifier: Apache-2.0
// Deadline, WaitPacer and poll_until (comm/wait.h).
#include "comm/wait.h"

#include <algorithm>
#include <thread>

#include "core/error.h"

namespace tessera {

using Clock = std::chrono::steady_clock;

Deadline::Deadline(double seconds) : forever_(seconds <= 0.0) {
  if (!forever_) {
    // Clamp so that absurd timeouts cannot overflow the clock's representation.
    const std::chrono::duration<double> span(std::min(seconds, 1.0e9));
    at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(span);
  }
}

bool Deadline::passed() const { return !forever_ && Clock::now() > at_; }

void WaitPacer::pause() {
  if (Clock::now() - start_ < kSpinFor) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(kNap);
  }
}

void poll_until(std::string_view what, double timeout_s, std::string_view why,
                const std::function<bool()>& done, const std::function<void()>& check) {
  const Deadline deadline(timeout_s);
  WaitPacer pacer;
  while (!done()) {
    check();
    if (deadline.passed())
      TESSERA_FAIL(Timeout, what, " did not complete within ", timeout_s, " s (", why, ")");
    pacer.pause();
  }
}

}  // namespace tessera
