// SPDX-License-Identifier: Apache-2.0
// load_dataset: the one place that turns a --dataset string into a Dataset — "synth:PRESET[:SEED]"
// (synthetic.h), a path ending in .h5 (read_hdf5) or a directory in the OGB raw layout
// (read_ogb_raw). Anything else is an InvalidArgument that lists the accepted forms.
#include "datasets/loaders.h"

#include <charconv>
#include <filesystem>

#include "datasets/synthetic.h"
#include "core/error.h"

namespace tessera {
namespace {

constexpr const char* kAcceptedForms =
    "expected synth:PRESET or synth:PRESET:SEED, a Tessera HDF5 file ending in .h5, or a "
    "directory in the OGB raw layout";

Dataset load_synthetic(const std::string& spec) {
  std::string_view rest = std::string_view(spec).substr(6);  // after "synth:"
  std::string_view preset = rest.substr(0, rest.find(':'));
  TESSERA_CHECK(!preset.empty(), InvalidArgument, "dataset '", spec, "': no preset name; ",
                kAcceptedForms);
  SyntheticConfig config = synthetic_preset(std::string(preset));
  if (preset.size() < rest.size()) {
    std::string_view seed_text = rest.substr(preset.size() + 1);
    std::uint64_t seed = 0;
    auto [end, ec] = std::from_chars(seed_text.data(), seed_text.data() + seed_text.size(), seed);
    TESSERA_CHECK(!seed_text.empty() && ec == std::errc{} &&
                      end == seed_text.data() + seed_text.size(),
                  InvalidArgument, "dataset '", spec, "': seed '", seed_text,
                  "' is not a non-negative integer; ", kAcceptedForms);
    config.seed = seed;
  }
  return generate_synthetic(config);
}

}  // namespace

bool is_hdf5_spec(std::string_view spec) { return spec.ends_with(".h5"); }

Dataset load_dataset(const std::string& spec, const LoadOptions& options) {
  namespace fs = std::filesystem;
  if (spec.rfind("synth:", 0) == 0) return load_synthetic(spec);
  if (is_hdf5_spec(spec)) return read_hdf5(spec, options);
  std::error_code ec;
  if (fs::is_directory(spec, ec)) return read_ogb_raw(spec, options);
  TESSERA_FAIL(InvalidArgument, "dataset '", spec, "': ",
               fs::exists(spec, ec) ? "not a directory and not a .h5 file"
                                    : "no such file or directory",
               "; ", kAcceptedForms);
}

}  // namespace tessera
