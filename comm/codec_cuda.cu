// SPDX-License-Identifier: Apache-2.0
// CUDA message codecs (comm/codec_cuda.h). The f32 copy and the bf16 / fp16 conversions run one
// thread per value (the integer-only conversions of comm/half_float.cc, ported line for line);
// the integer codecs run one block per row: a block reduction gives the row's min, max and
// finiteness, then one thread per 4 features (one Philox block, core/cuda/philox.h) owns
// every byte of those features, so no two threads share a packed 4- or 2-bit byte. To give the
// CPU's bytes, every float operation is an explicit round-to-nearest intrinsic (and the object
// is built with -fmad=false): nothing is fused unless the CPU build fused it too.
#include <cfloat>

#include "comm/codec_cuda.h"
#include "core/half_float_bits.h"
#include "core/cuda/allocator.h"
#include "core/cuda/common.cuh"
#include "core/cuda/philox.h"

namespace tessera::cuda {
namespace {

using detail::blocks_for;
using detail::kMaxBlocks;
using detail::kThreads;

constexpr std::size_t kScaleBytes = 8;  // offset f32 + scale f32 in front of an integer row

// ---- little-endian bytes at any alignment ----------------------------------------------------

__device__ __forceinline__ void store_u16(std::uint8_t* dst, std::uint32_t v) {
  dst[0] = static_cast<std::uint8_t>(v);
  dst[1] = static_cast<std::uint8_t>(v >> 8);
}
__device__ __forceinline__ void store_u32(std::uint8_t* dst, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
__device__ __forceinline__ std::uint32_t load_u16(const std::uint8_t* src) {
  return std::uint32_t{src[0]} | std::uint32_t{src[1]} << 8;
}
__device__ __forceinline__ std::uint32_t load_u32(const std::uint8_t* src) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{src[i]} << (8 * i);
  return v;
}

// ---- half floats: the host's conversions (core/half_float_bits.h), compiled for the GPU ----

using ::tessera::detail::half_bits::bf16_to_f32;
using ::tessera::detail::half_bits::f16_to_f32;
using ::tessera::detail::half_bits::f32_to_bf16;
using ::tessera::detail::half_bits::f32_to_f16;

// ---- float codecs ----------------------------------------------------------------------------

// One thread per value: value k of encoded row i is x[src_rows[i], k] as f32, bf16 or fp16.
template <CodecKind kKind>
__global__ void encode_float_kernel(std::uint8_t* out, const float* x, const NodeId* src_rows,
                                    std::int64_t r, std::int64_t f) {
  const std::int64_t total = r * f;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float v = x[std::int64_t{src_rows[i / f]} * f + i % f];
    if constexpr (kKind == CodecKind::None) {
      store_u32(out + 4 * i, __float_as_uint(v));
    } else if constexpr (kKind == CodecKind::Bf16) {
      store_u16(out + 2 * i, f32_to_bf16(v));
    } else {
      store_u16(out + 2 * i, f32_to_f16(v));
    }
  }
}

template <CodecKind kKind>
__global__ void decode_float_kernel(float* out, const std::uint8_t* in, std::int64_t total) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    if constexpr (kKind == CodecKind::None) {
      out[i] = __uint_as_float(load_u32(in + 4 * i));
    } else if constexpr (kKind == CodecKind::Bf16) {
      out[i] = bf16_to_f32(static_cast<std::uint16_t>(load_u16(in + 2 * i)));
    } else {
      out[i] = f16_to_f32(static_cast<std::uint16_t>(load_u16(in + 2 * i)));
    }
  }
}

// ---- row statistics --------------------------------------------------------------------------

// Which of several equal extremes (+0 and -0 compare equal but are different bytes) the CPU's
// row_stats keeps: the first in feature order; in AVX2 builds each of 8 lanes keeps its first
// over features [0, lanes_end), the lanes are merged in lane order, and the tail features only
// replace a strictly better value. A smaller key is kept.
__device__ __forceinline__ std::int64_t tie_key(std::int64_t k, std::int64_t lanes_end) {
  return k < lanes_end ? ((k & 7) << 40) | k : (std::int64_t{8} << 40) | k;
}

struct Extreme {
  float value;
  std::int64_t key;
};

// NaN values are never taken (every comparison with them is false), as on the CPU.
__device__ __forceinline__ void keep_lower(Extreme& e, float v, std::int64_t key) {
  if (v < e.value || (v == e.value && key < e.key)) e = {v, key};
}
__device__ __forceinline__ void keep_higher(Extreme& e, float v, std::int64_t key) {
  if (v > e.value || (v == e.value && key < e.key)) e = {v, key};
}

