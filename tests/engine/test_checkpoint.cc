// SPDX-License-Identifier: Apache-2.0
// Checkpoints in one process: the file round-trips every field bit for bit and refuses corrupt,
// truncated and foreign files; a run stopped by a signal and resumed from its checkpoint equals
// the uninterrupted run bit for bit (losses, accuracies, results, weights), with batch norm and
// two runs; a crash between writing a checkpoint and renaming it leaves the previous one loadable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "datasets/loaders.h"
#include "engine/checkpoint.h"
#include "engine/system.h"
#include "engine/trainer.h"

namespace {

using namespace tessera;
namespace fs = std::filesystem;

// One directory per test process. A death test's child (which gtest runs as a fresh process of
// this program) finds its parent's through the environment, so that the parent removes what the
// killed child wrote.
fs::path scratch_root() {
  constexpr const char* kVariable = "TESSERA_CHECKPOINT_TEST_DIR";
  if (const char* inherited = std::getenv(kVariable); inherited != nullptr && *inherited != 0)
    return inherited;
  const fs::path root =
      fs::temp_directory_path() / ("tessera_checkpoint_" + std::to_string(getpid()));
  setenv(kVariable, root.c_str(), 1);
  return root;
}

fs::path scratch(const std::string& name) {
  const fs::path dir = scratch_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!::testing::internal::InDeathTestChild()) fs::remove_all(scratch_root());
  }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

CheckpointState sample_state() {
  CheckpointState s;
  s.identity = {{"--hidden-channels", "16"}, {"dataset", "x (fingerprint 00)"}};
  s.ranks = 4;
  s.partition_fingerprint = 0xfedcba9876543210ULL;
  s.run = 1;
  s.epoch = 7;
  RunResult done;
  done.run = 0;
  done.best_valid = 0.1 + 0.2;  // not exactly representable in decimal: must round-trip
  done.epoch_seconds = {1e-3, 2.5e-3};
  done.bytes_per_epoch[0] = 123456789012345ULL;
  s.finished.push_back(done);
  s.current.run = 1;
  s.current.seed = 1;
  s.current.best_valid = -1.0;
  s.current.final_loss = 1.0 / 3.0;
  s.current.lowest_valid_loss = 0.1 + 0.7;
  s.current.lowest_loss_epoch = 5;
  s.bytes_total[1] = 4.5e9;
  EpochRecord r;
  r.run = 1;
  r.epoch = 7;
  r.loss = 2.0 / 3.0;
  r.evaluated = true;
  r.test_metric = 0.7;
  r.valid_loss = 1.0 / 7.0;
  r.bit_plan = "layer 0 fwd -> rank 1: 4 bits";
  s.history = {r};
  s.params = {1.0f, -2.5f, 3.25e-7f};
  s.adam_m = {0.1f, 0.2f, 0.3f};
  s.adam_v = {1e-9f, 2e-9f, 3e-9f};
  s.adam_steps = 7;
  s.buffers = {0.5f};
  // A pipeline's historical buffers: (num_nodes, F) in node-id order.
  NodeArray inputs{"history.1.inputs", Tensor(3, 2)}, grads{"history.1.grads", Tensor(3, 2)};
  for (std::int64_t i = 0; i < 6; ++i) {
    inputs.values.f32()[i] = 0.25f * static_cast<float>(i) - 1.0f;
    grads.values.f32()[i] = 1e-20f * static_cast<float>(i + 1);
  }
  s.runner_state.push_back(std::move(inputs));
  s.runner_state.push_back(std::move(grads));
  return s;
}

std::vector<float> values_of(const Tensor& t) { return {t.f32(), t.f32() + t.numel()}; }

void expect_same_runner_state(const CheckpointState& a, const CheckpointState& b,
                              const std::string& where) {
  ASSERT_EQ(a.runner_state.size(), b.runner_state.size()) << where;
  for (std::size_t i = 0; i < a.runner_state.size(); ++i) {
    EXPECT_EQ(a.runner_state[i].name, b.runner_state[i].name) << where;
    EXPECT_EQ(a.runner_state[i].values.shape_string(), b.runner_state[i].values.shape_string())
        << where;
    EXPECT_EQ(values_of(a.runner_state[i].values), values_of(b.runner_state[i].values)) << where;
  }
}

