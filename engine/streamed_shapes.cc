// SPDX-License-Identifier: Apache-2.0
// block_shapes_from_file: the part shapes of --partition block on a Tessera HDF5 file, from one
// pass over its graph a stretch of rows at a time and, for the entries whose reverse is stored
// too, a seeded sample of each part's entries looked up in the file (docs/planner.md).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "engine/planner.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

constexpr std::int64_t kStretchEntries = std::int64_t{1} << 24;  // about 64 MiB of columns a read

// One bit a node.
class NodeBits {
 public:
  explicit NodeBits(std::int64_t n) : words_(static_cast<std::size_t>((n + 63) / 64), 0) {}
  void set(std::int64_t i) { words_[static_cast<std::size_t>(i >> 6)] |= bit(i); }
  // The set bits in [begin, end).
  std::int64_t count(std::int64_t begin, std::int64_t end) const {
    std::int64_t total = 0;
    for (std::int64_t i = begin; i < end;) {
      const std::uint64_t word = words_[static_cast<std::size_t>(i >> 6)];
      const std::int64_t stop = std::min(end, (i | 63) + 1);
      const int width = static_cast<int>(stop - i);
      const std::uint64_t mask = width == 64 ? ~0ull : ((1ull << width) - 1) << (i & 63);
      total += std::popcount(word & mask);
      i = stop;
    }
    return total;
  }

 private:
  static std::uint64_t bit(std::int64_t i) { return 1ull << (i & 63); }
  std::vector<std::uint64_t> words_;
};

// Stored entries (self loops left out) of a part's rows, by where their column lives.
struct StoredCounts {
  std::int64_t out = 0;        // in the part's rows
  std::int64_t in = 0;         // in other rows (any part's), with a column in the part
  std::int64_t cross_out = 0;  // in the part's rows, column in another part
  std::int64_t cross_in = 0;   // in another part's rows, column in the part
};

// Of the looked-up entries (u, v) of a part's rows: those whose reverse (v, u) is stored, which
// the symmetrised row u counts once instead of twice.
struct ReverseSample {
  std::int64_t looked = 0, reversed = 0;              // all
  std::int64_t cross_looked = 0, cross_reversed = 0;  // with v in another part
  bool all = true;                                    // every entry was looked up
};

bool row_has(const Csr& row, NodeId column) {
  const auto begin = row.indices().begin(), end = row.indices().end();
  return std::binary_search(begin, end, column);  // rows are sorted (checked on read)
}

// Looks up entry (u, v) of part p's rows; owner() gives v's part.
template <class Owner>
void look_up(Hdf5GraphReader& file, std::int64_t u, NodeId v, int p, Owner owner,
             ReverseSample& s) {
  if (v == u) return;
  const bool reversed = row_has(file.rows(v, v + 1), static_cast<NodeId>(u));
  ++s.looked;
  s.reversed += reversed;
  if (owner(v) != p) {
    ++s.cross_looked;
    s.cross_reversed += reversed;
  }
}

// Every entry of part p's rows [begin, end) when it stores at most `sample` of them, else
// `sample` of them drawn uniformly (with repeats) by `rng`.
template <class Owner>
ReverseSample sample_reverses(Hdf5GraphReader& file, std::int64_t begin, std::int64_t end, int p,
                              Owner owner, std::int64_t sample, const CounterRng& rng) {
  ReverseSample s;
  const std::vector<EdgeOffset> starts = file.row_starts(begin, end);
  const EdgeOffset first = starts.front(), stored = starts.back() - first;
  if (stored <= sample) {
    const Csr rows = file.rows(begin, end);
    for (std::int64_t r = 0; r < rows.num_rows(); ++r)
      for (EdgeOffset e = rows.indptr()[r]; e < rows.indptr()[r + 1]; ++e)
        look_up(file, begin + r, rows.indices()[e], p, owner, s);
    return s;
  }
  s.all = false;
  for (std::int64_t i = 0; i < sample; ++i) {
    const auto words = rng.words(static_cast<std::uint64_t>(p), static_cast<std::uint32_t>(i));
    const std::uint64_t draw = (std::uint64_t{words[0]} << 32) | words[1];
    const EdgeOffset entry =
        first + static_cast<EdgeOffset>(draw % static_cast<std::uint64_t>(stored));
    const auto row = std::upper_bound(starts.begin(), starts.end(), entry) - starts.begin() - 1;
    look_up(file, begin + row, file.column(entry), p, owner, s);
  }
  return s;
}

}  // namespace

