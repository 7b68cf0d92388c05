// SPDX-License-Identifier: Apache-2.0
// The readers of untrusted bytes that fuzz/ fuzzes, each taking one fuzzer input: the libFuzzer
// targets (fuzz_<name>.cc, built with -DTESSERA_FUZZ=ON) call them, and so does the regression
// test that replays every input a fuzzer once crashed on (tests/fuzz). A reader refusing the
// input throws tessera::Error; refuse_or_accept treats every other outcome as a finding.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <span>
#include <string_view>
#include <typeinfo>

#include "core/error.h"

namespace tessera::fuzz {

using Input = std::span<const std::uint8_t>;

// OGB raw layout: a dataset folder as text, a line "=== NAME" before each file (NAME: meta.json,
// raw/FILE or split/NAME/FILE, nothing outside the folder); FILE.csv is gzipped on the way to
// disk, so that mutations reach the CSV parsers, FILE.csv.gz written as given (the gzip stream
// itself is fuzzed). Read with read_ogb_raw from a scratch folder.
void read_raw_dataset(Input input);
// Tessera's HDF5 dataset format, as a file image (read_hdf5_image).
void read_hdf5_dataset(Input input);
// The partition store: an input starting with '{' is a store's meta.json (read_store_meta),
// any other a part file image (part_from_image).
void read_part_store(Input input);
// A checkpoint file image (checkpoint_from_image), then the identity comparison of a resume.
void read_checkpoint(Input input);
// A halo message as the receiver sees it. Bytes 0-3 say what the receiver expects (byte 0: the
// codec, an index into codec_table(); byte 1: rows, mod 33; bytes 2-3: width, little-endian, mod
// 513); the rest is the message (16-byte header, encoded rows): read_message_header, decode_rows.
void read_message(Input input);

struct Target {
  std::string_view name;  // fuzz_<name>, and the folder of its seeds and regression inputs
  void (*read)(Input);
};
std::span<const Target> targets();

// Scratch folder of this process (under $TMPDIR, named by the process id), for the readers that
// take files.
const std::filesystem::path& scratch_dir();

// Runs read(input): a tessera::Error other than Internal is a refusal, fine; an Internal error
// or another exception is a finding: printed, then std::abort(), so that libFuzzer keeps it.
inline int refuse_or_accept(void (*read)(Input), Input input) {
  try {
    read(input);
  } catch (const Error& error) {
    if (error.category() == ErrorCategory::Internal) {
      std::fprintf(stderr, "fuzz: internal error on this input: %s\n", error.what());
      std::abort();
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fuzz: %s escaped the reader: %s\n", typeid(error).name(), error.what());
    std::abort();
  }
  return 0;
}

}  // namespace tessera::fuzz
