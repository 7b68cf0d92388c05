// SPDX-License-Identifier: Apache-2.0
// The option table: TESSERA_OPTIONS (include/tessera/options.h) read once into one entry per
// option — its flag, type and default, how the command line spells it, the checks its value
// must pass, and where the run records it. What presents options (train_gcn's flags, the
// Python keywords, api/options.cc) and what records them (the summary, the checkpoint identity)
// walks this table; nothing lists options a second time.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/train_config.h"
#include "tessera/options.h"

namespace tessera {

enum class OptionType { Bool, Int, UInt, Float, String };

// One check of an option's value (the check column of TESSERA_OPTIONS).
struct OptionRule {
  enum Kind { AtLeast, Above, Within, HalfOpen, Finite, OneOf, Custom, RefusedBy } kind;
  double lo = 0.0, hi = 0.0;                      // the bounds
  std::vector<std::string> (*names)() = nullptr;  // OneOf: the registry's names
  void (*custom)(const TrainConfig&) = nullptr;   // Custom
  unsigned modes = 0;                             // RefusedBy: bits of 1 << ParallelMode
  const char* why = "";                           // RefusedBy: the rest of the message
  bool only_adaptive = false;                     // WhenAdaptive(...)
};

// Where a run keeps the value (the record column).
enum class RecordKind {
  Identity,               // the summary and the checkpoint identity
  IdentityUnlessDefault,  // both, the identity only when set (so that older checkpoints resume)
  IdentityUnless,         // both, the identity only when not record_key (what older runs had)
  Summary,
  IdentityIfAdaptive,
  ReportedAs,
  NotRecorded
};

struct OptionSpec {
  std::string_view name;  // the Options field
  std::string flag;       // "--num-layers": what messages call it, even when not on the CLI
  OptionType type;
  std::string_view help;
  OptionValue (*get)(const Options&);
  void (*set)(Options&, const OptionValue&, std::string_view flag);  // InvalidArgument: type
  OptionValue default_value;
  // Command line: --flag VALUE (cli_flag), switches that set values, or absent (why).
  bool cli_flag = true;
  std::vector<std::pair<std::string, std::string>> switches;
  std::string_view cli_absent;
  std::vector<OptionRule> rules;
  RecordKind record = RecordKind::Summary;
  // ReportedAs: the summary key; NotRecorded: why; IdentityUnless: the value older runs had
  std::string_view record_key;
  std::string (*record_text)(const TrainConfig&) = nullptr;  // the value recorded, when not its own
};

// Every option, in TESSERA_OPTIONS order.
std::span<const OptionSpec> option_table();
// The option named `name` (the field, "num_layers"); InvalidArgument "unknown option" otherwise.
const OptionSpec& option_spec(std::string_view name);
// The names a OneOf option takes (empty when it takes any).
std::vector<std::string> option_choices(const OptionSpec& spec);
// Parses `text` as the option's type ("3", "0.5", "on"/"off", "true"/"false", "1"/"0").
OptionValue parse_option_text(const OptionSpec& spec, const std::string& text);

// Applies every rule of the table to `config` (InvalidArgument naming the flag).
void check_options(const TrainConfig& config);

// What the summary records of the options: (key, value) in table order, for every option the
// summary writes itself (ReportedAs ones are written by the run, NotRecorded ones not at all).
std::vector<std::pair<std::string, OptionValue>> summary_values(const TrainConfig& config);
// What a checkpoint must match to resume: ("--flag", text) for every Identity option; "-" for
// IdentityIfAdaptive ones without --codec adaptive.
std::vector<std::pair<std::string, std::string>> identity_values(const TrainConfig& config);
// An option value as the checkpoint identity writes it: numbers to round-trip (9 significant
// digits), "on"/"off", text as it is.
std::string option_text(const OptionValue& value);

}  // namespace tessera
