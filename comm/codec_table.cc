// SPDX-License-Identifier: Apache-2.0
// The message codecs, one row each: wire id, name, bits per value, whether it rounds
// stochastically (and so carries a per-row offset and scale), its row functions
// (comm/codec_rows.h) and its CUDA twin (comm/codec_cuda.h; builds with the CUDA backend).
// Adding a codec: its row functions in a file of their own (and a twin in codec_cuda.cu), its
// id in CodecKind (comm/codec.h), and a row here; --codec, the summaries, the traffic model and
// the tests that walk the table pick it up from here. Compiled once per instruction-set level
// (core/cpu/cpu_level.h), each with that level's row functions; codec_table() gives the table of
// the level the CPU kernels use (core/cpu/dispatch.h).
#include "comm/codec.h"
#include "comm/codec_rows.h"
#if TESSERA_CPU_LEVEL == 0
#include "core/cpu/dispatch.h"
#endif

#ifdef TESSERA_HAVE_CUDA_CODECS
#include "comm/codec_cuda.h"
#define TESSERA_GPU_TWIN(name) (&cuda::name)
#else
#define TESSERA_GPU_TWIN(name) nullptr
#endif

namespace tessera::detail::TESSERA_CPU_NS {
namespace {

constexpr CodecSpec kCodecs[] = {
    {CodecKind::None, "none", 32, false, raw_encode, raw_decode, TESSERA_GPU_TWIN(kGpuNone)},
    {CodecKind::Bf16, "bf16", 16, false, bf16_encode, bf16_decode, TESSERA_GPU_TWIN(kGpuBf16)},
    {CodecKind::Fp16, "fp16", 16, false, fp16_encode, fp16_decode, TESSERA_GPU_TWIN(kGpuFp16)},
    {CodecKind::Int8, "int8", 8, true, int_encode<8>, int_decode<8>, TESSERA_GPU_TWIN(kGpuInt8)},
    {CodecKind::Int4, "int4", 4, true, int_encode<4>, int_decode<4>, TESSERA_GPU_TWIN(kGpuInt4)},
    {CodecKind::Int2, "int2", 2, true, int_encode<2>, int_decode<2>, TESSERA_GPU_TWIN(kGpuInt2)},
};

// The wire id is the index: a header's codec byte finds its row directly.
constexpr bool ids_are_indices() {
  for (std::size_t i = 0; i < std::size(kCodecs); ++i)
    if (static_cast<std::size_t>(kCodecs[i].kind) != i) return false;
  return true;
}
static_assert(ids_are_indices(), "kCodecs must list the codecs in wire-id order from 0");

}  // namespace

std::span<const CodecSpec> level_codec_table() { return kCodecs; }

}  // namespace tessera::detail::TESSERA_CPU_NS

#if TESSERA_CPU_LEVEL == 0
namespace tessera {
#ifdef TESSERA_CPU_DISPATCH
namespace detail::avx {
std::span<const CodecSpec> level_codec_table();
}
namespace detail::avx2 {
std::span<const CodecSpec> level_codec_table();
}
namespace detail::avx512 {
std::span<const CodecSpec> level_codec_table();
}
#endif

std::span<const CodecSpec> codec_table() {
  switch (cpu::cpu_level()) {
#ifdef TESSERA_CPU_DISPATCH
    case cpu::CpuLevel::Avx: return detail::avx::level_codec_table();
    case cpu::CpuLevel::Avx2: return detail::avx2::level_codec_table();
    case cpu::CpuLevel::Avx512: return detail::avx512::level_codec_table();
#endif
    default: return detail::baseline::level_codec_table();
  }
}

}  // namespace tessera
#endif
