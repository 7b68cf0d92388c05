// SPDX-License-Identifier: Apache-2.0
// tessera::DistributedGraph: this rank's part of a partitioned graph and its aggregation
// operators, for models written outside Tessera (the Python module's tessera.torch builds on
// it). Every rank of an MPI job makes one over the same communicator and loads the same
// dataset; each then holds its part's rows (features, labels, split) and aggregates them with
// Tessera's halo exchange — halo rows fetched from their owners (encoded with the options'
// codecs), overlapped with the aggregation of the rows that need nothing from other ranks, and
// in backward the halo gradients sent back to their owners. On K ranks the aggregation of every
// row equals the single-process one up to float summation order.
//
// On GPU ranks (options.device "cuda" or "cuda:i") the part's operators, halo buffers and keys
// live on this rank's GPU, the caller's rows are that GPU's memory, and the halo rows move
// between the ranks' GPUs as train_gcn's do (NCCL, or gpu_comm "mpi" staged through host
// memory, so that several ranks may share a GPU).
//
// Errors: as Session (std::invalid_argument for bad arguments and input, std::runtime_error
// otherwise, the same on every rank; a failure of one rank alone inside a collective ends the
// job).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/export.h"
#include "tessera/graph.h"
#include "tessera/options.h"
#include "tessera/session.h"

namespace tessera {

// The aggregations, each over the symmetrised graph (as training does):
//   Gcn   D^-1/2 (A + I) D^-1/2 x (PyG's GCNConv normalisation, global degrees)
//   Mean  the mean of the in-neighbours' rows (0 for a node without neighbours; SAGEConv's)
//   Sum   the sum of the in-neighbours' rows
enum class Aggregation { Gcn, Mean, Sum };
TESSERA_API Aggregation parse_aggregation(const std::string& name);  // "gcn" | "mean" | "sum"

class TESSERA_API DistributedGraph {
 public:
  // Over MPI_COMM_WORLD (MPI initialised if the caller has not) or the caller's communicator
  // (duplicated). From the options: partition and parts (how the graph is cut), partitions (a
  // store to read instead), node_order (how its rows are renumbered), seed, normalize_features,
  // codec, codec_backward and error_feedback (halo messages), num_layers (how many aggregations one
  // forward pass makes: each has its own message keys and error-feedback residuals), device and
  // gpu_comm (where the rows live, as train_gcn's --device and --gpu-comm), comm_timeout,
  // verbosity.
  explicit DistributedGraph(const Options& options = {});
  DistributedGraph(const Options& options, MPI_Comm comm);
  ~DistributedGraph();
  DistributedGraph(DistributedGraph&&) noexcept;
  DistributedGraph& operator=(DistributedGraph&&) noexcept;
  DistributedGraph(const DistributedGraph&) = delete;
  DistributedGraph& operator=(const DistributedGraph&) = delete;

  int rank() const;
  int size() const;
  const Options& options() const;
  // Where the rows of aggregate and dropout live: "cpu", or this rank's GPU, "cuda:i" (with
  // "cuda", the local rank modulo the visible GPUs, as train_gcn binds its ranks).
  std::string device() const;
  // On a GPU: the caller's CUDA stream (a cudaStream_t as an integer; 0, the default, is the
  // legacy default stream). Each later aggregate and dropout starts after the work queued on it
  // before the call, and work queued on it after the call returns runs after the call's results
  // are written, so the caller need not synchronise. Ignored on the CPU.
  void set_stream(std::uintptr_t stream);

  // Collective: the dataset (as Session::load) cut into one part per rank.
  void load(const std::string& spec);
  void load(const GraphView& graph);  // read on rank 0

  // After load. The whole graph's node count, this rank's row count and the dataset's ids of its
  // rows (in the order the rows are held: renumbered for locality unless node_order is "none",
  // when they increase), the feature width, the outputs (classes or tasks) and the metric.
  std::int64_t num_nodes() const;
  std::int64_t num_local() const;
  std::vector<std::int64_t> node_ids() const;
  std::int64_t num_features() const;
  std::int64_t num_outputs() const;
  std::string metric() const;                // "acc" (labels) | "rocauc" (targets)
  Matrix features() const;                   // (num_local, F)
  std::vector<std::int64_t> labels() const;  // (num_local), -1 = none; empty for multi-label
  Matrix targets() const;                    // (num_local, T) multi-label, NaN = missing
  // (num_local) each row's degree in the whole symmetrised graph, self loops not counted (what
  // the Gcn operator adds one to).
  std::vector<float> degrees() const;
  // This rank's rows of a split ("train", "valid" or "test"), as local row indices.
  std::vector<std::int64_t> split_rows(const std::string& split) const;
  // Nodes of a split over all ranks.
  std::int64_t split_size(const std::string& split) const;

  // Collective: out (num_local, f) = A x, x (num_local, f) this rank's rows, both row-major f32
  // memory of device() owned by the caller (not copied). `call` numbers the aggregation within a
  // pass, in [0, options().num_layers): it keys the messages, the codecs' rounding noise (with the
  // epoch) and the error-feedback residuals; every rank must make the same calls in the same
  // order.
  void aggregate(Aggregation op, float* out, const float* x, std::int64_t f, int call);
  // Collective: d_x (num_local, f) = A^T d_out, with the gradients of halo rows sent to their
  // owners and added there.
  void aggregate_backward(Aggregation op, float* d_x, const float* d_out, std::int64_t f, int call);
  // The epoch that keys the codecs' rounding noise and the dropout masks from now on.
  void set_epoch(std::uint64_t epoch);

  // Inverted dropout, out (num_local, f) = keep ? x / (1 - p) : 0, with the mask a pure
  // function of (seed, epoch, key, global node id, column): a node gets the same mask at any
  // number of ranks, as in Tessera's own training, and backward recomputes it (nothing is
  // stored). p in [0, 1); out may alias x. Not collective.
  void dropout(float* out, const float* x, std::int64_t f, float p, std::uint64_t key);
  void dropout_backward(float* d_x, const float* d_out, std::int64_t f, float p, std::uint64_t key);

  // Collective: values summed over ranks, in place (gradients; loss terms); host memory on every
  // device.
  void all_reduce_sum(float* values, std::int64_t n);
  void all_reduce_sum(double* values, std::int64_t n);
  // Bytes this rank sent so far, all categories (after the codecs).
  std::uint64_t bytes_sent() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Host memory for the rows a caller hands to aggregate and dropout: blocks of 4 MiB or more come
// from the cache Tessera's own tensors use (mapped with transparent huge pages requested, and
// kept when freed for the next block of the same size, up to a bound), smaller ones from the C
// library; 64-byte aligned. A caller that allocates a fresh (N, F) result every step (torch does)
// otherwise pays the kernel's page clearing for every one. free_rows takes the `bytes` given to
// allocate_rows.
TESSERA_API void* allocate_rows(std::size_t bytes);
TESSERA_API void free_rows(void* block, std::size_t bytes);
// Gives the freed large blocks that the cache keeps for reuse back to the system (blocks in use
// stay); returns their bytes. The cache holds freed blocks between steps so that the next ones
// cost no page faults; a caller that has finished training calls this to return that memory.
TESSERA_API std::size_t release_cached_rows();

}  // namespace tessera
