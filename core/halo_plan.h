// SPDX-License-Identifier: Apache-2.0
// HaloPlan: which rows one rank exchanges with each peer at every layer of graph-parallel
// training. Per peer, the owned rows this rank sends and the contiguous block of its halo rows
// that comes from that peer (both in increasing global id, so sender and receiver agree on the
// order). A plain struct: partition/ builds it (LocalGraph) and comm/ moves rows by it
// (HaloExchange), so it lives below both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/csr.h"

namespace tessera {

struct HaloPlan {
  std::vector<std::int64_t> send_offsets{0};  // (K + 1) rows for peer p: [send_offsets[p], ..[p+1])
  std::vector<NodeId> send_rows;              // owned local rows, grouped by peer
  std::vector<std::int64_t> recv_offsets{0};  // (K + 1) halo rows [recv_offsets[p], ..[p+1]) of p

  int num_peers() const { return static_cast<int>(send_offsets.size()) - 1; }
  std::int64_t num_send() const { return send_offsets.back(); }
  std::int64_t num_halo() const { return recv_offsets.back(); }
  std::int64_t send_count(int peer) const { return send_offsets[peer + 1] - send_offsets[peer]; }
  std::int64_t recv_count(int peer) const { return recv_offsets[peer + 1] - recv_offsets[peer]; }
  // Throws InvalidInput (prefixed with `where`) unless both offset arrays have K + 1
  // non-decreasing entries from 0, send_rows are in [0, num_owned) and `self` sends and
  // receives nothing.
  void validate(std::int64_t num_owned, int self, const std::string& where) const;
};

}  // namespace tessera
