// SPDX-License-Identifier: Apache-2.0
// tessera_data: dataset tool. `generate` writes a synthetic preset (HDF5 file or OGB raw-layout
// directory), `convert` turns any dataset spec into a Tessera HDF5 file (an OGB folder streamed
// in bounded memory), `info` prints a dataset's counts and fingerprint. Thin wrapper over
// tessera::datasets; errors are printed as "tessera_data: error: ..." with exit status 1.
#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <string>

#include "apps/cli_errors.h"
#include "core/build_info.h"
#include "core/error.h"
#include "datasets/dataset.h"
#include "datasets/loaders.h"
#include "datasets/synthetic.h"

namespace {

using namespace tessera;

const char* kSpecHelp =
    "dataset: OGB raw-layout directory, Tessera .h5 file, or synth:PRESET[:SEED] "
    "(presets: default, arxiv-like, products-like)";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Writes `dataset` as HDF5 when `out` ends in .h5, else as an OGB raw-layout directory.
void write_any(const Dataset& dataset, const std::string& out) {
  if (is_hdf5_spec(out)) {
    write_hdf5(dataset, out);
  } else {
    write_ogb_raw(dataset, out);
  }
}

void print_info(const Dataset& d, std::ostream& os) {
  std::int64_t labelled = 0;
  for (std::int64_t label : d.labels) labelled += label >= 0;
  os << "name         " << d.name << "\n"
     << "nodes        " << d.num_nodes() << "\n"
     << "edges        " << d.graph.nnz() << " directed (" << d.num_edge_lines
     << " edge lines, add_inverse_edge " << (d.add_inverse_edge ? "true" : "false") << ")\n"
     << "features     " << d.num_features() << "\n";
  if (d.task == TaskType::MultiClass) {
    os << "task         multiclass, " << d.num_classes << " classes, " << labelled
       << " labelled nodes, metric " << d.eval_metric << "\n";
  } else {
    os << "task         multilabel, " << d.num_tasks << " tasks, metric " << d.eval_metric << "\n";
  }
  os << "split        train " << d.train_idx.size() << ", valid " << d.valid_idx.size() << ", test "
     << d.test_idx.size() << "\n";
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fingerprint(d)));
  os << "fingerprint  " << hex << "\n";
}

// "BEGIN:END" as two integers, nothing else.
bool parse_range(const std::string& text, std::int64_t& begin, std::int64_t& end) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return false;
  const char* p = text.data();
  const auto first = std::from_chars(p, p + colon, begin);
  const auto second = std::from_chars(p + colon + 1, p + text.size(), end);
  return first.ec == std::errc() && first.ptr == p + colon && second.ec == std::errc() &&
         second.ptr == p + text.size();
}

// info --rows: a slice of an HDF5 file's rows, read without the rest (what one rank reads).
void print_slice(const DatasetSlice& s, std::ostream& os) {
  std::int64_t labelled = 0;
  for (std::int64_t label : s.labels) labelled += label >= 0;
  os << "name         " << s.name << "\n"
     << "rows         " << s.row_begin << ".." << s.row_end << " of " << s.num_nodes << " nodes\n"
     << "entries      " << s.rows.nnz() << " (columns of the whole graph)\n"
     << "features     " << s.features.cols() << "\n"
     << "labelled     " << labelled << "\n"
     << "split        train " << s.train_idx.size() << ", valid " << s.valid_idx.size()
     << ", test " << s.test_idx.size() << " (in these rows)\n";
}

struct Flags {
  std::string preset;
  std::uint64_t seed = 0;
  std::string out;
  std::string dataset;
  bool progress = false;
  std::int64_t memory_mib = 1024;
  std::string rows;
};

