// SPDX-License-Identifier: Apache-2.0
// Outputs for after training (engine/outputs.h): the gather by node id, probabilities, .npy and
// .csv writers, and model files (HDF5: the identity as a JSON attribute, the weights as arrays).
#include "engine/outputs.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "comm/message_tags.h"
#include "core/error.h"
#include "datasets/hdf5_io.h"
#include "engine/option_table.h"
#include "engine/system.h"

namespace tessera {
namespace {

constexpr const char* kModelKind = "tessera-model";
constexpr std::int64_t kModelFormat = 1;
// The options a model file defines: what builds the same model over the same features.
constexpr const char* kModelFlags[] = {"--model", "--num-layers", "--hidden-channels",
                                       "--batch-norm", "--normalize-features"};

bool ends_with(const std::string& text, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

// The .npy header of a (rows, cols) float32 matrix: magic, version 1.0, the header's length,
// then its dict padded with spaces so that the data starts on a 64-byte boundary.
std::string npy_header(std::int64_t rows, std::int64_t cols) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) +
                     ", " + std::to_string(cols) + "), }";
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string header = "\x93NUMPY";
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

void write_rows(std::ostream& out, const Tensor& m, bool csv) {
  const std::int64_t cols = m.cols();
  if (!csv) {
    out << npy_header(m.rows(), cols);
    out.write(static_cast<const char*>(m.raw()), static_cast<std::streamsize>(m.bytes()));
    return;
  }
  char value[32];
  for (std::int64_t r = 0; r < m.rows(); ++r) {
    const float* row = m.row<float>(r);
    for (std::int64_t c = 0; c < cols; ++c) {
      std::snprintf(value, sizeof value, c == 0 ? "%.9g" : ",%.9g", static_cast<double>(row[c]));
      out << value;
    }
    out << '\n';
  }
}

}  // namespace

Tensor gather_by_id(Communicator& comm, const Tensor* local, std::span<const GlobalId> ids,
                    std::int64_t num_nodes, std::int64_t cols) {
  const std::int64_t n = local != nullptr ? local->rows() : 0;
  TESSERA_CHECK(
      local == nullptr || (local->cols() == cols && static_cast<std::int64_t>(ids.size()) == n),
      Internal, "gather_by_id: ", n, " rows of width ", local ? local->cols() : 0, " with ",
      ids.size(), " ids, expected width ", cols);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.size()), 0);
  counts[static_cast<std::size_t>(comm.rank())] = n;
  comm.all_reduce_max(counts);
  if (comm.rank() != 0) {
    if (n > 0) {
      auto ids_sent = comm.isend(std::as_bytes(ids), 0, tags::kGatherIds, TrafficCategory::Setup);
      auto rows_sent = comm.isend({static_cast<const std::byte*>(local->raw()), local->bytes()}, 0,
                                  tags::kGatherRows, TrafficCategory::Setup);
      ids_sent->wait();
      rows_sent->wait();
    }
    return Tensor();
  }
  Tensor all = Tensor::zeros(num_nodes, cols);
  auto place = [&](std::span<const GlobalId> row_ids, const float* rows, int from) {
    for (std::size_t i = 0; i < row_ids.size(); ++i) {
      TESSERA_CHECK(row_ids[i] >= 0 && row_ids[i] < num_nodes, InvalidInput, "rank ", from,
                    " sent node id ", row_ids[i], " outside [0, ", num_nodes, ")");
      std::copy_n(rows + static_cast<std::int64_t>(i) * cols, cols, all.row<float>(row_ids[i]));
    }
  };
  if (n > 0) place(ids, local->f32(), 0);
  for (int p = 1; p < comm.size(); ++p) {
    const std::int64_t count = counts[static_cast<std::size_t>(p)];
    if (count == 0) continue;
    std::vector<GlobalId> peer_ids(static_cast<std::size_t>(count));
    Tensor rows(count, cols);
    auto ids_in = comm.irecv(std::as_writable_bytes(std::span(peer_ids)), p, tags::kGatherIds);
    auto rows_in =
        comm.irecv({static_cast<std::byte*>(rows.raw()), rows.bytes()}, p, tags::kGatherRows);
    ids_in->wait();
    rows_in->wait();
    place(peer_ids, rows.f32(), p);
  }
  return all;
}

void to_probabilities(Tensor& logits, bool multiclass) {
  const std::int64_t cols = logits.cols();
  for (std::int64_t r = 0; r < logits.rows(); ++r) {
    float* row = logits.row<float>(r);
    if (!multiclass) {
      for (std::int64_t c = 0; c < cols; ++c) row[c] = 1.0f / (1.0f + std::exp(-row[c]));
      continue;
    }
    const float top = *std::max_element(row, row + cols);
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(row[c] - top));
    for (std::int64_t c = 0; c < cols; ++c)
      row[c] = static_cast<float>(std::exp(static_cast<double>(row[c] - top)) / sum);
  }
}