TEST(CheckpointFile, RoundTripsEveryFieldExactly) {
  const CheckpointState s = sample_state();
  const std::vector<std::byte> image = checkpoint_image(s);
  const CheckpointState t = checkpoint_from_image(image, "image");
  EXPECT_EQ(t.identity, s.identity);
  EXPECT_EQ(t.ranks, 4);
  EXPECT_EQ(t.partition_fingerprint, s.partition_fingerprint);
  EXPECT_EQ(t.run, 1);
  EXPECT_EQ(t.epoch, 7);
  ASSERT_EQ(t.finished.size(), 1u);
  EXPECT_EQ(t.finished[0].best_valid, s.finished[0].best_valid);
  EXPECT_EQ(t.finished[0].epoch_seconds, s.finished[0].epoch_seconds);
  EXPECT_EQ(t.finished[0].bytes_per_epoch, s.finished[0].bytes_per_epoch);
  EXPECT_EQ(t.current.final_loss, s.current.final_loss);
  EXPECT_EQ(t.current.lowest_valid_loss, s.current.lowest_valid_loss);
  EXPECT_EQ(t.current.lowest_loss_epoch, 5);
  EXPECT_EQ(t.bytes_total, s.bytes_total);
  ASSERT_EQ(t.history.size(), 1u);
  EXPECT_EQ(t.history[0].loss, s.history[0].loss);
  EXPECT_EQ(t.history[0].valid_loss, s.history[0].valid_loss);
  EXPECT_EQ(t.history[0].bit_plan, s.history[0].bit_plan);
  EXPECT_TRUE(t.history[0].evaluated);
  EXPECT_EQ(t.params, s.params);
  EXPECT_EQ(t.adam_m, s.adam_m);
  EXPECT_EQ(t.adam_v, s.adam_v);
  EXPECT_EQ(t.adam_steps, 7);
  EXPECT_EQ(t.buffers, s.buffers);
  expect_same_runner_state(t, s, "round trip");
}

