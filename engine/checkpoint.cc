// SPDX-License-Identifier: Apache-2.0
// Checkpoint files: the arrays (params, adam_m, adam_v, buffers) as f32 datasets with Fletcher-32
// per chunk; everything else as one JSON document (doubles printed to round-trip exactly)
// stored as bytes packed into an int64 dataset; a FNV-1a checksum over all of it as an
// attribute. Written through an in-memory image so that the file appears by rename only; the
// image is followed by a seal (its length and hash) that is checked before HDF5 reads a byte.
#include "engine/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "core/fuzzing.h"
#include "core/hash.h"
#include "datasets/dataset.h"
#include "datasets/hdf5_io.h"
#include "datasets/json_fields.h"
#include "engine/option_table.h"
#include "engine/system.h"

namespace tessera {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;
constexpr int kCategories = static_cast<int>(TrafficCategory::Count);
constexpr const char* kKind = "tessera-checkpoint";
// The JSON state (records, identity) is far smaller; a larger size is a corrupt header.
constexpr std::int64_t kMaxStateBytes = std::int64_t{1} << 40;

constexpr char kSealMagic[8] = {'T', 'S', 'R', 'S', 'E', 'A', 'L', '1'};

std::uint64_t image_hash(std::span<const std::byte> image) {
  Hasher h;
  h.add_bytes(image.data(), image.size());
  return h.finish();
}

void append_seal(std::vector<std::byte>& image) {
  const std::uint64_t words[2] = {image.size(), image_hash(image)};
  const std::size_t at = image.size();
  image.resize(at + kCheckpointSealBytes);
  std::memcpy(image.data() + at, kSealMagic, 8);
  std::memcpy(image.data() + at + 8, words, 16);
}

// The HDF5 image inside a checkpoint file's bytes: without the seal once it is checked (or all of
// the bytes when there is none: files of formats 1 to 3). `sealed` says which.
std::span<const std::byte> unsealed(std::span<const std::byte> file, const std::string& label,
                                    bool& sealed) {
  sealed = file.size() >= kCheckpointSealBytes &&
           std::memcmp(file.data() + file.size() - kCheckpointSealBytes, kSealMagic, 8) == 0;
  if (!sealed) return file;
  const std::span<const std::byte> image = file.first(file.size() - kCheckpointSealBytes);
  std::uint64_t words[2];
  std::memcpy(words, file.data() + image.size() + 8, 16);
  if (!kVerifyChecksums) return image;  // fuzzing: let the inputs reach the parser
  TESSERA_CHECK(words[0] == image.size(), InvalidInput, label, ": the seal records ", words[0],
                " bytes of checkpoint, the file holds ", image.size(),
                ": the file is cut short or corrupt");
  const std::uint64_t found = image_hash(image);
  TESSERA_CHECK(found == words[1], InvalidInput, label, ": the seal's hash does not match (stored ",
                fingerprint_hex(words[1]), ", computed ", fingerprint_hex(found),
                "): the file is corrupt");
  return image;
}

// FNV-1a over a sequence of byte ranges.
class Checksum {
 public:
  void add(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) {
      hash_ ^= p[i];
      hash_ *= 0x100000001b3ULL;
    }
    // Lengths too, so that bytes moving between arrays change the sum.
    const std::uint64_t length = bytes;
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (length >> (8 * i)) & 0xff;
      hash_ *= 0x100000001b3ULL;
    }
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

Json bytes_json(const TrafficBytes& bytes) { return Json(std::vector<std::uint64_t>(bytes.begin(), bytes.end())); }
TrafficBytes bytes_from(const Json& j) {
  TrafficBytes out{};
  const auto values = j.get<std::vector<std::uint64_t>>();
  TESSERA_CHECK(values.size() == out.size(), InvalidInput, "expected ", out.size(),
                " traffic categories, found ", values.size());
  std::copy(values.begin(), values.end(), out.begin());
  return out;
}

Json result_json(const RunResult& r) {
  return Json{{"run", r.run},
              {"seed", r.seed},
              {"highest_train", r.highest_train},
              {"best_valid", r.best_valid},
              {"test_at_best_valid", r.test_at_best_valid},
              {"train_at_best_valid", r.train_at_best_valid},
              {"best_epoch", r.best_epoch},
              {"lowest_valid_loss", r.lowest_valid_loss},
              {"lowest_loss_epoch", r.lowest_loss_epoch},
              {"final_train", r.final_train},
              {"final_valid", r.final_valid},
              {"final_test", r.final_test},
              {"final_loss", r.final_loss},
              {"epoch_seconds", r.epoch_seconds},
              {"comm_seconds", r.comm_seconds},
              {"hidden_seconds", r.hidden_seconds},
              {"encode_seconds", r.encode_seconds},
              {"decode_seconds", r.decode_seconds},
              {"bytes_per_epoch", bytes_json(r.bytes_per_epoch)},
              {"raw_bytes_per_epoch", bytes_json(r.raw_bytes_per_epoch)}};
}

RunResult result_from(const Json& j) {
  RunResult r;
  r.run = json_integer_at<int>(j, "run");
  r.seed = json_integer_at<std::uint64_t>(j, "seed");
  // Checkpoints of 0.1 did not track it: the train metric at the best valid bounds it below.
  r.highest_train = j.value("highest_train", j.at("train_at_best_valid").get<double>());
  r.best_valid = j.at("best_valid").get<double>();
  r.test_at_best_valid = j.at("test_at_best_valid").get<double>();
  r.train_at_best_valid = j.at("train_at_best_valid").get<double>();
  r.best_epoch = json_integer_at<int>(j, "best_epoch");
  // Checkpoints before 0.3 did not track the validation loss.
  r.lowest_valid_loss = j.value("lowest_valid_loss", 0.0);
  r.lowest_loss_epoch = j.value("lowest_loss_epoch", 0);
  r.final_train = j.at("final_train").get<double>();
  r.final_valid = j.at("final_valid").get<double>();
  r.final_test = j.at("final_test").get<double>();
  r.final_loss = j.at("final_loss").get<double>();
  r.epoch_seconds = j.at("epoch_seconds").get<std::vector<double>>();
  r.comm_seconds = j.at("comm_seconds").get<std::vector<double>>();
  r.hidden_seconds = j.at("hidden_seconds").get<std::vector<double>>();
  r.encode_seconds = j.at("encode_seconds").get<std::vector<double>>();
  r.decode_seconds = j.at("decode_seconds").get<std::vector<double>>();
  r.bytes_per_epoch = bytes_from(j.at("bytes_per_epoch"));
  r.raw_bytes_per_epoch = bytes_from(j.at("raw_bytes_per_epoch"));
  return r;
}

Json record_json(const EpochRecord& r) {
  return Json{{"run", r.run},
              {"epoch", r.epoch},
              {"loss", r.loss},
              {"evaluated", r.evaluated},
              {"train", r.train_metric},
              {"valid", r.valid_metric},
              {"test", r.test_metric},
              {"valid_loss", r.valid_loss},
              {"epoch_s", r.epoch_s},
              {"eval_s", r.eval_s},
              {"comm_s", r.comm_s},
              {"comm_hidden_s", r.comm_hidden_s},
              {"bytes", bytes_json(r.bytes)},
              {"raw_bytes", bytes_json(r.raw_bytes)},
              {"encode_s", r.encode_s},
              {"decode_s", r.decode_s},
              {"bit_plan", r.bit_plan}};
}

EpochRecord record_from(const Json& j) {
  EpochRecord r;
  r.run = json_integer_at<int>(j, "run");
  r.epoch = json_integer_at<int>(j, "epoch");
  r.loss = j.at("loss").get<double>();
  r.evaluated = j.at("evaluated").get<bool>();
  r.train_metric = j.at("train").get<double>();
  r.valid_metric = j.at("valid").get<double>();
  r.test_metric = j.at("test").get<double>();
  r.valid_loss = j.value("valid_loss", 0.0);  // (not in checkpoints before 0.3)
  r.epoch_s = j.at("epoch_s").get<double>();
  r.eval_s = j.at("eval_s").get<double>();
  r.comm_s = j.at("comm_s").get<double>();
  r.comm_hidden_s = j.at("comm_hidden_s").get<double>();
  r.bytes = bytes_from(j.at("bytes"));
  r.raw_bytes = bytes_from(j.at("raw_bytes"));
  r.encode_s = j.at("encode_s").get<double>();
  r.decode_s = j.at("decode_s").get<double>();
  r.bit_plan = j.at("bit_plan").get<std::string>();
  return r;
}

std::string state_text(const CheckpointState& s) {
  Json identity = Json::array();
  for (const auto& [key, value] : s.identity) identity.push_back({key, value});
  Json finished = Json::array();
  for (const RunResult& r : s.finished) finished.push_back(result_json(r));
  Json history = Json::array();
  for (const EpochRecord& r : s.history) history.push_back(record_json(r));
  Json j{{"identity", std::move(identity)},
         {"ranks", s.ranks},
         {"partition_fingerprint", s.partition_fingerprint},
         {"run", s.run},
         {"epoch", s.epoch},
         {"finished", std::move(finished)},
         {"current", result_json(s.current)},
         {"bytes_total", std::vector<double>(s.bytes_total.begin(), s.bytes_total.end())},
         {"raw_total", std::vector<double>(s.raw_total.begin(), s.raw_total.end())},
         {"history", std::move(history)},
         {"adam_steps", s.adam_steps}};
  Json names = Json::array();  // runner_state_<i> in the file
  for (const NodeArray& a : s.runner_state) names.push_back(a.name);
  j["runner_state"] = std::move(names);
  return j.dump();
}

void state_from_text(CheckpointState& s, const std::string& text) {
  const Json j = Json::parse(text);
  s.identity.clear();
  for (const Json& pair : j.at("identity"))
    s.identity.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
  s.ranks = json_integer_at<int>(j, "ranks");
  s.partition_fingerprint = json_integer_at<std::uint64_t>(j, "partition_fingerprint");
  s.run = json_integer_at<int>(j, "run");
  s.epoch = json_integer_at<int>(j, "epoch");
  for (const Json& r : j.at("finished")) s.finished.push_back(result_from(r));
  s.current = result_from(j.at("current"));
  const auto bytes_total = j.at("bytes_total").get<std::vector<double>>();
  const auto raw_total = j.at("raw_total").get<std::vector<double>>();
  TESSERA_CHECK(bytes_total.size() == kCategories && raw_total.size() == kCategories, InvalidInput,
                "expected ", kCategories, " traffic categories");
  std::copy(bytes_total.begin(), bytes_total.end(), s.bytes_total.begin());
  std::copy(raw_total.begin(), raw_total.end(), s.raw_total.begin());
  for (const Json& r : j.at("history")) s.history.push_back(record_from(r));
  s.adam_steps = json_integer_at<std::int64_t>(j, "adam_steps");
  // Format 3: the names of the runner arrays, read before the text (their count is an attribute).
  const Json names = j.value("runner_state", Json::array());
  TESSERA_CHECK(names.is_array() && names.size() == s.runner_state.size(), InvalidInput,
                names.size(), " runner array names for ", s.runner_state.size(), " arrays");
  for (std::size_t i = 0; i < names.size(); ++i)
    s.runner_state[i].name = names[i].get<std::string>();
}

std::string runner_array_path(std::size_t i) { return "runner_state_" + std::to_string(i); }

std::uint64_t checksum_of(const CheckpointState& s, const std::string& text) {
  Checksum sum;
  sum.add(s.params.data(), s.params.size() * sizeof(float));
  sum.add(s.adam_m.data(), s.adam_m.size() * sizeof(float));
  sum.add(s.adam_v.data(), s.adam_v.size() * sizeof(float));
  sum.add(s.buffers.data(), s.buffers.size() * sizeof(float));
  sum.add(s.best_params.data(), s.best_params.size() * sizeof(float));
  sum.add(s.best_buffers.data(), s.best_buffers.size() * sizeof(float));
  for (const NodeArray& a : s.runner_state) sum.add(a.values.raw(), a.values.bytes());
  sum.add(text.data(), text.size());
  return sum.value();
}

void write_floats(hdf5::Writer& w, const char* path, const std::vector<float>& values) {
  w.array(path, hdf5::kFloat32, values.data(), static_cast<std::int64_t>(values.size()), 1, 1,
          false);
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: the rename itself is atomic
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

CheckpointIdentity checkpoint_identity(const TrainConfig& c, const DatasetInfo& d) {
  CheckpointIdentity identity = {
      {"dataset", d.name + " (fingerprint " + fingerprint_hex(d.fingerprint) + ")"}};
  for (auto& entry : identity_values(c)) identity.push_back(std::move(entry));
  return identity;
}

std::string identity_difference(const CheckpointIdentity& saved, const CheckpointIdentity& now) {
  std::string out;
  auto add = [&out](const std::string& text) { out += (out.empty() ? "" : "; ") + text; };
  auto find = [](const CheckpointIdentity& in, const std::string& key) {
    return std::find_if(in.begin(), in.end(), [&key](const auto& p) { return p.first == key; });
  };
  for (const auto& [key, value] : now) {
    auto it = find(saved, key);
    if (it == saved.end()) {
      add(key + ": not in the checkpoint, this run " + value);
    } else if (it->second != value) {
      add(key + ": checkpoint " + it->second + ", this run " + value);
    }
  }
  for (const auto& [key, value] : saved) {
    if (find(now, key) == now.end()) add(key + ": checkpoint " + value + ", this run not set");
  }
  return out;
}

std::vector<std::byte> checkpoint_image(const CheckpointState& s) {
  TESSERA_CHECK(s.adam_m.size() == s.params.size() && s.adam_v.size() == s.params.size(),
                Internal, "checkpoint: Adam moments of ", s.adam_m.size(), "/", s.adam_v.size(),
                " values for ", s.params.size(), " parameters");
  const std::string text = state_text(s);
  std::vector<std::int64_t> packed((text.size() + 7) / 8, 0);
  std::memcpy(packed.data(), text.data(), text.size());
  hdf5::Writer w("checkpoint");
  w.enable_checksums();
  w.attribute("kind", std::string(kKind));
  w.attribute("format", kCheckpointFormat);
  w.attribute("run", static_cast<std::int64_t>(s.run));
  w.attribute("epoch", static_cast<std::int64_t>(s.epoch));
  w.attribute("state_bytes", static_cast<std::int64_t>(text.size()));
  w.attribute("checksum", checksum_of(s, text));
  write_floats(w, "params", s.params);
  write_floats(w, "adam_m", s.adam_m);
  write_floats(w, "adam_v", s.adam_v);
  write_floats(w, "buffers", s.buffers);
  write_floats(w, "best_params", s.best_params);
  write_floats(w, "best_buffers", s.best_buffers);
  w.attribute("runner_arrays", static_cast<std::int64_t>(s.runner_state.size()));
  for (std::size_t i = 0; i < s.runner_state.size(); ++i) {
    const Tensor& t = s.runner_state[i].values;
    w.array(runner_array_path(i).c_str(), hdf5::kFloat32, t.raw(), t.rows(), t.cols(), 2, false);
  }
  w.array("state", hdf5::kInt64, packed.data(), static_cast<std::int64_t>(packed.size()), 1, 1,
          false);
  std::vector<std::byte> image = w.image();
  append_seal(image);
  return image;
}

CheckpointState checkpoint_from_image(std::span<const std::byte> file, const std::string& label) {
  CheckpointState s;
  try {
    bool sealed = false;
    const std::span<const std::byte> image = unsealed(file, label, sealed);
    hdf5::Reader r(image, label);
    TESSERA_CHECK(r.has_attribute("kind") && r.string_attribute("kind") == kKind, InvalidInput,
                  label, ": not a Tessera checkpoint");
    const std::int64_t format = r.int64_attribute("format");
    TESSERA_CHECK(format >= 1 && format <= kCheckpointFormat, InvalidInput, label,
                  ": checkpoint format ", format, ", this version reads formats 1 to ",
                  kCheckpointFormat);
    TESSERA_CHECK(sealed || format < 4 || !kVerifyChecksums, InvalidInput, label,
                  ": a checkpoint of format ", format,
                  " without its seal: the file is cut short or corrupt");
    const std::int64_t state_bytes = r.int64_attribute("state_bytes");
    const std::uint64_t checksum = r.uint64_attribute("checksum");
    s.params = r.vector<float>("params", hdf5::kFloat32, -1);
    s.adam_m = r.vector<float>("adam_m", hdf5::kFloat32, static_cast<std::int64_t>(s.params.size()));
    s.adam_v = r.vector<float>("adam_v", hdf5::kFloat32, static_cast<std::int64_t>(s.params.size()));
    s.buffers = r.vector<float>("buffers", hdf5::kFloat32, -1);
    if (format >= 2) {
      s.best_params = r.vector<float>("best_params", hdf5::kFloat32, -1);
      s.best_buffers = r.vector<float>("best_buffers", hdf5::kFloat32, -1);
    }
    const std::int64_t arrays = format >= 3 ? r.int64_attribute("runner_arrays") : 0;
    TESSERA_CHECK(arrays >= 0 && arrays <= kMaxRunnerArrays, InvalidInput, label, ": ", arrays,
                  " runner arrays, outside [0, ", kMaxRunnerArrays, "]");
    s.runner_state.resize(static_cast<std::size_t>(arrays));
    for (std::size_t i = 0; i < s.runner_state.size(); ++i) {
      const std::string path = runner_array_path(i);
      const auto [rows, cols] =
          r.shape(path.c_str(), hdf5::kFloat32, 2);  // checked against the file
      Tensor& values = s.runner_state[i].values;
      values.resize(rows, cols);
      r.read(path.c_str(), hdf5::kFloat32, values.empty() ? nullptr : values.raw(), rows, cols);
    }
    TESSERA_CHECK(state_bytes >= 0 && state_bytes <= kMaxStateBytes, InvalidInput, label,
                  ": state size ", state_bytes, " is outside [0, ", kMaxStateBytes, "]");
    const auto packed =
        r.vector<std::int64_t>("state", hdf5::kInt64, (state_bytes + 7) / 8);
    std::string text(static_cast<std::size_t>(state_bytes), '\0');
    std::memcpy(text.data(), packed.data(), text.size());
    const std::uint64_t found = checksum_of(s, text);
    TESSERA_CHECK(found == checksum || !kVerifyChecksums, InvalidInput, label,
                  ": checksum mismatch (stored ", fingerprint_hex(checksum), ", computed ",
                  fingerprint_hex(found), "): the file is corrupt");
    state_from_text(s, text);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    TESSERA_FAIL(InvalidInput, label, ": malformed checkpoint state: ", e.what());
  }
  return s;
}

std::string checkpoint_file_name(int run, int epoch) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-r%04d-e%07d.h5", run, epoch);
  return name;
}

std::vector<CheckpointFile> list_checkpoints(const fs::path& dir) {
  std::vector<CheckpointFile> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  static const std::regex pattern(R"(checkpoint-r(\d{4})-e(\d{7})\.h5)");
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, pattern) || !entry.is_regular_file(ec)) continue;
    files.push_back({entry.path(), std::stoi(m[1].str()), std::stoi(m[2].str())});
  }
  std::sort(files.begin(), files.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return std::tie(a.run, a.epoch) > std::tie(b.run, b.epoch);
  });
  return files;
}