void check_matrix_path(const std::string& flag, const std::string& path) {
  TESSERA_CHECK(ends_with(path, ".npy") || ends_with(path, ".csv"), InvalidArgument, flag, " ",
                path, ": expected a file name ending in .npy or .csv");
}

void check_output_dirs(const TrainConfig& c) {
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--metrics", &c.metrics},
      {"--summary", &c.summary},
      {"--save-predictions", &c.save_predictions},
      {"--save-embeddings", &c.save_embeddings},
      {"--save-model", &c.save_model}};
  std::vector<std::pair<std::filesystem::path, const char*>> seen;
  for (const auto& [flag, path] : outputs) {
    if (path->empty()) continue;
    std::filesystem::path dir = std::filesystem::path(*path).parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    TESSERA_CHECK(std::filesystem::is_directory(dir, ec), InvalidArgument, flag, " ", *path,
                  ": no folder '", dir.string(), "'");
    TESSERA_CHECK(::access(dir.c_str(), W_OK) == 0, InvalidArgument, flag, " ", *path,
                  ": cannot write in '", dir.string(), "': ", std::strerror(errno));
    TESSERA_CHECK(!std::filesystem::is_directory(*path, ec), InvalidArgument, flag, " ", *path,
                  ": is a folder; name a file in it");
    // Two flags naming one file would write over each other.
    const std::filesystem::path file =
        std::filesystem::weakly_canonical(std::filesystem::absolute(*path, ec), ec);
    for (const auto& [other, other_flag] : seen)
      TESSERA_CHECK(ec || file != other, InvalidArgument, flag, " ", *path, ": the same file as ",
                    other_flag);
    if (!ec) seen.emplace_back(file, flag);
  }
}

void write_matrix(const std::filesystem::path& path, const Tensor& matrix) {
  check_matrix_path("write_matrix", path.string());
  const bool csv = ends_with(path.string(), ".csv");
  write_file_atomic(path, [&](std::ostream& out) { write_rows(out, matrix, csv); });
}

std::vector<std::byte> model_image(const ModelFile& model) {
  nlohmann::json identity = nlohmann::json::array();
  for (const auto& [key, value] : model.identity) identity.push_back({key, value});
  hdf5::Writer w("model");
  w.enable_checksums();
  w.attribute("kind", std::string(kModelKind));
  w.attribute("format", kModelFormat);
  w.attribute("identity", identity.dump());
  w.array("params", hdf5::kFloat32, model.params.data(),
          static_cast<std::int64_t>(model.params.size()), 1, 1, false);
  w.array("buffers", hdf5::kFloat32, model.buffers.data(),
          static_cast<std::int64_t>(model.buffers.size()), 1, 1, false);
  return w.image();
}

ModelFile model_from_image(std::span<const std::byte> image, const std::string& label) {
  std::string kind;
  {
    hdf5::Reader r(image, label);
    TESSERA_CHECK(r.has_attribute("kind"), InvalidInput, label,
                  ": neither a Tessera model file nor a checkpoint");
    kind = r.string_attribute("kind");
    if (kind == kModelKind) {
      TESSERA_CHECK(r.int64_attribute("format") == kModelFormat, InvalidInput, label,
                    ": model file format ", r.int64_attribute("format"),
                    ", this version reads format ", kModelFormat);
      ModelFile model;
      try {
        for (const auto& pair : nlohmann::json::parse(r.string_attribute("identity")))
          model.identity.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
      } catch (const nlohmann::json::exception& e) {
        TESSERA_FAIL(InvalidInput, label, ": malformed identity: ", e.what());
      }
      model.params = r.vector<float>("params", hdf5::kFloat32, -1);
      model.buffers = r.vector<float>("buffers", hdf5::kFloat32, -1);
      return model;
    }
  }
  CheckpointState checkpoint = checkpoint_from_image(image, label);  // names what is wrong
  return ModelFile{std::move(checkpoint.identity), std::move(checkpoint.params),
                   std::move(checkpoint.buffers)};
}

void apply_model_options(TrainConfig& config, const CheckpointIdentity& identity,
                         const std::string& label) {
  for (const char* flag : kModelFlags) {
    const auto it = std::find_if(identity.begin(), identity.end(),
                                 [&](const auto& entry) { return entry.first == flag; });
    TESSERA_CHECK(it != identity.end(), InvalidInput, label, ": no ", flag, " in its options");
    for (const OptionSpec& spec : option_table()) {
      if (spec.flag != flag) continue;
      try {
        spec.set(config, parse_option_text(spec, it->second), spec.flag);
      } catch (const Error& e) {
        TESSERA_FAIL(InvalidInput, label, ": ", e.message());
      }
    }
  }
}

}  // namespace tessera