StreamedShapes block_shapes_from_file(Hdf5GraphReader& file, int parts, std::int64_t sample,
                                      std::uint64_t seed) {
  const std::int64_t n = file.num_nodes();
  check_num_parts(n, parts);
  TESSERA_CHECK(sample >= 1, InvalidArgument, "block_shapes_from_file: sample must be >= 1, got ",
                sample);
  const auto owner = [&](std::int64_t v) { return block_part_of(n, parts, v); };
  std::vector<NodeBits> halo(static_cast<std::size_t>(parts), NodeBits(n));  // (K, N) bits
  NodeBits boundary(n);
  std::vector<StoredCounts> counts(static_cast<std::size_t>(parts));
  const std::int64_t mean_degree =
      std::max<std::int64_t>(1, file.num_entries() / std::max<std::int64_t>(1, n));
  const std::int64_t stretch =
      std::max<std::int64_t>(1, kStretchEntries / mean_degree);  // rows a read
  for (std::int64_t begin = 0; begin < n; begin += stretch) {
    const std::int64_t end = std::min(n, begin + stretch);
    const Csr rows = file.rows(begin, end);
    for (std::int64_t r = 0; r < rows.num_rows(); ++r) {
      const std::int64_t u = begin + r;
      const int p = owner(u);
      for (EdgeOffset e = rows.indptr()[r]; e < rows.indptr()[r + 1]; ++e) {
        const NodeId v = rows.indices()[e];
        if (v == u) continue;
        const int q = owner(v);
        ++counts[static_cast<std::size_t>(p)].out;
        ++counts[static_cast<std::size_t>(q)].in;
        if (p == q) continue;
        ++counts[static_cast<std::size_t>(p)].cross_out;
        ++counts[static_cast<std::size_t>(q)].cross_in;
        halo[static_cast<std::size_t>(p)].set(v);  // the symmetrised graph has (u, v) and (v, u)
        halo[static_cast<std::size_t>(q)].set(u);
        boundary.set(u);
        boundary.set(v);
      }
    }
  }
  StreamedShapes out;
  out.parts.resize(static_cast<std::size_t>(parts));
  const CounterRng rng(seed, 0, 0, RngPurpose::Init);
  for (int p = 0; p < parts; ++p) {
    const std::int64_t begin = block_first(n, parts, p);
    const std::int64_t end = block_first(n, parts, p + 1);
    const StoredCounts& c = counts[static_cast<std::size_t>(p)];
    const ReverseSample s = sample_reverses(file, begin, end, p, owner, sample, rng);
    out.sampled += s.looked;
    out.exact = out.exact && s.all;
    // Entries whose reverse is stored too, counted twice above: all of them when every entry
    // was looked up, else scaled from the sample (the crossing ones from the crossing entries of
    // the sample, or from all of them when it drew none).
    const double share =
        s.looked > 0 ? static_cast<double>(s.reversed) / static_cast<double>(s.looked) : 0.0;
    const double cross_share = s.cross_looked > 0 ? static_cast<double>(s.cross_reversed) /
                                                        static_cast<double>(s.cross_looked)
                                                  : share;
    const std::int64_t both =
        s.all ? s.reversed : static_cast<std::int64_t>(share * static_cast<double>(c.out) + 0.5);
    const std::int64_t cross_both =
        s.all ? s.cross_reversed
              : static_cast<std::int64_t>(cross_share * static_cast<double>(c.cross_out) + 0.5);
    PartShape& shape = out.parts[static_cast<std::size_t>(p)];
    shape.owned = end - begin;
    shape.entries = c.out + c.in - both;
    shape.halo_entries = c.cross_out + c.cross_in - cross_both;
    shape.halo = halo[static_cast<std::size_t>(p)].count(0, n);
    shape.boundary = boundary.count(begin, end);
    for (int q = 0; q < parts; ++q)
      if (q != p) shape.send += halo[static_cast<std::size_t>(q)].count(begin, end);
  }
  for (const GlobalId v : file.train_ids()) ++out.parts[static_cast<std::size_t>(owner(v))].train;
  return out;
}

}  // namespace tessera
