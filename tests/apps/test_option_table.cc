// SPDX-License-Identifier: Apache-2.0
// The option table (include/tessera/options.h, engine/option_table.h) walked as a whole: every
// option's default is the Options field's, every option is on train_gcn's command line (as a flag
// or switches) unless the table says why not, every option is in a real run's summary unless the
// table says why not, and every option of the checkpoint identity changes it while no other
// option does. The Python keywords and signature are checked from the same table in
// tests/python/test_bindings.py.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/checkpoint.h"
#include "engine/option_table.h"
#include "tests/apps/cli_test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::string run_train_gcn(const std::string& args, int* status_out) {
  const fs::path log = cli_test::work_dir("tessera_option_table") / "train_gcn.log";
  const std::string command =
      std::string(TRAIN_GCN_PATH) + " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  *status_out = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(OptionTable, DefaultsAreTheOptionsFields) {
  const Options defaults;
  std::set<std::string> names, flags;
  for (const OptionSpec& spec : option_table()) {
    EXPECT_EQ(spec.get(defaults), spec.default_value) << spec.name;
    EXPECT_TRUE(names.insert(std::string(spec.name)).second) << "twice: " << spec.name;
    if (spec.cli_flag) {
      EXPECT_TRUE(flags.insert(spec.flag).second) << "twice: " << spec.flag;
    }
    for (const auto& [flag, value] : spec.switches)
      EXPECT_TRUE(flags.insert(flag).second) << "switch twice: " << flag;
    EXPECT_FALSE(spec.help.empty()) << spec.name;
  }
  EXPECT_GE(names.size(), 30u);
}

// Whether --help lists `flag` (alone, or before its underscore alias).
bool lists(const std::string& help, const std::string& flag) {
  return help.find(flag + " ") != std::string::npos || help.find(flag + ",") != std::string::npos;
}

TEST(OptionTable, EveryOptionIsOnTheCommandLineOrSaysWhyNot) {
  int status = -1;
  const std::string help = run_train_gcn("--help", &status);
  ASSERT_EQ(status, 0) << help;
  for (const OptionSpec& spec : option_table()) {
    SCOPED_TRACE(std::string(spec.name));
    if (spec.cli_flag) {
      EXPECT_TRUE(lists(help, spec.flag)) << spec.flag;
    }
    for (const auto& [flag, value] : spec.switches) EXPECT_TRUE(lists(help, flag)) << flag;
    if (!spec.cli_flag && spec.switches.empty()) {
      EXPECT_FALSE(spec.cli_absent.empty());
    }
    for (const std::string& choice : option_choices(spec))
      EXPECT_NE(help.find(choice), std::string::npos) << choice << " (from its registry)";
  }
}

TEST(OptionTable, EveryOptionIsInTheSummaryOrSaysWhyNot) {
  const fs::path summary = cli_test::work_dir("tessera_option_table") / "summary.json";
  fs::remove(summary);
  int status = -1;
  // --codec adaptive: the options recorded only with it are there too.
  const std::string out = run_train_gcn(
      "--epochs 1 --hidden-channels 8 --quiet --codec adaptive --summary " + summary.string(),
      &status);
  ASSERT_EQ(status, 0) << out;
  std::ifstream in(summary);
  const nlohmann::json s = nlohmann::json::parse(in);
  for (const OptionSpec& spec : option_table()) {
    SCOPED_TRACE(std::string(spec.name));
    if (spec.record == RecordKind::NotRecorded) {
      EXPECT_FALSE(spec.record_key.empty()) << "NotRecorded needs a reason";
      EXPECT_FALSE(s.contains(std::string(spec.name)));
      continue;
    }
    const std::string key(spec.record == RecordKind::ReportedAs ? spec.record_key : spec.name);
    EXPECT_TRUE(s.contains(key)) << key;
  }
}

// A value of the option's type other than the one it has.
OptionValue another_value(const OptionSpec& spec, const OptionValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return !*b;
  if (const std::int64_t* i = std::get_if<std::int64_t>(&value)) return *i + 1;
  if (const std::uint64_t* u = std::get_if<std::uint64_t>(&value)) return *u + 1;
  if (const double* d = std::get_if<double>(&value)) return *d + 0.25;
  const std::string& text = std::get<std::string>(value);
  for (const std::string& choice : option_choices(spec))
    if (choice != text) return choice;
  return spec.name == "codec_backward" ? std::string("int8") : "other-" + text;
}

