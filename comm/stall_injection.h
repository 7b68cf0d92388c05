// SPDX-License-Identifier: Apache-2.0
// Stall injection for the tests of deadlines: TESSERA_STALL=RANK:PHASE makes that rank stop (sleep
// for an hour) when it reaches a set-up step whose name contains PHASE — the agreement at the
// end of an agreed phase ("loading the dataset", "partitioning", ...), or "splitting the
// communicator" — so that the tests can check that every other rank gives up within
// --comm-timeout instead of waiting for it.
#pragma once

#include <string_view>

namespace tessera {

// Sleeps here when TESSERA_STALL names this rank and a part of `step`.
void stall_if_injected(int rank, std::string_view step);

}  // namespace tessera