fs::path write_checkpoint(const fs::path& dir, const CheckpointState& state,
                          bool crash_before_rename) {
  const std::vector<std::byte> image = checkpoint_image(state);
  const fs::path path = dir / checkpoint_file_name(state.run, state.epoch);
  fs::path tmp = dir / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TESSERA_CHECK(fd >= 0, Io, "cannot create checkpoint '", tmp.string(), "': ",
                std::strerror(errno));
  const bool written = write_all(fd, image.data(), image.size()) && ::fsync(fd) == 0;
  const int write_errno = errno;
  ::close(fd);
  if (!written) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    TESSERA_FAIL(Io, "writing checkpoint '", tmp.string(), "' failed: ", std::strerror(write_errno));
  }
  if (crash_before_rename) {
    std::fprintf(stderr, "checkpoint: crash injected before renaming %s (TESSERA_FAULT_INJECT)\n",
                 tmp.string().c_str());
    std::fflush(stderr);
    ::raise(SIGKILL);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    TESSERA_FAIL(Io, "cannot rename checkpoint '", tmp.string(), "' to '", path.string(), "': ",
                 ec.message());
  }
  sync_directory(dir);
  return path;
}

void prune_checkpoints(const fs::path& dir, int keep) {
  const std::vector<CheckpointFile> files = list_checkpoints(dir);
  std::error_code ignored;
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < files.size(); ++i)
    fs::remove(files[i].path, ignored);
  // Temporary files of writes that never reached their rename (a crash, a kill).
  static const std::regex temporary(R"(\.checkpoint-r\d{4}-e\d{7}\.h5\.tmp\.\d+)");
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ignored)) {
    if (std::regex_match(entry.path().filename().string(), temporary)) fs::remove(entry.path(), ignored);
  }
}