TEST(OptionTable, IdentityOptionsAndOnlyThoseChangeTheCheckpointIdentity) {
  DatasetInfo data;
  data.name = "d";
  TrainConfig base;
  base.codec = "adaptive";  // the options in the identity only with it count too
  const CheckpointIdentity identity = checkpoint_identity(base, data);
  int identity_options = 0;
  for (const OptionSpec& spec : option_table()) {
    SCOPED_TRACE(std::string(spec.name));
    TrainConfig changed = base;
    spec.set(changed, another_value(spec, spec.get(base)), spec.flag);
    const std::string difference =
        identity_difference(identity, checkpoint_identity(changed, data));
    const bool in_identity =
        spec.record == RecordKind::Identity || spec.record == RecordKind::IdentityUnlessDefault ||
        spec.record == RecordKind::IdentityUnless || spec.record == RecordKind::IdentityIfAdaptive;
    if (spec.name == "codec") continue;  // from adaptive the IdentityIfAdaptive ones change too
    if (in_identity) {
      ++identity_options;
      EXPECT_NE(difference.find(spec.flag), std::string::npos) << difference;
    } else {
      EXPECT_EQ(difference, "");
    }
  }
  EXPECT_GE(identity_options, 15);
  // --codec itself: changing it changes the identity.
  TrainConfig other = base;
  other.codec = "int8";
  EXPECT_NE(identity_difference(identity, checkpoint_identity(other, data)).find("--codec"),
            std::string::npos);
}

// --node-order is in the identity unless it is none, what every run had before the option: a
// checkpoint written then (no --node-order in its identity) resumes under none, not under rcm.
TEST(OptionTable, CheckpointsFromBeforeNodeOrdersResumeUnderNone) {
  DatasetInfo data;
  data.name = "d";
  TrainConfig older;
  older.node_order = "none";
  const CheckpointIdentity before = checkpoint_identity(older, data);
  const auto has_flag = [](const CheckpointIdentity& id) {
    return std::any_of(id.begin(), id.end(),
                       [](const auto& p) { return p.first == "--node-order"; });
  };
  EXPECT_FALSE(has_flag(before));
  EXPECT_EQ(identity_difference(before, checkpoint_identity(older, data)), "");
  TrainConfig now;  // the default, rcm
  EXPECT_TRUE(has_flag(checkpoint_identity(now, data)));
  EXPECT_NE(identity_difference(before, checkpoint_identity(now, data)).find("--node-order"),
            std::string::npos);
}

TEST(OptionTable, EveryCheckNamesItsFlag) {
  // A value each numeric rule refuses, applied to a valid configuration: the message names the
  // flag (the cases that need the other options are tested where they apply).
  for (const OptionSpec& spec : option_table()) {
    for (const OptionRule& rule : spec.rules) {
      if (rule.only_adaptive ||
          (rule.kind != OptionRule::AtLeast && rule.kind != OptionRule::Above &&
           rule.kind != OptionRule::Within && rule.kind != OptionRule::HalfOpen))
        continue;
      SCOPED_TRACE(std::string(spec.name));
      TrainConfig c;
      const double bad = rule.lo - 1.0;
      if (spec.type == OptionType::Float) {
        spec.set(c, bad, spec.flag);
      } else if (spec.type == OptionType::Int) {
        spec.set(c, static_cast<std::int64_t>(bad), spec.flag);
      } else {
        continue;
      }
      try {
        validate(c);
        ADD_FAILURE() << spec.flag << " = " << bad << " was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
        EXPECT_NE(e.message().find(spec.flag), std::string::npos) << e.message();
      }
    }
  }
}

// validate's message for c (InvalidArgument), or "" when it accepts c.
std::string refusal(const TrainConfig& c) {
  try {
    validate(c);
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
    return e.message();
  }
  return "";
}