struct RowStats {
  float lo;
  float hi;
  bool finite;  // no NaN or Inf
  bool nan;     // some NaN
};

// Min, max, finiteness and NaN of a row of f values; called by every thread of the block (a
// multiple of 32 threads), which all get the result. f = 0 gives lo = hi = 0, as on the CPU.
__device__ RowStats block_row_stats(const float* row, std::int64_t f, std::int64_t lanes_end) {
  __shared__ Extreme lows[32], highs[32];
  constexpr std::int64_t kNoKey = 0x7FFFFFFFFFFFFFFF;
  Extreme lo{__uint_as_float(0x7F800000u), kNoKey}, hi{__uint_as_float(0xFF800000u), kNoKey};
  bool finite = true, nan = false;
  for (std::int64_t k = threadIdx.x; k < f; k += blockDim.x) {
    const float v = row[k];
    const std::int64_t key = tie_key(k, lanes_end);
    keep_lower(lo, v, key);
    keep_higher(hi, v, key);
    finite = finite && fabsf(v) <= FLT_MAX;
    nan = nan || v != v;
  }
  for (int offset = 16; offset > 0; offset /= 2) {  // (value, key) order: any merge order works
    const float lo_v = __shfl_down_sync(0xFFFFFFFFu, lo.value, offset);
    const long long lo_k = __shfl_down_sync(0xFFFFFFFFu, static_cast<long long>(lo.key), offset);
    const float hi_v = __shfl_down_sync(0xFFFFFFFFu, hi.value, offset);
    const long long hi_k = __shfl_down_sync(0xFFFFFFFFu, static_cast<long long>(hi.key), offset);
    keep_lower(lo, lo_v, lo_k);
    keep_higher(hi, hi_v, hi_k);
  }
  const unsigned warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (threadIdx.x % 32 == 0) {
    lows[warp] = lo;
    highs[warp] = hi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < warps; ++w) {
      keep_lower(lo, lows[w].value, lows[w].key);
      keep_higher(hi, highs[w].value, highs[w].key);
    }
    lows[0] = lo;
    highs[0] = hi;
  }
  __syncthreads();
  RowStats s{lows[0].value, highs[0].value, true, false};
  s.finite = __syncthreads_and(finite) != 0;  // also keeps lows[0] until everyone read it
  s.nan = __syncthreads_or(nan) != 0;
  if (f == 0) s.lo = s.hi = 0.0f;
  return s;
}

// ranges[i] = max - min of row src_rows[i] (NaN when it holds a NaN): the float codecs' ranges.
__global__ void row_range_kernel(float* ranges, const float* x, const NodeId* src_rows,
                                 std::int64_t r, std::int64_t f, std::int64_t lanes_end) {
  for (std::int64_t i = blockIdx.x; i < r; i += gridDim.x) {
    const RowStats s = block_row_stats(x + std::int64_t{src_rows[i]} * f, f, lanes_end);
    if (threadIdx.x == 0) ranges[i] = s.nan ? __uint_as_float(0x7FC00000u) : __fsub_rn(s.hi, s.lo);
  }
}

// ---- integer codecs --------------------------------------------------------------------------

// codec.cc's stochastic_level: floor(t + u) clamped to [0, L] for t >= 0, u = (word >> 8) 2^-24.
template <int Bits>
__device__ __forceinline__ std::uint32_t stochastic_level(float t, std::uint32_t word) {
  constexpr std::int32_t kLevels = (1 << Bits) - 1;
  constexpr float kMaxLevel = static_cast<float>(kLevels);
  t = t < kMaxLevel ? t : kMaxLevel;
  const std::int32_t whole = __float2int_rz(t);
  const float frac = __fsub_rn(t, __int2float_rn(whole));
  const std::int32_t frac24 = __float2int_rz(__fmul_rn(frac, 16777216.0f));
  const std::int32_t up = (static_cast<std::int32_t>(word >> 8) + frac24) >> 24;
  const std::int32_t level = whole + up;
  return static_cast<std::uint32_t>(level < kLevels ? level : kLevels);
}

