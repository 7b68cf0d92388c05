// SPDX-License-Identifier: Apache-2.0
// partition_distributed: partitions a Tessera HDF5 dataset across MPI ranks with PT-Scotch
// (SCOTCH_dgraphPart) without any rank reading or holding the whole graph, and writes a plan
// file (partition/plan_file.h) for `train_gcn --partition-file`, whose ranks then build their
// parts from slices of the file.
//
// Debian builds PT-Scotch against Open MPI, so this one program is built against Open MPI too
// and started with its launcher (mpiexec.openmpi); everything else in Tessera runs on MPICH.
// It therefore uses MPI directly, not Tessera's communicators (which are MPICH's).
//
// Each rank reads rows [rN/K, (r+1)N/K) of the file without features, sends the owners of its
// columns the reverse entries (the training graph is symmetric, without self loops), and hands
// PT-Scotch its rows. PT-Scotch balances one vertex weight (METIS in process balances nodes and
// training nodes as two): a node weighs 1, a training node 1 + round(N / T), so that the
// training nodes carry as much of the total weight as all nodes do and the parts balance both
// about evenly. A repair pass then gives every part a node and a training node, as
// partition_metis does. Every rank gathers the N owners (4 bytes a node) to count the edge cut;
// rank 0 writes the plan.
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>

// After <mpi.h>, <stdint.h> and <stdio.h>, which they use without including them.
#include <scotch.h>
// After <scotch.h>.
#include <ptscotch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "apps/cli_errors.h"
#include "core/build_info.h"
#include "core/error.h"
#include "datasets/dataset.h"
#include "datasets/loaders.h"
#include "engine/system.h"
#include "partition/partition_plan.h"
#include "partition/plan_file.h"

namespace {

using namespace tessera;
using Num = SCOTCH_Num;
// Built twice: against PT-Scotch's 32-bit indices (partition_distributed: about half the
// memory) and its 64-bit ones (partition_distributed64: graphs past 2^31 - 1 entries).
constexpr bool kWide = sizeof(Num) == 8;
constexpr const char* kProgram = kWide ? "partition_distributed64" : "partition_distributed";

struct Flags {
  std::string dataset;
  std::string out;
  int parts = 0;  // 0: one per rank
  double imbalance = 0.05;
  std::string strategy = "quality";
  std::uint64_t seed = 0;
  bool quiet = false;
};

struct World {
  int rank = 0;
  int size = 1;
};

// A failure on some rank, agreed by all: the lowest failing rank's message.
struct AgreedFailure {
  std::string message;
  int rank = 0;
};

// Runs `step` on every rank; when it throws on any, every rank throws the same AgreedFailure.
void agreed(const World& w, const std::function<void()>& step) {
  std::string message;
  try {
    step();
  } catch (const std::exception& e) {
    message = e.what();
    if (message.empty()) message = "unknown error";
  }
  int mine = message.empty() ? w.size : w.rank, first = w.size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == w.size) return;
  long length = static_cast<long>(message.size());
  MPI_Bcast(&length, 1, MPI_LONG, first, MPI_COMM_WORLD);
  message.resize(static_cast<std::size_t>(length));
  MPI_Bcast(message.data(), static_cast<int>(length), MPI_CHAR, first, MPI_COMM_WORLD);
  throw AgreedFailure{message, first};
}

int checked_count(std::size_t count, const char* what) {
  TESSERA_CHECK(count <= static_cast<std::size_t>(INT_MAX), InvalidArgument, what, ": ", count,
                " values in one MPI message (at most ", INT_MAX, "); start more ranks");
  return static_cast<int>(count);
}