void check_checkpoint_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  TESSERA_CHECK(!ec && fs::is_directory(dir), Io, "--checkpoint-dir '", dir.string(),
                "': cannot create the directory: ",
                ec ? ec.message() : std::string("not a directory"));
  const fs::path probe = dir / (".write-test." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TESSERA_CHECK(fd >= 0, Io, "--checkpoint-dir '", dir.string(), "' is not writable: ",
                std::strerror(errno));
  ::close(fd);
  fs::remove(probe, ec);
}

std::vector<std::byte> read_file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  TESSERA_CHECK(in.good(), Io, "cannot open '", path.string(), "': ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  std::vector<std::byte> bytes(static_cast<std::size_t>(std::max<std::streamoff>(size, 0)));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  TESSERA_CHECK(in.good() || bytes.empty(), Io, "reading '", path.string(), "' failed");
  return bytes;
}

// Fingerprint of the partitioning (which rank owns which node): FNV-1a of each rank's owned ids,
// gathered with one all-reduce and combined in rank order.
std::uint64_t partition_fingerprint(Communicator& comm, std::span<const GlobalId> owned_ids) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (GlobalId id : owned_ids) {
    hash ^= static_cast<std::uint64_t>(id);
    hash *= 0x100000001b3ULL;
  }
  std::vector<std::int64_t> slots(static_cast<std::size_t>(comm.size()), 0);
  slots[static_cast<std::size_t>(comm.rank())] = static_cast<std::int64_t>(hash >> 1);
  comm.all_reduce_max(slots);
  std::uint64_t combined = 0xcbf29ce484222325ULL;
  for (std::int64_t slot : slots) {
    combined ^= static_cast<std::uint64_t>(slot);
    combined *= 0x100000001b3ULL;
  }
  return combined;
}