// One block per row (grid-stride over rows): codec.cc's encode_int_row. A row that is not
// finite is left unwritten and lowers *first_refused to its index.
template <int Bits>
__global__ void encode_int_kernel(std::uint8_t* out, float* ranges,
                                  unsigned long long* first_refused, const float* x,
                                  const NodeId* src_rows, const GlobalId* row_ids, std::int64_t r,
                                  std::int64_t f, std::size_t row_bytes, std::uint64_t key,
                                  std::int64_t lanes_end) {
  constexpr int kLevels = (1 << Bits) - 1;
  for (std::int64_t i = blockIdx.x; i < r; i += gridDim.x) {
    const float* row = x + std::int64_t{src_rows[i]} * f;
    const RowStats s = block_row_stats(row, f, lanes_end);
    if (!s.finite) {
      if (threadIdx.x == 0) atomicMin(first_refused, static_cast<unsigned long long>(i));
      continue;
    }
    // In double, as on the CPU: a range above FLT_MAX still gives a finite scale; one so small
    // that range / L underflows gets the smallest subnormal.
    float scale = __double2float_rn(__ddiv_rn(__dsub_rn(static_cast<double>(s.hi),
                                                        static_cast<double>(s.lo)),
                                              static_cast<double>(kLevels)));
    if (s.hi > s.lo && scale == 0.0f) scale = __uint_as_float(1u);
    const float offset = s.lo;
    std::uint8_t* dst = out + static_cast<std::size_t>(i) * row_bytes;
    if (threadIdx.x == 0) {
      store_u32(dst, __float_as_uint(offset));
      store_u32(dst + 4, __float_as_uint(scale));
      if (ranges) ranges[i] = __fsub_rn(s.hi, s.lo);
    }
    const float inv_scale = __fdiv_rn(1.0f, scale);
    const bool divide = !isfinite(inv_scale);  // subnormal scale: 1 / scale overflows
    const auto item = static_cast<std::uint64_t>(row_ids[i]);
    std::uint8_t* packed = dst + kScaleBytes;
    const std::int64_t packed_bytes = (f * Bits + 7) / 8;
    for (std::int64_t g = threadIdx.x; 4 * g < f; g += blockDim.x) {
      const std::int64_t k0 = 4 * g;
      std::uint32_t q[4] = {0, 0, 0, 0};  // features past f: zero padding bits
      if (scale != 0.0f) {  // else a constant row: every level 0
        const PhiloxWords words = philox_words(key, item, static_cast<std::uint32_t>(g));
        for (int w = 0; w < 4 && k0 + w < f; ++w) {
          const float d = __fsub_rn(row[k0 + w], offset);
          const float t = divide ? __fdiv_rn(d, scale) : __fmul_rn(d, inv_scale);
          q[w] = stochastic_level<Bits>(t, words.w[w]);
        }
      }
      if constexpr (Bits == 8) {
        for (int w = 0; w < 4 && k0 + w < f; ++w) packed[k0 + w] = static_cast<std::uint8_t>(q[w]);
      } else if constexpr (Bits == 4) {  // element 0 in the low bits, as pack_chunk
        packed[2 * g] = static_cast<std::uint8_t>(q[0] | q[1] << 4);
        if (2 * g + 1 < packed_bytes) {
          packed[2 * g + 1] = static_cast<std::uint8_t>(q[2] | q[3] << 4);
        }
      } else {
        packed[g] = static_cast<std::uint8_t>(q[0] | q[1] << 2 | q[2] << 4 | q[3] << 6);
      }
    }
  }
}

// One thread per value: codec.cc's decode_int_row, offset + level * scale rounded once when the
// CPU build fused it, else twice.
template <int Bits>
__global__ void decode_int_kernel(float* out, const std::uint8_t* in, std::int64_t total,
                                  std::int64_t f, std::size_t row_bytes, bool fused) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t k = i % f;
    const std::uint8_t* src = in + static_cast<std::size_t>(i / f) * row_bytes;
    const float offset = __uint_as_float(load_u32(src));
    const float scale = __uint_as_float(load_u32(src + 4));
    const std::uint32_t byte = src[kScaleBytes + k * Bits / 8];
    const float level = __uint2float_rn((byte >> (k * Bits % 8)) & ((1u << Bits) - 1u));
    out[i] = fused ? __fmaf_rn(level, scale, offset) : __fadd_rn(offset, __fmul_rn(level, scale));
  }
}

// encoded_row_bytes of an integer codec: offset, scale, then f values of `bits` bits.
std::size_t int_row_bytes(int bits, std::int64_t f) {
  return kScaleBytes + static_cast<std::size_t>((f * bits + 7) / 8);
}

// Threads per row block: one per 4 features, whole warps, at most kThreads.
unsigned row_threads(std::int64_t f) {
  const std::int64_t groups = (f + 3) / 4;
  return static_cast<unsigned>(std::clamp<std::int64_t>((groups + 31) / 32 * 32, 32, kThreads));
}

template <CodecKind kKind>
void launch_encode_float(std::uint8_t* out, const float* x, const NodeId* src_rows,
                         std::int64_t r, std::int64_t f) {
  if (r * f == 0) return;
  encode_float_kernel<kKind><<<blocks_for(r * f), kThreads, 0, compute_stream()>>>(
      out, x, src_rows, r, f);
  TESSERA_CUDA_CHECK_LAUNCH();
}