// The message of checkpoint_from_image's error on `image`, "" when it loads.
std::string refusal(const std::vector<std::byte>& image) {
  try {
    checkpoint_from_image(image, "image");
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

TEST(CheckpointFile, CorruptOrTruncatedImagesAreRefused) {
  const std::vector<std::byte> image = checkpoint_image(sample_state());
  // Every single flipped byte is caught by the seal, before HDF5 parses the image (whose own
  // decoder can crash on corrupt metadata); the seal's own bytes too.
  for (std::size_t at = 0; at < image.size(); at += 97) {
    for (std::size_t where : {at, image.size() - 1 - at % kCheckpointSealBytes}) {
      std::vector<std::byte> bad = image;
      bad[where] ^= std::byte{0x5a};
      try {
        checkpoint_from_image(bad, "bad");
        ADD_FAILURE() << "a flipped byte " << where << " of " << image.size() << " loaded";
      } catch (const Error& e) {
        EXPECT_NE(e.message().find("bad"), std::string::npos) << e.message();
      }
    }
  }
  // A flip in the HDF5 image is named as such, before any HDF5 message.
  std::vector<std::byte> flipped = image;
  flipped[image.size() / 3] ^= std::byte{1};
  EXPECT_NE(refusal(flipped).find("the seal's hash does not match"), std::string::npos);
  // Without its seal, a checkpoint of this format is cut short, whatever HDF5 makes of it.
  const std::vector<std::byte> bare(image.begin(), image.end() - kCheckpointSealBytes);
  EXPECT_NE(refusal(bare).find("without its seal"), std::string::npos);
  for (std::size_t keep : {std::size_t{0}, std::size_t{100}, image.size() / 2, image.size() - 1}) {
    const std::vector<std::byte> truncated(image.begin(), image.begin() + keep);
    EXPECT_THROW(checkpoint_from_image(truncated, "truncated"), Error) << keep << " bytes";
  }
}

// Files written before the seal (format 3) still load: a checkpoint of a real run, 4 epochs on a
// cut of Cora (fuzz/make_seeds.py).
TEST(CheckpointFile, AFileOfFormat3WithoutSealStillLoads) {
  const std::filesystem::path path =
      std::filesystem::path(TESSERA_TEST_DATA_DIR) / "checkpoint-format3.h5";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << path;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  // The label must not be the path of an existing file: HDF5 would see that file as open.
  const CheckpointState s = checkpoint_from_image({data, bytes.size()}, "format-3 checkpoint");
  EXPECT_EQ(s.epoch, 4);
  EXPECT_EQ(s.history.size(), 4u);
  EXPECT_FALSE(s.params.empty());
  EXPECT_EQ(s.adam_m.size(), s.params.size());
  // Its own corruption is still caught, by HDF5's checksums or Tessera's sum inside.
  std::string bad = bytes;
  bad[bytes.size() / 2] ^= 0x5a;
  EXPECT_THROW(
      checkpoint_from_image({reinterpret_cast<const std::byte*>(bad.data()), bad.size()}, "bad"),
      Error);
}

TEST(CheckpointFile, IdentityDifferenceNamesTheFlag) {
  TrainConfig a;
  a.hidden_channels = 16;
  TrainConfig b = a;
  b.hidden_channels = 32;
  DatasetInfo d;
  d.name = "cora";
  d.fingerprint = 42;
  EXPECT_EQ(identity_difference(checkpoint_identity(a, d), checkpoint_identity(a, d)), "");
  const std::string diff = identity_difference(checkpoint_identity(a, d), checkpoint_identity(b, d));
  EXPECT_NE(diff.find("--hidden-channels: checkpoint 16, this run 32"), std::string::npos) << diff;
  DatasetInfo other = d;
  other.fingerprint = 43;
  EXPECT_NE(identity_difference(checkpoint_identity(a, d), checkpoint_identity(a, other))
                .find("dataset"),
            std::string::npos);
  // Threads, checkpointing and output files do not change the trajectory.
  TrainConfig c = a;
  c.threads = 3;
  c.checkpoint_every = 5;
  c.metrics = "x.jsonl";
  EXPECT_EQ(identity_difference(checkpoint_identity(a, d), checkpoint_identity(c, d)), "");
}

TrainConfig small_config(const fs::path& dir) {
  TrainConfig c;
  c.dataset = "synth:default";
  c.num_layers = 3;
  c.hidden_channels = 16;
  c.epochs = 12;
  c.runs = 2;
  c.batch_norm = true;
  c.eval_every = 2;
  c.checkpoint_dir = dir.string();
  c.checkpoint_every = 4;
  c.verbosity = 0;
  c.handle_signals = true;  // SIGUSR1 stops training after a checkpoint
  c.threads = 1;  // several test processes share two cores: one thread does not spin-wait
  return c;
}

const Dataset& dataset() {
  static const Dataset d = load_dataset("synth:default", {});
  return d;
}

struct Trained {
  TrainOutcome outcome;
  std::vector<EpochRecord> records;
  std::vector<float> params;
};

// Trains with `config`; raises SIGUSR1 inside the callback after (run, epoch) when given.
Trained train(const TrainConfig& config, int stop_run = -1, int stop_epoch = -1) {
  Trained t;
  Trainer trainer(config, dataset());
  t.outcome = trainer.train([&](const EpochRecord& r) {
    t.records.push_back(r);
    if (!r.replayed && r.run == stop_run && r.epoch == stop_epoch) std::raise(SIGUSR1);
  });
  const auto params = trainer.model().params();
  t.params.assign(params.begin(), params.end());
  clear_stop_signal();
  return t;
}

void expect_same_records(const std::vector<EpochRecord>& a, const std::vector<EpochRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].run, b[i].run);
    EXPECT_EQ(a[i].epoch, b[i].epoch);
    EXPECT_EQ(a[i].loss, b[i].loss) << "run " << a[i].run << " epoch " << a[i].epoch;
    EXPECT_EQ(a[i].evaluated, b[i].evaluated);
    EXPECT_EQ(a[i].valid_metric, b[i].valid_metric);
    EXPECT_EQ(a[i].test_metric, b[i].test_metric);
  }
}