// Rank 0 picks the newest valid checkpoint of config.checkpoint_dir (setting corrupt ones aside
// as NAME.corrupt, with a warning) and checks that it belongs to this configuration; returns
// its image and path, or nothing. Throws on rank 0 only: call inside run_agreed.
std::vector<std::byte> find_checkpoint(const TrainConfig& config,
                                       const CheckpointIdentity& identity, std::string& path_out) {
  const std::filesystem::path dir = config.checkpoint_dir;
  for (const CheckpointFile& file : list_checkpoints(dir)) {
    std::vector<std::byte> image;
    std::string problem;
    CheckpointState state;
    try {
      image = read_file_bytes(file.path);
      // The label names the in-memory image (not the file, which HDF5 would then see as open).
      state = checkpoint_from_image(image, "checkpoint " + file.path.string());
    } catch (const Error& e) {
      problem = e.message();
    }
    if (!problem.empty()) {
      std::fprintf(stderr, "warning: skipping checkpoint %s: %s (set aside as %s.corrupt)\n",
                   file.path.string().c_str(), problem.c_str(), file.path.filename().c_str());
      std::error_code ignored;
      std::filesystem::rename(file.path, file.path.string() + ".corrupt", ignored);
      continue;
    }
    const std::string difference = identity_difference(state.identity, identity);
    TESSERA_CHECK(difference.empty(), InvalidArgument, "checkpoint ", file.path.string(),
                  " belongs to another configuration or dataset (", difference,
                  "): use another --checkpoint-dir, or --no-resume to start over and replace it");
    path_out = file.path.string();
    return image;
  }
  TESSERA_CHECK(config.resume_mode() != ResumeMode::Require, InvalidArgument,
                "--resume: no valid checkpoint in --checkpoint-dir ", dir.string());
  return {};
}

}  // namespace tessera