template <int Bits>
std::int64_t launch_encode_int(std::uint8_t* out, float* ranges, const float* x,
                               const NodeId* src_rows, const GlobalId* row_ids, std::int64_t r,
                               std::int64_t f, std::uint64_t key, std::int64_t lanes_end) {
  const auto none_refused = static_cast<unsigned long long>(r);
  DeviceBuffer first_refused(sizeof(none_refused));
  upload(first_refused.get(), &none_refused, sizeof(none_refused));
  const auto grid = static_cast<unsigned>(std::min(r, kMaxBlocks));
  encode_int_kernel<Bits><<<grid, row_threads(f), 0, compute_stream()>>>(
      out, ranges, first_refused.as<unsigned long long>(), x, src_rows, row_ids, r, f,
      int_row_bytes(Bits, f), key, lanes_end);
  TESSERA_CUDA_CHECK_LAUNCH();
  unsigned long long refused = 0;
  download(&refused, first_refused.get(), sizeof(refused));
  return static_cast<std::int64_t>(refused);
}

template <CodecKind kKind>
void launch_decode_float(float* out, const std::uint8_t* in, std::int64_t total) {
  decode_float_kernel<kKind><<<blocks_for(total), kThreads, 0, compute_stream()>>>(out, in, total);
  TESSERA_CUDA_CHECK_LAUNCH();
}

template <int Bits>
void launch_decode_int(float* out, const std::uint8_t* in, std::int64_t total, std::int64_t f,
                       bool fused) {
  decode_int_kernel<Bits><<<blocks_for(total), kThreads, 0, compute_stream()>>>(
      out, in, total, f, int_row_bytes(Bits, f), fused);
  TESSERA_CUDA_CHECK_LAUNCH();
}

// The entry points of GpuCodec: the byte pointers as the kernels take them; the float codecs
// add the row ranges after encoding.
template <CodecKind kKind>
std::int64_t encode_float_rows(std::byte* out, float* ranges, const float* x,
                               const NodeId* src_rows, const GlobalId*, std::int64_t r,
                               std::int64_t f, std::uint64_t, bool lanes8) {
  if (r == 0) return 0;
  launch_encode_float<kKind>(reinterpret_cast<std::uint8_t*>(out), x, src_rows, r, f);
  if (ranges) {
    const auto grid = static_cast<unsigned>(std::min(r, kMaxBlocks));
    row_range_kernel<<<grid, row_threads(f), 0, compute_stream()>>>(ranges, x, src_rows, r, f,
                                                                     lanes8 ? f - f % 8 : 0);
    TESSERA_CUDA_CHECK_LAUNCH();
  }
  return r;
}

template <int Bits>
std::int64_t encode_int_rows(std::byte* out, float* ranges, const float* x,
                             const NodeId* src_rows, const GlobalId* row_ids, std::int64_t r,
                             std::int64_t f, std::uint64_t key, bool lanes8) {
  if (r == 0) return 0;
  return launch_encode_int<Bits>(reinterpret_cast<std::uint8_t*>(out), ranges, x, src_rows,
                                 row_ids, r, f, key, lanes8 ? f - f % 8 : 0);
}

template <CodecKind kKind>
void decode_float_rows(float* out, const std::byte* in, std::int64_t num_rows, std::int64_t f,
                       bool) {
  if (num_rows * f == 0) return;
  launch_decode_float<kKind>(out, reinterpret_cast<const std::uint8_t*>(in), num_rows * f);
}

template <int Bits>
void decode_int_rows(float* out, const std::byte* in, std::int64_t num_rows, std::int64_t f,
                     bool fused_decode) {
  if (num_rows * f == 0) return;
  launch_decode_int<Bits>(out, reinterpret_cast<const std::uint8_t*>(in), num_rows * f, f,
                          fused_decode);
}

}  // namespace

const GpuCodec kGpuNone = {encode_float_rows<CodecKind::None>, decode_float_rows<CodecKind::None>};
const GpuCodec kGpuBf16 = {encode_float_rows<CodecKind::Bf16>, decode_float_rows<CodecKind::Bf16>};
const GpuCodec kGpuFp16 = {encode_float_rows<CodecKind::Fp16>, decode_float_rows<CodecKind::Fp16>};
const GpuCodec kGpuInt8 = {encode_int_rows<8>, decode_int_rows<8>};
const GpuCodec kGpuInt4 = {encode_int_rows<4>, decode_int_rows<4>};
const GpuCodec kGpuInt2 = {encode_int_rows<2>, decode_int_rows<2>};

}  // namespace tessera::cuda
