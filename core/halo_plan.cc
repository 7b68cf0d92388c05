// SPDX-License-Identifier: Apache-2.0
// HaloPlan::validate: the shape checks every reader of a plan (part files, tests) relies on.
#include "core/halo_plan.h"

#include "core/error.h"

namespace tessera {
namespace {

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

}  // namespace tessera
