// SPDX-License-Identifier: Apache-2.0
// Chunks of one graph part for pipelined training (engine/pipeline.h): the owned rows cut into
// C chunks (METIS on the owned subgraph) and renumbered so that every chunk is a contiguous
// block of positions; the part's operator in that order, cut into per-chunk row blocks; and the
// historical buffers through which a chunk's aggregation sees the other chunks' rows.
// Relies on the CSR kernels and the METIS partitioner.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/csr.h"
#include "core/tensor.h"
#include "layers/propagator.h"

namespace tessera {

struct ChunkLayout {
  std::vector<std::int64_t> offsets{0};  // (C + 1) chunk c holds positions [offsets[c], offsets[c+1])
  std::vector<NodeId> order;             // (N) the owned row (local id) at each position
  std::vector<NodeId> position;          // (N) the position of each owned row
  int num_chunks() const { return static_cast<int>(offsets.size()) - 1; }
  std::int64_t begin(int c) const { return offsets[static_cast<std::size_t>(c)]; }
  std::int64_t size(int c) const {
    return offsets[static_cast<std::size_t>(c) + 1] - offsets[static_cast<std::size_t>(c)];
  }
};

// Cuts the N owned rows of `adjacency` (N, N + H; only the owned columns are looked at) into
// `chunks` chunks with METIS k-way (balancing nodes and training rows), or in id order for one
// chunk. Inside a chunk, rows keep their increasing local order. InvalidArgument when
// chunks > N (a chunk would be empty).
ChunkLayout make_chunks(const Csr& adjacency, std::span<const NodeId> train_rows, int chunks,
                        std::uint64_t seed);

// The operator A (N, N + H) of a part with its owned rows and columns in chunk order (halo
// columns unchanged), and its row blocks per chunk.
class ChunkedOperator {
 public:
  // `a` in local ids; owned_symmetry: whether A's owned block equals its transpose (GCN weights
  // on a symmetric graph), so that backward reuses it.
  ChunkedOperator(const Csr& a, MatrixSymmetry owned_symmetry, const ChunkLayout& layout);

  const Csr& whole() const { return whole_; }  // (N, N + H) in chunk order
  // Chunk c's rows of the owned block (n_c, N), of the owned block's transpose (n_c, N; the
  // same matrix when symmetric) and of the halo block (n_c, H).
  const Csr& owned(int c) const { return owned_[static_cast<std::size_t>(c)]; }
  const Csr& owned_t(int c) const {
    return symmetric_ ? owned(c) : owned_t_[static_cast<std::size_t>(c)];
  }
  const Csr& halo(int c) const { return halo_[static_cast<std::size_t>(c)]; }
  // (H, N) the halo block of all rows, transposed: what each halo row receives from this part's
  // rows in backward (A_halo^T G), for its owner.
  const Csr& halo_t() const { return halo_t_; }
  // Copies the blocks to `device` once (a GPU stage aggregates there); nothing on the CPU.
  void upload(Device device);
  std::int64_t num_owned() const { return whole_.num_rows(); }
  std::int64_t num_halo() const { return whole_.num_cols() - whole_.num_rows(); }

 private:
  Csr whole_;
  bool symmetric_ = false;
  std::vector<Csr> owned_, owned_t_, halo_;
  Csr halo_t_;
};

// The historical buffers of one stage, per layer l it runs (global layer index), all in chunk
// order and as wide as what layer l aggregates (its input, or its input times W):
//   inputs (N, F)        every owned row's aggregated input: this epoch's for chunks already
//                        forwarded, the previous epoch's for the others
//   halo_inputs (H, F)   halo rows from the other parts (hybrid), refreshed after each epoch
//   grads (N, F)         every owned row's gradient of the aggregation output, fresh or stale
//                        in the same way (backward)
//   remote_grads (N, F)  what the other parts' rows send back to this part's rows (hybrid),
//                        refreshed after each epoch; (0, F) for a part without halo rows (a
//                        pipeline stage's), which receives nothing
// Layers that weight the edges themselves (attention, `pushed`) keep per-edge terms that a row
// gradient cannot rebuild, so their backward pushes each source's contribution instead, and
// grads holds something else:
//   grads (N, F)         what the other chunks pushed to every owned row and the row's chunk
//                        has not taken yet: the chunks before it this epoch, those after it in
//                        the last one (the same fresh/stale rule as above); the chunk's
//                        backward takes its rows and zeroes them
//   halo_grads (H, F)    what this epoch's chunks pushed to the halo rows (hybrid: sent to
//                        their owners at the refresh, then zeroed)
// Buffers start at zero in every run and are sized on first use, on the stage's device.
class History {
 public:
  struct Layer {
    Tensor inputs, halo_inputs, grads, remote_grads, halo_grads;
    bool backward_used = false;  // a backward aggregated gradients (not the first layer when
                                 // it aggregates first: the features get no gradient)
    bool pushed = false;         // gradients pushed per source (set by the engine, kept by clear)
  };
  History(std::int64_t num_owned, std::int64_t num_halo, int first_layer, int num_layers,
          Device device = Device::cpu());
  Layer& layer(int l);  // l in [first_layer, first_layer + num_layers)
  // Sizes the layer's buffers for width f (zero-filled) unless they already have it.
  Layer& sized(int l, std::int64_t f);
  void clear();  // back to zero (a new run)
  bool has(int l) const {
    return l >= first_layer_ && l < first_layer_ + static_cast<int>(layers_.size());
  }

