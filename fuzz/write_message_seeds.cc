// SPDX-License-Identifier: Apache-2.0
// Seeds for fuzz_message: real halo messages, the first rows of a dataset's features encoded
// with every codec, each behind the four bytes that tell fuzz_message what to expect.
// Usage: write_message_seeds DATASET OUT_DIR
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "comm/codec.h"
#include "datasets/loaders.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DATASET OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const tessera::Dataset dataset = tessera::load_dataset(argv[1]);
    const tessera::Tensor& x = dataset.features;
    const std::int64_t rows = std::min<std::int64_t>(8, x.rows());
    std::vector<tessera::NodeId> src(static_cast<std::size_t>(rows));
    std::iota(src.begin(), src.end(), 0);
    const std::vector<tessera::GlobalId> ids(src.begin(), src.end());
    const auto codecs = tessera::codec_table();
    for (std::size_t c = 0; c < codecs.size(); ++c) {
      const tessera::CodecKind kind = codecs[c].kind;
      const std::size_t payload =
          static_cast<std::size_t>(rows) * tessera::encoded_row_bytes(kind, x.cols());
      std::vector<std::byte> message(tessera::kMessageHeaderBytes + payload);
      tessera::write_message_header(message, kind, rows, x.cols());
      tessera::encode_rows(kind, std::span(message).subspan(tessera::kMessageHeaderBytes), x, src,
                           ids, tessera::CodecNoise{});
      const unsigned char selector[4] = {
          static_cast<unsigned char>(c), static_cast<unsigned char>(rows),
          static_cast<unsigned char>(x.cols() & 0xff), static_cast<unsigned char>(x.cols() >> 8)};
      const std::string path =
          std::string(argv[2]) + "/" + std::string(codecs[c].name) + "-message";
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(selector), 4);
      out.write(reinterpret_cast<const char*>(message.data()),
                static_cast<std::streamsize>(message.size()));
      if (!out) {
        std::fprintf(stderr, "%s: cannot write\n", path.c_str());
        return 1;
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "write_message_seeds: %s\n", error.what());
    return 1;
  }
  return 0;
}