// Sends send[at[q] .. at[q] + counts[q]) to every rank q (one all-to-all of counts, one of
// values); returns what came in, in rank order.
std::vector<std::int64_t> all_to_all(const World& w, const std::vector<std::int64_t>& send,
                                     const std::vector<int>& counts, const std::vector<int>& at) {
  std::vector<int> recv_counts(static_cast<std::size_t>(w.size)),
      recv_at(static_cast<std::size_t>(w.size));
  MPI_Alltoall(counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::size_t total = 0;
  for (int q = 0; q < w.size; ++q) {
    recv_at[static_cast<std::size_t>(q)] = checked_count(total, "reverse entries");
    total += static_cast<std::size_t>(recv_counts[static_cast<std::size_t>(q)]);
  }
  std::vector<std::int64_t> in(total);
  MPI_Alltoallv(send.data(), counts.data(), at.data(), MPI_INT64_T, in.data(), recv_counts.data(),
                recv_at.data(), MPI_INT64_T, MPI_COMM_WORLD);
  return in;
}

// This rank's rows of the symmetrised training graph as PT-Scotch's distributed CSR.
struct DistributedGraph {
  std::vector<Num> xadj;    // (n + 1)
  std::vector<Num> adjncy;  // global columns
  std::vector<Num> vwgt;    // (n)
};

// The reverse (u, v) of every entry (v, u) of the slice but self loops, as pairs sent to the
// rank whose rows hold u; what came in from every rank (this one too).
std::vector<std::int64_t> reverse_entries(const World& w, const DatasetSlice& s) {
  const std::int64_t n = s.row_end - s.row_begin;
  const auto& indptr = s.rows.indptr();
  const auto& indices = s.rows.indices();
  std::vector<std::size_t> count(static_cast<std::size_t>(w.size), 0);
  for (std::int64_t r = 0; r < n; ++r) {
    for (EdgeOffset e = indptr[r]; e < indptr[r + 1]; ++e) {
      if (indices[e] != s.row_begin + r)
        count[static_cast<std::size_t>(block_part_of(s.num_nodes, w.size, indices[e]))] += 2;
    }
  }
  std::vector<int> counts(static_cast<std::size_t>(w.size)), at(static_cast<std::size_t>(w.size));
  std::vector<std::size_t> cursor(static_cast<std::size_t>(w.size));
  std::size_t total = 0;
  for (std::size_t q = 0; q < count.size(); ++q) {
    at[q] = checked_count(total, "reverse entries");
    counts[q] = checked_count(count[q], "reverse entries");
    cursor[q] = total;
    total += count[q];
  }
  std::vector<std::int64_t> send(total);
  for (std::int64_t r = 0; r < n; ++r) {
    for (EdgeOffset e = indptr[r]; e < indptr[r + 1]; ++e) {
      const GlobalId u = indices[e];
      if (u == s.row_begin + r) continue;
      std::size_t& to = cursor[static_cast<std::size_t>(block_part_of(s.num_nodes, w.size, u))];
      send[to++] = u;
      send[to++] = s.row_begin + r;
    }
  }
  return all_to_all(w, send, counts, at);
}

// The slice's rows of the symmetrised graph without self loops: its own entries and the reverse
// entries, sorted and without duplicates per row. Counted, then filled: no per-row vectors.
DistributedGraph distributed_graph(const World& w, const DatasetSlice& s,
                                   std::int64_t train_total) {
  const std::int64_t n = s.row_end - s.row_begin;
  const auto& indptr = s.rows.indptr();
  const auto& indices = s.rows.indices();
  const std::vector<std::int64_t> in = reverse_entries(w, s);
  DistributedGraph g;
  g.xadj.assign(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t r = 0; r < n; ++r) {
    for (EdgeOffset e = indptr[r]; e < indptr[r + 1]; ++e)
      g.xadj[static_cast<std::size_t>(r) + 1] += indices[e] != s.row_begin + r;
  }
  for (std::size_t i = 0; i + 1 < in.size(); i += 2)
    ++g.xadj[static_cast<std::size_t>(in[i] - s.row_begin) + 1];
  for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) g.xadj[r + 1] += g.xadj[r];
  g.adjncy.resize(static_cast<std::size_t>(g.xadj.back()));
  std::vector<Num> fill(g.xadj.begin(), g.xadj.end() - 1);
  for (std::int64_t r = 0; r < n; ++r) {
    for (EdgeOffset e = indptr[r]; e < indptr[r + 1]; ++e) {
      if (indices[e] != s.row_begin + r)
        g.adjncy[static_cast<std::size_t>(fill[static_cast<std::size_t>(r)]++)] = indices[e];
    }
  }
  for (std::size_t i = 0; i + 1 < in.size(); i += 2) {
    g.adjncy[static_cast<std::size_t>(fill[static_cast<std::size_t>(in[i] - s.row_begin)]++)] =
        in[i + 1];
  }
  // Sorted and unique per row, compacted in place.
  Num kept = 0;
  for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
    const auto first = g.adjncy.begin() + g.xadj[r], last = g.adjncy.begin() + g.xadj[r + 1];
    std::sort(first, last);
    const auto end = std::unique(first, last);
    g.xadj[r] = kept;
    kept = static_cast<Num>(std::copy(first, end, g.adjncy.begin() + kept) - g.adjncy.begin());
  }
  g.xadj.back() = kept;
  g.adjncy.resize(static_cast<std::size_t>(kept));
  g.vwgt.assign(static_cast<std::size_t>(n), 1);
  if (train_total > 0) {
    const Num extra = std::max<Num>(
        1, std::llround(static_cast<double>(s.num_nodes) / static_cast<double>(train_total)));
    for (const GlobalId v : s.train_idx) g.vwgt[static_cast<std::size_t>(v - s.row_begin)] += extra;
  }
  return g;
}