TEST(CheckpointResume, StoppedAndResumedEqualsUninterruptedBitForBit) {
  const Trained full = train(small_config(scratch("full")));
  ASSERT_FALSE(full.outcome.stopped);
  ASSERT_EQ(full.outcome.results.size(), 2u);

  // Stopped in the second run between periodic checkpoints (the signal is seen at the next
  // epoch's agreement), then resumed by a new trainer from the stop checkpoint.
  const fs::path dir = scratch("stopped");
  const Trained first = train(small_config(dir), 1, 5);
  ASSERT_TRUE(first.outcome.stopped);
  EXPECT_EQ(first.outcome.stop_run, 1);
  EXPECT_EQ(first.outcome.stop_epoch, 6);
  EXPECT_EQ(first.outcome.stop_signal, SIGUSR1);
  EXPECT_EQ(first.outcome.results.size(), 1u);
  EXPECT_TRUE(fs::exists(dir / checkpoint_file_name(1, 6)));
  const Trained second = train(small_config(dir));
  ASSERT_FALSE(second.outcome.stopped);
  EXPECT_EQ(second.outcome.resumed_from, (dir / checkpoint_file_name(1, 6)).string());

  // The resumed trainer replays the 18 records of the checkpoint, then trains the last 6.
  std::size_t replayed = 0;
  for (const EpochRecord& r : second.records) replayed += r.replayed ? 1 : 0;
  EXPECT_EQ(replayed, 18u);
  expect_same_records(full.records, second.records);
  ASSERT_EQ(second.outcome.results.size(), 2u);
  for (int run = 0; run < 2; ++run) {
    const RunResult& a = full.outcome.results[run];
    const RunResult& b = second.outcome.results[run];
    EXPECT_EQ(a.best_valid, b.best_valid);
    EXPECT_EQ(a.best_epoch, b.best_epoch);
    EXPECT_EQ(a.test_at_best_valid, b.test_at_best_valid);
    EXPECT_EQ(a.final_test, b.final_test);
    EXPECT_EQ(a.final_loss, b.final_loss);
    EXPECT_EQ(a.epoch_seconds.size(), b.epoch_seconds.size());
    EXPECT_EQ(a.bytes_per_epoch, b.bytes_per_epoch);
  }
  EXPECT_EQ(full.params, second.params);

  // The final checkpoints hold the same weights, optimizer state and batch-norm statistics.
  const CheckpointState a = checkpoint_from_image(
      read_file_bytes(fs::path(full.outcome.checkpoint)), "full");
  const CheckpointState b = checkpoint_from_image(
      read_file_bytes(fs::path(second.outcome.checkpoint)), "resumed");
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.adam_m, b.adam_m);
  EXPECT_EQ(a.adam_v, b.adam_v);
  EXPECT_EQ(a.buffers, b.buffers);
  EXPECT_FALSE(a.buffers.empty());

  // Started again after it finished: nothing left to train, the same results.
  const Trained again = train(small_config(dir));
  EXPECT_EQ(again.outcome.results.size(), 2u);
  EXPECT_EQ(again.outcome.results[1].final_test, full.outcome.results[1].final_test);
  for (const EpochRecord& r : again.records) EXPECT_TRUE(r.replayed);
}

// --patience (on the validation metric, or loss) ends each run on its own, at the evaluated epoch
// `patience` epochs past its best validation epoch, and the next run still trains; a job stopped by
// a signal at exactly that epoch and resumed ends the run there too (the resumed job trains no
// epoch of it), so that the results are those of the uninterrupted job.
class Patience : public ::testing::TestWithParam<const char*> {};

