// SPDX-License-Identifier: Apache-2.0
// TESSERA_STALL parsing and the stall itself (comm/stall_injection.h).
#include "comm/stall_injection.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace tessera {

void stall_if_injected(int rank, std::string_view step) {
  const char* text = std::getenv("TESSERA_STALL");
  if (text == nullptr || *text == '\0') return;
  const std::string spec = text;
  const std::size_t colon = spec.find(':');
  if (colon == std::string::npos || colon == 0) return;
  if (std::atoi(spec.substr(0, colon).c_str()) != rank) return;
  const std::string phase = spec.substr(colon + 1);
  if (phase.empty() || step.find(phase) == std::string_view::npos) return;
  std::fprintf(stderr, "rank %d: stalling in %.*s (TESSERA_STALL)\n", rank,
               static_cast<int>(step.size()), step.data());
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace tessera