// Nodes and training nodes per part, summed over the ranks.
struct PartCounts {
  std::vector<std::int64_t> nodes, train;
};

PartCounts part_counts(const std::vector<Num>& part, const DatasetSlice& s, int parts) {
  PartCounts c{std::vector<std::int64_t>(static_cast<std::size_t>(parts), 0),
               std::vector<std::int64_t>(static_cast<std::size_t>(parts), 0)};
  for (const Num p : part) ++c.nodes[static_cast<std::size_t>(p)];
  for (const GlobalId v : s.train_idx)
    ++c.train[static_cast<std::size_t>(part[static_cast<std::size_t>(v - s.row_begin)])];
  MPI_Allreduce(MPI_IN_PLACE, c.nodes.data(), parts, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, c.train.data(), parts, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return c;
}

// Gives every part at least one node and, when there are as many training nodes as parts, one
// training node: the lowest-id (training) node of the largest part moves to the part without.
void repair(std::vector<Num>& part, const DatasetSlice& s, int parts) {
  std::vector<char> is_train(part.size(), 0);
  for (const GlobalId v : s.train_idx) is_train[static_cast<std::size_t>(v - s.row_begin)] = 1;
  for (int round = 0; round < 2 * parts; ++round) {
    const PartCounts c = part_counts(part, s, parts);
    std::int64_t train_total = 0;
    for (const std::int64_t t : c.train) train_total += t;
    const auto empty_nodes = std::find(c.nodes.begin(), c.nodes.end(), 0);
    const auto empty_train = std::find(c.train.begin(), c.train.end(), 0);
    const bool need_train =
        empty_nodes == c.nodes.end() && train_total >= parts && empty_train != c.train.end();
    if (empty_nodes == c.nodes.end() && !need_train) return;
    const auto& by = need_train ? c.train : c.nodes;
    const int to = static_cast<int>(
        (need_train ? empty_train - c.train.begin() : empty_nodes - c.nodes.begin()));
    const int from = static_cast<int>(std::max_element(by.begin(), by.end()) - by.begin());
    std::int64_t mine = INT64_MAX, chosen = INT64_MAX;
    for (std::size_t r = 0; r < part.size() && mine == INT64_MAX; ++r) {
      if (part[r] == from && (!need_train || is_train[r]))
        mine = s.row_begin + static_cast<std::int64_t>(r);
    }
    MPI_Allreduce(&mine, &chosen, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    if (chosen >= s.row_begin && chosen < s.row_end)
      part[static_cast<std::size_t>(chosen - s.row_begin)] = to;
  }
}

// SCOTCH_dgraphPart with the quality strategy for `parts` parts within `imbalance`.
// PT-Scotch's strategy flags by name (SCOTCH_STRAT*).
const std::map<std::string, Num>& strategies() {
  static const std::map<std::string, Num> names = {{"default", SCOTCH_STRATDEFAULT},
                                                   {"quality", SCOTCH_STRATQUALITY},
                                                   {"speed", SCOTCH_STRATSPEED},
                                                   {"balance", SCOTCH_STRATBALANCE},
                                                   {"scalability", SCOTCH_STRATSCALABILITY}};
  return names;
}

std::vector<Num> run_ptscotch(const World& w, DistributedGraph& g, const Flags& f) {
  const int parts = f.parts;
  const auto n = static_cast<Num>(g.xadj.size() - 1);
  const auto entries = static_cast<Num>(g.adjncy.size());
  std::vector<Num> part(static_cast<std::size_t>(n) + 1, 0);  // + 1: never an empty array
  g.adjncy.push_back(0);                                      // likewise (not an entry)
  // A context that makes PT-Scotch deterministic (same ranks, same seed: the same parts).
  SCOTCH_Context context;
  SCOTCH_Dgraph graph, bound;
  SCOTCH_Strat strategy;
  TESSERA_CHECK(SCOTCH_contextInit(&context) == 0 && SCOTCH_dgraphInit(&graph, MPI_COMM_WORLD) == 0,
                Internal, "PT-Scotch: initialisation failed");
  SCOTCH_stratInit(&strategy);
  int status = SCOTCH_contextOptionSetNum(&context, SCOTCH_OPTIONNUMDETERMINISTIC, 1);
  if (status == 0)
    status = SCOTCH_contextOptionSetNum(&context, SCOTCH_OPTIONNUMRANDOMFIXEDSEED, 1);
  // One thread per rank: the ranks are the parallelism (and share the cores).
  if (status == 0) status = SCOTCH_contextThreadSpawn(&context, 1, nullptr);
  SCOTCH_contextRandomSeed(&context, static_cast<SCOTCH_Num>(f.seed));
  if (status == 0) {
    status = SCOTCH_dgraphBuild(&graph, 0, n, n, g.xadj.data(), g.xadj.data() + 1, g.vwgt.data(),
                                nullptr, entries, entries, g.adjncy.data(), nullptr, nullptr);
  }
  const bool bind =
      status == 0 && (status = SCOTCH_contextBindDgraph(&context, &graph, &bound)) == 0;
  if (status == 0) {
    status = SCOTCH_stratDgraphMapBuild(&strategy, strategies().at(f.strategy), w.size, parts,
                                        f.imbalance);
  }
  if (status == 0) status = SCOTCH_dgraphPart(&bound, parts, &strategy, part.data());
  SCOTCH_stratExit(&strategy);
  if (bind) SCOTCH_dgraphExit(&bound);
  SCOTCH_dgraphExit(&graph);
  SCOTCH_contextExit(&context);
  g.adjncy.pop_back();
  TESSERA_CHECK(status == 0, Internal, "PT-Scotch could not partition the graph (status ", status,
                "; its message is above)");
  part.pop_back();
  return part;
}

// Directed entries of the training graph whose ends lie in different parts, over all ranks.
std::int64_t edge_cut(const DistributedGraph& g, const std::vector<std::int32_t>& owner,
                      std::int64_t row_begin) {
  std::int64_t cut = 0;
  for (std::size_t r = 0; r + 1 < g.xadj.size(); ++r) {
    const std::int32_t p = owner[static_cast<std::size_t>(row_begin) + r];
    for (Num e = g.xadj[r]; e < g.xadj[r + 1]; ++e)
      cut += owner[static_cast<std::size_t>(g.adjncy[static_cast<std::size_t>(e)])] != p;
  }
  MPI_Allreduce(MPI_IN_PLACE, &cut, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return cut;
}

double peak_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void print_summary(const Flags& f, const DatasetSlice& s, const PartCounts& c, int parts,
                   std::int64_t cut, std::int64_t entries, double seconds, double peak) {
  const auto max_mean = [&](const std::vector<std::int64_t>& v) {
    std::int64_t total = 0;
    for (const std::int64_t x : v) total += x;
    return total > 0 ? static_cast<double>(*std::max_element(v.begin(), v.end())) * parts /
                           static_cast<double>(total)
                     : 1.0;
  };
  std::printf(
      "%s: %d parts (ptscotch, %.2f s), edge cut %lld of %lld (%.1f%%), imbalance %.3f, "
      "train imbalance %.3f\n",
      s.name.c_str(), parts, seconds, static_cast<long long>(cut), static_cast<long long>(entries),
      entries ? 100.0 * static_cast<double>(cut) / static_cast<double>(entries) : 0.0,
      max_mean(c.nodes), max_mean(c.train));
  std::printf("%6s %12s %12s\n", "part", "nodes", "train");
  for (int p = 0; p < parts; ++p) {
    std::printf("%6d %12lld %12lld\n", p,
                static_cast<long long>(c.nodes[static_cast<std::size_t>(p)]),
                static_cast<long long>(c.train[static_cast<std::size_t>(p)]));
  }
  std::printf("Largest peak resident memory of a rank: %.0f MiB\n", peak);
  std::printf("Wrote %s\n", f.out.c_str());
}

// Every node's part on every rank (an all-gather of the ranks' rows).
std::vector<std::int32_t> gather_owners(const World& w, const std::vector<Num>& part,
                                        std::int64_t num_nodes) {
  const std::vector<std::int32_t> mine(part.begin(), part.end());
  std::vector<int> sizes(static_cast<std::size_t>(w.size)), at(static_cast<std::size_t>(w.size));
  for (int q = 0; q < w.size; ++q) {
    at[static_cast<std::size_t>(q)] = checked_count(
        static_cast<std::size_t>(block_first(num_nodes, w.size, q)), "the nodes' parts");
    sizes[static_cast<std::size_t>(q)] =
        static_cast<int>(block_first(num_nodes, w.size, q + 1) - block_first(num_nodes, w.size, q));
  }
  std::vector<std::int32_t> owner(static_cast<std::size_t>(num_nodes));
  MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_INT32_T, owner.data(),
                 sizes.data(), at.data(), MPI_INT32_T, MPI_COMM_WORLD);
  return owner;
}

// This rank's slice of the file, without features.
DatasetSlice read_slice(const World& w, const Flags& f) {
  const std::int64_t n = read_hdf5_rows(f.dataset, 0, 0, false).num_nodes;
  TESSERA_CHECK(f.parts <= n && w.size <= n, InvalidArgument, "--parts ", f.parts, " on ", w.size,
                " ranks: more parts or ranks than the ", n, " nodes of ", f.dataset);
  return read_hdf5_rows(f.dataset, block_first(n, w.size, w.rank),
                        block_first(n, w.size, w.rank + 1), false);
}

int run(const World& w, Flags f) {
  if (f.parts == 0) f.parts = w.size;
  agreed(w, [&] {
    std::error_code ec;
    TESSERA_CHECK(!std::filesystem::exists(f.out, ec), InvalidArgument, "--out ", f.out,
                  ": exists; choose a new plan file");
    TESSERA_CHECK(is_hdf5_spec(f.dataset), InvalidArgument, "--dataset ", f.dataset,
                  ": not a Tessera HDF5 file (.h5); convert it first with tessera_data convert");
  });
  Stopwatch watch;
  DatasetSlice s;
  agreed(w, [&] { s = read_slice(w, f); });
  std::int64_t train_total = static_cast<std::int64_t>(s.train_idx.size());
  MPI_Allreduce(MPI_IN_PLACE, &train_total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  DistributedGraph g;
  agreed(w, [&] {
    g = distributed_graph(w, s, train_total);
    s.rows = Csr();
  });
  auto entries = static_cast<std::int64_t>(g.adjncy.size());
  MPI_Allreduce(MPI_IN_PLACE, &entries, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  agreed(w, [&] {
    TESSERA_CHECK(kWide || entries < std::int64_t{INT32_MAX}, InvalidArgument, f.dataset, ": ",
                  entries,
                  " entries in the training graph, past the 32-bit indices of this "
                  "build of PT-Scotch; use partition_distributed64");
  });
  std::vector<Num> part;
  agreed(w, [&] { part = run_ptscotch(w, g, f); });
  repair(part, s, f.parts);
  const PartCounts counts = part_counts(part, s, f.parts);
  PlanFile file;
  file.plan.num_parts = f.parts;
  file.plan.owner = gather_owners(w, part, s.num_nodes);
  file.edge_cut = edge_cut(g, file.plan.owner, s.row_begin);
  const double seconds = watch.seconds();
  agreed(w, [&] {
    if (w.rank != 0) return;
    file.method = "ptscotch";
    file.dataset = s.name;
    file.dataset_fingerprint = s.fingerprint;
    write_plan_file(f.out, file);
  });
  double peak = peak_mib();
  MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (w.rank == 0 && !f.quiet)
    print_summary(f, s, counts, f.parts, file.edge_cut, entries, seconds, peak);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // PT-Scotch runs threads of its own that call MPI.
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  CLI::App app{
      "partition_distributed: partition a Tessera HDF5 dataset across MPI ranks with "
      "PT-Scotch into a plan file for train_gcn --partition-file (start it with "
      "mpiexec.openmpi)"};
  app.set_version_flag("--version", std::string(kProgram) + ", " + build_text());
  Flags f;
  app.add_option("--dataset", f.dataset, "Tessera HDF5 dataset (tessera_data convert makes one)")
      ->required();
  app.add_option("--out", f.out, "the plan file to write (must not exist)")->required();
  app.add_option("--parts", f.parts, "number of parts (default: one per rank)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--imbalance", f.imbalance,
                 "allowed imbalance of nodes and of training nodes per part")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  std::vector<std::string> strategy_names;
  for (const auto& [name, flag] : strategies()) strategy_names.push_back(name);
  app.add_option("--strategy", f.strategy, "PT-Scotch's strategy (SCOTCH_STRAT*)")
      ->check(CLI::IsMember(strategy_names))
      ->capture_default_str();
  app.add_option("--seed", f.seed, "PT-Scotch's random seed")->capture_default_str();
  app.add_flag("--quiet", f.quiet, "print nothing but errors");
  int status = 1;
  try {
    app.parse(argc, argv);
    status = run(w, f);
  } catch (const CLI::ParseError& e) {
    status = tessera_apps::report_parse_error(app, e, kProgram, w.rank == 0);
  } catch (const AgreedFailure& e) {
    if (w.rank == 0) {
      std::fprintf(stderr, "%s: error%s: %s\n", kProgram,
                   e.rank == 0 ? "" : (" on rank " + std::to_string(e.rank)).c_str(),
                   e.message.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error on rank %d: %s\n", kProgram, w.rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
