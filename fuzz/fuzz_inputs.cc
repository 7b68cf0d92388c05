// SPDX-License-Identifier: Apache-2.0
// The fuzzed readers (fuzz_inputs.h): each input turned into what the reader takes.
#include "fuzz/fuzz_inputs.h"

#include <array>
#include <cstddef>
#include <fstream>
#include <string>

#include <unistd.h>

#include "comm/codec.h"
#include "core/tensor.h"
#include "datasets/gzip_stream.h"
#include "datasets/loaders.h"
#include "engine/checkpoint.h"
#include "partition/partition_store.h"

namespace tessera::fuzz {
namespace {

namespace fs = std::filesystem;

std::span<const std::byte> bytes_of(Input input) { return std::as_bytes(input); }

void write_bytes(const fs::path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

bool plain_name(std::string_view part) {
  if (part.empty() || part.size() > 32 || part == "." || part == "..") return false;
  for (char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// meta.json, raw/FILE or split/NAME/FILE: nothing outside the dataset folder.
bool allowed_path(std::string_view name) {
  if (name == "meta.json") return true;
  std::string_view rest;
  if (name.starts_with("raw/")) {
    rest = name.substr(4);
  } else if (name.starts_with("split/")) {
    rest = name.substr(6);
    const std::size_t slash = rest.find('/');
    if (slash == std::string_view::npos || !plain_name(rest.substr(0, slash))) return false;
    rest = rest.substr(slash + 1);
  } else {
    return false;
  }
  return plain_name(rest);
}

void write_dataset_file(const fs::path& dir, std::string_view name, std::string_view contents) {
  const fs::path path = dir / std::string(name);
  fs::create_directories(path.parent_path());
  if (name.ends_with(".csv")) {
    GzipWriter out(path.string() + ".gz", 1);
    out.write(contents);
    out.close();
  } else {
    write_bytes(path, contents);
  }
}

}  // namespace

const fs::path& scratch_dir() {
  // Made on first use, removed when the process exits normally.
  struct Scratch {
    fs::path dir;
    Scratch() {
      const char* tmp = std::getenv("TMPDIR");
      const fs::path base = tmp && *tmp ? tmp : "/tmp";
      dir = base / ("tessera-fuzz-" + std::to_string(getpid()));
      fs::remove_all(dir);
      fs::create_directories(dir);
    }
    ~Scratch() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  };
  static const Scratch scratch;
  return scratch.dir;
}

void read_raw_dataset(Input input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  const fs::path dir = scratch_dir() / "fuzzset";
  fs::remove_all(dir);
  fs::create_directories(dir);
  constexpr std::string_view kMarker = "=== ";
  std::size_t at = text.starts_with(kMarker) ? 0 : text.find("\n=== ");
  while (at != std::string_view::npos) {
    if (text[at] == '\n') ++at;
    const std::size_t name_end = text.find('\n', at);
    if (name_end == std::string_view::npos) break;
    const std::string_view name = text.substr(at + kMarker.size(), name_end - at - kMarker.size());
    const std::size_t next = text.find("\n=== ", name_end);
    const std::size_t end = next == std::string_view::npos ? text.size() : next + 1;
    if (allowed_path(name)) {
      write_dataset_file(dir, name, text.substr(name_end + 1, end - name_end - 1));
    }
    at = next;
  }
  read_ogb_raw(dir);
}

void read_hdf5_dataset(Input input) { read_hdf5_image(bytes_of(input), "fuzz.h5"); }

void read_part_store(Input input) {
  if (!input.empty() && input[0] == '{') {
    const fs::path store = scratch_dir() / "store";
    fs::create_directories(store);
    write_bytes(store / "meta.json",
                std::string_view(reinterpret_cast<const char*>(input.data()), input.size()));
    read_store_meta(store);
  } else {
    part_from_image(bytes_of(input), "part-00000.h5");
  }
}

void read_checkpoint(Input input) {
  const CheckpointState state = checkpoint_from_image(bytes_of(input), "checkpoint.h5");
  identity_difference(state.identity, CheckpointIdentity{});
}

void read_message(Input input) {
  if (input.size() < 4) return;
  const auto codecs = codec_table();
  const CodecKind expected = codecs[input[0] % codecs.size()].kind;
  const std::int64_t rows = input[1] % 33;
  const std::int64_t cols = (input[2] | (input[3] << 8)) % 513;
  const auto message = bytes_of(input.subspan(4));
  const CodecKind kind =
      read_message_header(message, rows, cols, expected, "halo forward from rank 1");
  Tensor out(rows, cols);
  decode_rows(kind, out, 0, rows, message.subspan(kMessageHeaderBytes));
}

std::span<const Target> targets() {
  static constexpr std::array<Target, 5> kTargets = {{{"raw_dataset", read_raw_dataset},
                                                      {"hdf5_dataset", read_hdf5_dataset},
                                                      {"part_store", read_part_store},
                                                      {"checkpoint", read_checkpoint},
                                                      {"message", read_message}}};
  return kTargets;
}

}  // namespace tessera::fuzz