TEST_P(Patience, EndsEachRunAndSurvivesAResume) {
  const std::string on = GetParam();
  auto config = [&](const fs::path& dir) {
    TrainConfig c = small_config(dir);
    c.epochs = 80;
    c.patience = 4;
    c.patience_on = on;
    c.lr = 0.05f;
    c.checkpoint_every = 0;
    return c;
  };
  const Trained full = train(config(scratch("patience-full-" + on)));
  ASSERT_EQ(full.outcome.results.size(), 2u);
  EXPECT_FALSE(full.outcome.early_stopped);  // (that is the epoch callback's)
  for (const RunResult& r : full.outcome.results) {
    SCOPED_TRACE(r.run);
    EXPECT_LT(r.epoch_seconds.size(), 80u);  // this set-up plateaus well before
    const int best = on == "loss" ? r.lowest_loss_epoch : r.best_epoch;
    EXPECT_EQ(static_cast<int>(r.epoch_seconds.size()), best + 4);
    // The lowest loss is that of the records (evaluated epochs only, every second one).
    double lowest = 1e300;
    for (const EpochRecord& e : full.records)
      if (e.run == r.run && e.evaluated) lowest = std::min(lowest, e.valid_loss);
    EXPECT_EQ(r.lowest_valid_loss, lowest);
    EXPECT_GT(lowest, 0.0);
  }
  const int end = static_cast<int>(full.outcome.results[0].epoch_seconds.size());
  const fs::path dir = scratch("patience-stopped-" + on);
  const Trained first = train(config(dir), 0, end - 1);  // seen at the next epoch: `end`
  ASSERT_TRUE(first.outcome.stopped);
  EXPECT_EQ(first.outcome.stop_epoch, end);
  const Trained second = train(config(dir));
  ASSERT_FALSE(second.outcome.stopped);
  expect_same_records(full.records, second.records);
  ASSERT_EQ(second.outcome.results.size(), 2u);
  for (int run = 0; run < 2; ++run) {
    EXPECT_EQ(second.outcome.results[run].epoch_seconds.size(),
              full.outcome.results[run].epoch_seconds.size());
    EXPECT_EQ(second.outcome.results[run].test_at_best_valid,
              full.outcome.results[run].test_at_best_valid);
  }
  EXPECT_EQ(full.params, second.params);
}

INSTANTIATE_TEST_SUITE_P(Watching, Patience, ::testing::Values("metric", "loss"));

TEST(CheckpointResume, CrashBetweenWriteAndRenameKeepsThePreviousCheckpoint) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path dir = scratch("crash");
  CheckpointState older = sample_state();
  older.epoch = 4;
  older.params = {4.0f, 4.0f, 4.0f};
  write_checkpoint(dir, older, false);
  CheckpointState newer = sample_state();
  newer.epoch = 8;
  EXPECT_EXIT(write_checkpoint(dir, newer, /*crash_before_rename=*/true),
              ::testing::KilledBySignal(SIGKILL), "crash injected");
  // The newer one never appeared under its name; its temporary file is not a checkpoint.
  const std::vector<CheckpointFile> files = list_checkpoints(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].epoch, 4);
  const CheckpointState loaded = checkpoint_from_image(read_file_bytes(files[0].path), "older");
  EXPECT_EQ(loaded.params, older.params);
  // Pruning clears the stale temporary file and keeps the checkpoint.
  prune_checkpoints(dir, 2);
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

TEST(CheckpointResume, ForeignOrMissingCheckpointsAreRefused) {
  const fs::path dir = scratch("foreign");
  TrainConfig c = small_config(dir);
  c.runs = 1;
  c.epochs = 4;
  c.batch_norm = false;
  train(c);
  const fs::path saved = dir / checkpoint_file_name(0, 4);
  const std::vector<std::byte> before = read_file_bytes(saved);
  TrainConfig wider = c;
  wider.hidden_channels = 32;
  try {
    train(wider);
    ADD_FAILURE() << "a checkpoint of another width was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("--hidden-channels: checkpoint 16, this run 32"), std::string::npos)
        << e.message();
  }
  EXPECT_EQ(read_file_bytes(saved), before);  // nothing overwritten

  TrainConfig require = c;
  require.resume = "require";
  require.checkpoint_dir = scratch("empty").string();
  EXPECT_THROW(train(require), Error);

  // A checkpoint directory that cannot be created (a path under a regular file: root ignores
  // permission bits, so this is the failure that holds for everyone).
  const fs::path file = scratch("file") / "plain";
  std::ofstream(file) << "x";
  TrainConfig unwritable = c;
  unwritable.checkpoint_dir = (file / "checkpoints").string();
  try {
    train(unwritable);
    ADD_FAILURE() << "an unwritable checkpoint directory was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("--checkpoint-dir"), std::string::npos) << e.message();
  }
}

}  // namespace
