// SPDX-License-Identifier: Apache-2.0
// CUDA twins of the message codecs' row loops (comm/codec.h), one per row of the codec table:
// encode gathers listed rows of a GPU tensor into GPU bytes, decode fills rows of a GPU tensor
// from GPU bytes, bit-identical to
// the CPU code of the same build (the same Philox noise, the same float operations in the same
// order, the same choice among equal minima). Device pointers, queued on cuda::compute_stream();
// comm/codec.cc validates the arguments and stages host spans. Built only with TESSERA_CUDA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/codec.h"
#include "core/csr.h"

namespace tessera::cuda {

// One codec's GPU row loops (CodecSpec::gpu).
// encode: rows x[src_rows[i]] (x: (*, F), row-major), i in [0, R), into out (R *
// encoded_row_bytes(kind, F) bytes, any alignment); row_ids[i] is row i's noise item under the
// CounterRng key `key`. ranges (R values, or null) receives max - min of each row as on the CPU
// (NaN for a row holding a NaN, float codecs). A row the integer codecs refuse (a NaN or Inf)
// is left unwritten, its range too. `lanes8`: the CPU build takes a row's min and max in 8
// interleaved lanes (int_codecs.cc's AVX2 row_stats), which decides whether +0 or -0 becomes
// the offset of a row whose minimum is zero. Returns the first refused row, or R when none was:
// for the integer codecs that waits for the kernel (one 8-byte download); the float codecs
// return R without waiting.
// decode: num_rows encoded rows of `in` (any alignment) into out (num_rows, F). `fused_decode`:
// the CPU build computes an integer codec's offset + level * scale with one rounding (the
// compiler contracted it into a fused multiply-add) rather than two.
struct GpuCodec {
  std::int64_t (*encode)(std::byte* out, float* ranges, const float* x, const NodeId* src_rows,
                         const GlobalId* row_ids, std::int64_t r, std::int64_t f, std::uint64_t key,
                         bool lanes8);
  void (*decode)(float* out, const std::byte* in, std::int64_t num_rows, std::int64_t f,
                 bool fused_decode);
};

// The twins of the codecs in comm/codec_table.cc.
extern const GpuCodec kGpuNone, kGpuBf16, kGpuFp16, kGpuInt8, kGpuInt4, kGpuInt2;

}  // namespace tessera::cuda