// GAT's rules, which need the other options: whole heads and its own flags' ranges; every
// parallel mode takes it (the chunks push their sources' gradients through the history).
TEST(OptionTable, GatRulesNameTheirFlags) {
  TrainConfig c;
  c.model = "gat";
  c.hidden_channels = 64;
  EXPECT_EQ(refusal(c), "");
  for (const char* mode : {"pipeline", "hybrid"}) {
    TrainConfig pipelined = c;
    pipelined.parallel = mode;
    pipelined.stages = 2;
    EXPECT_EQ(refusal(pipelined), "") << mode;
  }
  TrainConfig split = c;
  split.hidden_channels = 60;  // not 8 heads
  EXPECT_NE(refusal(split).find("--heads 8"), std::string::npos) << refusal(split);
  TrainConfig heads = c;
  heads.heads = 0;
  EXPECT_NE(refusal(heads).find("--heads"), std::string::npos) << refusal(heads);
  TrainConfig drop = c;
  drop.attention_dropout = 1.0f;
  EXPECT_NE(refusal(drop).find("--attention-dropout"), std::string::npos) << refusal(drop);
}

// GCNII's rules, which need the other options: >= 3 layers and a dense decay of -1 or >= 0; every
// parallel mode takes it (the pipelines stream h0 beside the embeddings).
TEST(OptionTable, GcniiRulesNameTheirFlags) {
  TrainConfig c;
  c.model = "gcnii";
  EXPECT_EQ(refusal(c), "");
  for (const char* mode : {"pipeline", "hybrid"}) {
    TrainConfig pipelined = c;
    pipelined.parallel = mode;
    pipelined.stages = 2;
    EXPECT_EQ(refusal(pipelined), "") << mode;
  }
  TrainConfig shallow = c;
  shallow.num_layers = 2;
  EXPECT_NE(refusal(shallow).find("--num-layers 2"), std::string::npos) << refusal(shallow);
  TrainConfig decay = c;
  decay.dense_weight_decay = -0.5f;
  EXPECT_NE(refusal(decay).find("--dense-weight-decay"), std::string::npos) << refusal(decay);
  decay.dense_weight_decay = 0.0f;
  EXPECT_EQ(refusal(decay), "");
}

// The bf16 rows' rules (--aggregate-dtype, --feature-dtype), which need the other options: graph
// mode, CPU ranks, a model without attention; each refusal names its flag and what refuses it.
struct Bf16Flag {
  const char* flag;
  std::string Options::*value;
  void (*rule)(const TrainConfig&);
};

TEST(OptionTable, Bf16RowsRulesNameTheirFlags) {
  for (const Bf16Flag& f :
       {Bf16Flag{"--aggregate-dtype", &Options::aggregate_dtype, check_aggregate_dtype},
        Bf16Flag{"--feature-dtype", &Options::feature_dtype, check_feature_dtype}}) {
    SCOPED_TRACE(f.flag);
    TrainConfig c;
    c.*f.value = "bf16";
    EXPECT_EQ(refusal(c), "");
    c.model = "sage";
    EXPECT_EQ(refusal(c), "");
    TrainConfig unknown = c;
    unknown.*f.value = "fp8";
    EXPECT_NE(refusal(unknown).find(f.flag), std::string::npos) << refusal(unknown);
    for (const char* mode : {"pipeline", "hybrid"}) {
      TrainConfig pipelined = c;
      pipelined.parallel = mode;
      pipelined.stages = 2;
      const std::string message = refusal(pipelined);
      EXPECT_NE(message.find(f.flag), std::string::npos) << mode << ": " << message;
      EXPECT_NE(message.find(std::string("--parallel ") + mode), std::string::npos) << message;
      pipelined.*f.value = "f32";
      EXPECT_EQ(refusal(pipelined), "") << mode;
    }
    // The rule itself: validate refuses a GPU that this machine lacks before it comes to this.
    TrainConfig gpu = c;
    gpu.device = "cuda:0";
    try {
      f.rule(gpu);
      ADD_FAILURE() << "--device cuda:0 taken with " << f.flag << " bf16";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("--device cuda:0"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(f.flag), std::string::npos) << e.message();
    }
    TrainConfig gat = c;
    gat.model = "gat";
    gat.hidden_channels = 64;
    EXPECT_NE(refusal(gat).find("--model gat"), std::string::npos) << refusal(gat);
    EXPECT_NE(refusal(gat).find(f.flag), std::string::npos) << refusal(gat);
  }
}

}  // namespace
}  // namespace tessera