 private:
  std::int64_t num_owned_, num_halo_;
  int first_layer_;
  Device device_;
  std::vector<Layer> layers_;
};

// The aggregation of one chunk's rows during pipelined training. Forward writes the chunk's
// input rows into the layer's history (they are fresh from now on) and aggregates over the
// whole history: fresh rows of chunks done this epoch, stale rows of the rest, halo rows from the
// last refresh. Backward does the same with the gradients (A^T over the gradient history plus
// the stale contributions of the other parts).
//
// Its attention path (HaloAccess) gives an attention layer the chunk's rows with, as their "halo",
// every other chunk's row and every halo row that the chunk's rows read (X columns): forward
// writes the chunk's rows into the history and reads the X rows from it (fresh or stale as
// above), backward pushes the X rows' gradients into the history (grads and halo_grads of a
// pushed layer) and takes what the other chunks pushed to the chunk's rows. The pattern is
// (n_c, n_c + X): the chunk's own columns first, then the X others in chunk order and halo
// order, so that with one chunk it is the part's operator itself.
class ChunkPropagator final : public Propagator, private HaloAccess {
 public:
  // owned_ids (N, chunk order) and halo_ids (H): the global ids of the operator's columns.
  ChunkPropagator(const ChunkedOperator& op, History& history, const ChunkLayout& layout,
                  int chunk, std::span<const GlobalId> owned_ids,
                  std::span<const GlobalId> halo_ids);
  void forward(Tensor& out, const Tensor& x, int layer) override;
  void backward(Tensor& d_x, const Tensor& d_out, int layer) override;
  std::int64_t num_rows() const override { return layout_.size(chunk_); }
  HaloAccess* halo_access() override;

 private:
  const Csr& pattern() const override { return pattern_; }
  std::span<const GlobalId> column_ids() const override { return column_ids_; }
  std::span<const NodeId> inner_rows() const override { return inner_; }
  std::span<const NodeId> boundary_rows() const override { return boundary_; }
  void start_forward(Tensor& rows, int layer) override;
  void finish_forward(Tensor& rows) override;
  void start_backward(Tensor& d_rows, int layer) override;
  void finish_backward(Tensor& d_rows) override;
  void poll() override {}
  History::Layer& pushed_layer(int layer, std::int64_t f);

  const ChunkedOperator& op_;
  History& history_;
  const ChunkLayout& layout_;
  int chunk_;
  std::span<const GlobalId> owned_ids_, halo_ids_;
  Tensor halo_part_;  // (n_c, F) A_halo rows of the chunk times the halo inputs
  // The attention path, built on first use.
  Csr pattern_;                        // (n_c, n_c + X)
  std::vector<std::int64_t> columns_;  // (X) each other column: a position < N, or N + halo row
  std::vector<GlobalId> column_ids_;   // (n_c + X)
  std::vector<NodeId> inner_, boundary_;
  // The X columns split: the owned ones (positions, first in columns_) and the halo rows; the
  // kernels that move their rows read them where the rows live.
  std::vector<NodeId> owned_columns_, halo_columns_;
  DeviceIndexList owned_list_, halo_list_;
  int layer_ = -1;  // of the exchange in progress
};

// Copies rows [first, first + src.rows()) of dst from src (same width and device).
void copy_rows_into(Tensor& dst, std::int64_t first, const Tensor& src);
// dst (R, F) += rows [first, first + R) of src (same device).
void add_rows_from(Tensor& dst, const Tensor& src, std::int64_t first);

}  // namespace tessera