int run(int argc, char** argv) {
  CLI::App app{"tessera_data: generate, convert and inspect Tessera datasets"};
  app.set_version_flag("--version", "tessera_data, " + tessera::build_text());
  app.require_subcommand(1);
  Flags f;

  CLI::App* generate = app.add_subcommand("generate", "write a synthetic dataset");
  generate->add_option("--preset", f.preset, "synthetic preset: default, arxiv-like, products-like")
      ->required();
  generate->add_option("--seed", f.seed, "random seed (same seed, same dataset)")
      ->capture_default_str();
  generate
      ->add_option("--out", f.out,
                   "output: a path ending in .h5 is written as a Tessera HDF5 file, anything "
                   "else as an OGB raw-layout directory")
      ->required();

  CLI::App* convert = app.add_subcommand("convert", "convert a dataset to a Tessera HDF5 file");
  convert->add_option("--dataset", f.dataset, kSpecHelp)->required();
  convert->add_option("--out", f.out, "output HDF5 file (must end in .h5)")->required();
  convert->add_flag("--progress", f.progress, "show a progress bar while loading");
  convert
      ->add_option("--memory-mib", f.memory_mib,
                   "an OGB folder (CSV or binary layout) is converted without loading it, its "
                   "buffers within about this many MiB")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{16}, std::int64_t{1} << 30));

  CLI::App* info = app.add_subcommand("info", "print a dataset's counts and fingerprint");
  info->add_option("--dataset", f.dataset, kSpecHelp)->required();
  info->add_flag("--progress", f.progress, "show a progress bar while loading");
  info->add_option("--rows", f.rows,
                   "BEGIN:END: read only these rows of an HDF5 file (its slices of the graph, "
                   "features, labels and splits)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return tessera_apps::report_parse_error(app, error, "tessera_data", true);
  }

  const auto start = std::chrono::steady_clock::now();
  std::cout << std::fixed << std::setprecision(2);
  if (generate->parsed()) {
    SyntheticConfig config = synthetic_preset(f.preset);
    config.seed = f.seed;
    Dataset dataset = generate_synthetic(config);
    const double generate_s = seconds_since(start);
    write_any(dataset, f.out);
    std::cout << "wrote " << f.out << ": " << dataset.num_nodes() << " nodes, "
              << dataset.num_edge_lines << " undirected edges, " << dataset.num_features()
              << " features, " << dataset.num_classes << " classes (generate " << generate_s
              << " s, write " << seconds_since(start) - generate_s << " s)\n";
  } else if (convert->parsed()) {
    TESSERA_CHECK(is_hdf5_spec(f.out), InvalidArgument, "convert: --out must end in .h5, got '",
                  f.out, "'");
    if (std::filesystem::is_directory(f.dataset)) {  // an OGB folder: streamed
      convert_ogb(f.dataset, f.out,
                  ConvertOptions{.memory_bytes = f.memory_mib << 20, .progress = f.progress});
      std::cout << "wrote " << f.out << " (streamed, " << seconds_since(start) << " s)\n";
      return 0;
    }
    Dataset dataset = load_dataset(f.dataset, LoadOptions{.progress = f.progress});
    const double load_s = seconds_since(start);
    write_hdf5(dataset, f.out);
    std::cout << "wrote " << f.out << " (load " << load_s << " s, write "
              << seconds_since(start) - load_s << " s)\n";
  } else if (info->parsed() && !f.rows.empty()) {
    std::int64_t begin = -1, end = -1;
    TESSERA_CHECK(parse_range(f.rows, begin, end), InvalidArgument, "--rows '", f.rows,
                  "': expected BEGIN:END (two integers)");
    TESSERA_CHECK(is_hdf5_spec(f.dataset), InvalidArgument,
                  "--rows reads slices of a Tessera HDF5 file (a path ending in .h5), got "
                  "--dataset '",
                  f.dataset, "'");
    print_slice(read_hdf5_rows(f.dataset, begin, end), std::cout);
  } else if (info->parsed()) {
    Dataset dataset = load_dataset(f.dataset, LoadOptions{.progress = f.progress});
    print_info(dataset, std::cout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const tessera::Error& error) {
    std::cerr << "tessera_data: error: " << error.what() << "\n";
  } catch (const std::exception& error) {
    std::cerr << "tessera_data: error: " << error.what() << "\n";
  }
  return 1;
}
