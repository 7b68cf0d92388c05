// SPDX-License-Identifier: Apache-2.0
// The option table (engine/option_table.h): the vocabulary of TESSERA_OPTIONS' cli, check and
// record columns, the one expansion of the macro into OptionSpec entries, and the walks over
// them (checks, summary values, checkpoint identity, text parsing).
#include "engine/option_table.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <type_traits>

#include "comm/gpu_communicator.h"
#include "core/error.h"
#include "engine/modes.h"
#include "partition/node_order.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

// ---- The cli column -------------------------------------------------------------------------

struct Cli {
  bool flag = true;
  std::vector<std::pair<std::string, std::string>> switches;
  std::string_view absent;
};
std::pair<std::string, std::string> Switch(const char* flag, const char* value) {
  return {flag, value};
}
template <class... S>
Cli Flag(S... switches) {
  return {true, {switches...}, {}};
}
template <class... S>
Cli Switches(S... switches) {
  return {false, {switches...}, {}};
}
Cli ApiOnly(std::string_view why) { return {false, {}, why}; }

// ---- The check column -----------------------------------------------------------------------

using Rules = std::vector<OptionRule>;
Rules Any() { return {}; }
Rules bounds(OptionRule::Kind kind, double lo, double hi = 0.0) {
  OptionRule rule{kind};
  rule.lo = lo;
  rule.hi = hi;
  return {rule};
}
Rules AtLeast(double v) { return bounds(OptionRule::AtLeast, v); }
Rules Above(double v) { return bounds(OptionRule::Above, v); }
Rules Within(double lo, double hi) { return bounds(OptionRule::Within, lo, hi); }
Rules HalfOpen(double lo, double hi) { return bounds(OptionRule::HalfOpen, lo, hi); }
Rules Finite() { return bounds(OptionRule::Finite, 0.0); }
Rules OneOf(std::vector<std::string> (*names)()) {
  OptionRule rule{OptionRule::OneOf};
  rule.names = names;
  return {rule};
}
Rules Custom(void (*check)(const TrainConfig&)) {
  OptionRule rule{OptionRule::Custom};
  rule.custom = check;
  return {rule};
}
Rules RefusedBy(unsigned modes, const char* why) {
  OptionRule rule{OptionRule::RefusedBy};
  rule.modes = modes;
  rule.why = why;
  return {rule};
}
Rules WhenAdaptive(Rules rules) {
  for (OptionRule& rule : rules) rule.only_adaptive = true;
  return rules;
}
template <class... R>
Rules All(R... parts) {
  Rules all;
  (all.insert(all.end(), parts.begin(), parts.end()), ...);
  return all;
}

constexpr unsigned mode_bit(ParallelMode mode) { return 1u << static_cast<int>(mode); }
constexpr unsigned kGraphMode = mode_bit(ParallelMode::Graph);
constexpr unsigned kPipelined = mode_bit(ParallelMode::Pipeline) | mode_bit(ParallelMode::Hybrid);
constexpr const char* kStagesUnused =
    "is not used: --stages and --chunks apply to --parallel pipeline or hybrid";

// ---- The record column ----------------------------------------------------------------------

struct Record {
  RecordKind kind;
  std::string_view key;
  std::string (*text)(const TrainConfig&) = nullptr;
};
Record Identity(std::string (*text)(const TrainConfig&) = nullptr) {
  return {RecordKind::Identity, {}, text};
}
Record IdentityUnlessDefault() { return {RecordKind::IdentityUnlessDefault, {}}; }
Record IdentityUnless(std::string_view older) { return {RecordKind::IdentityUnless, older}; }
Record Summary() { return {RecordKind::Summary, {}}; }
Record IdentityIfAdaptive() { return {RecordKind::IdentityIfAdaptive, {}}; }
Record ReportedAs(std::string_view key) { return {RecordKind::ReportedAs, key}; }
Record NotRecorded(std::string_view why) { return {RecordKind::NotRecorded, why}; }

// ---- Values ---------------------------------------------------------------------------------

template <class T>
constexpr OptionType type_of() {
  if constexpr (std::is_same_v<T, bool>)
    return OptionType::Bool;
  else if constexpr (std::is_same_v<T, std::string>)
    return OptionType::String;
  else if constexpr (std::is_floating_point_v<T>)
    return OptionType::Float;
  else if constexpr (std::is_unsigned_v<T>)
    return OptionType::UInt;
  else
    return OptionType::Int;
}

template <class T>
OptionValue to_value(const T& value) {
  if constexpr (type_of<T>() == OptionType::Float)
    return static_cast<double>(value);
  else if constexpr (type_of<T>() == OptionType::UInt)
    return static_cast<std::uint64_t>(value);
  else if constexpr (type_of<T>() == OptionType::Int)
    return static_cast<std::int64_t>(value);
  else
    return value;
}

// `field` = value, converted to the field's type; InvalidArgument naming the flag for a value of
// another type or out of the field's range.
template <class T>
void from_value(T& field, const OptionValue& value, std::string_view flag) {
  constexpr OptionType type = type_of<T>();
  if constexpr (type == OptionType::Bool || type == OptionType::String) {
    const T* v = std::get_if<T>(&value);
    TESSERA_CHECK(v != nullptr, InvalidArgument, flag, ": expected ",
                  type == OptionType::Bool ? "true or false" : "text");
    field = *v;
  } else if constexpr (type == OptionType::Float) {
    if (const double* v = std::get_if<double>(&value))
      field = static_cast<T>(*v);
    else if (const std::int64_t* i = std::get_if<std::int64_t>(&value))
      field = static_cast<T>(*i);
    else if (const std::uint64_t* u = std::get_if<std::uint64_t>(&value))
      field = static_cast<T>(*u);
    else
      TESSERA_FAIL(InvalidArgument, flag, ": expected a number");
  } else {
    const std::int64_t* i = std::get_if<std::int64_t>(&value);
    const std::uint64_t* u = std::get_if<std::uint64_t>(&value);
    TESSERA_CHECK(i != nullptr || u != nullptr, InvalidArgument, flag, ": expected an integer");
    const bool fits = i ? std::in_range<T>(*i) : std::in_range<T>(*u);
    TESSERA_CHECK(fits, InvalidArgument, flag, ": ", i ? std::to_string(*i) : std::to_string(*u),
                  " is outside [", std::numeric_limits<T>::min(), ", ",
                  std::numeric_limits<T>::max(), "]");
    field = i ? static_cast<T>(*i) : static_cast<T>(*u);
  }
}

std::string flag_of(std::string_view name) {
  std::string flag = "--" + std::string(name);
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

template <class T>
OptionSpec make_spec(std::string_view name, OptionValue (*get)(const Options&),
                     void (*set)(Options&, const OptionValue&, std::string_view), const T& initial,
                     Cli cli, Rules rules, Record record, std::string_view help) {
  OptionSpec spec;
  spec.name = name;
  spec.flag = flag_of(name);
  spec.type = type_of<T>();
  spec.help = help;
  spec.get = get;
  spec.set = set;
  spec.default_value = to_value(initial);
  spec.cli_flag = cli.flag;
  spec.switches = std::move(cli.switches);
  spec.cli_absent = cli.absent;
  spec.rules = std::move(rules);
  spec.record = record.kind;
  spec.record_key = record.key;
  spec.record_text = record.text;
  return spec;
}

#define TESSERA_OPTION_SPEC(name, type, value, cli, check, record, help) \
  make_spec<type>(                                                       \
      #name, [](const Options& o) { return to_value(o.name); },          \
      [](Options& o, const OptionValue& v, std::string_view flag) {      \
        from_value(o.name, v, flag);                                     \
      },                                                                 \
      Options{}.name, cli, check, record, help),

std::vector<OptionSpec> build_table() { return {TESSERA_OPTIONS(TESSERA_OPTION_SPEC)}; }

#undef TESSERA_OPTION_SPEC

// A bound or a value in a message: integers without a decimal point.
std::string number_text(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15)
    return std::to_string(static_cast<std::int64_t>(value));
  std::ostringstream os;
  os << value;
  return os.str();
}

double number_of(const OptionValue& value) {
  if (const double* d = std::get_if<double>(&value)) return *d;
  if (const std::int64_t* i = std::get_if<std::int64_t>(&value)) return static_cast<double>(*i);
  if (const std::uint64_t* u = std::get_if<std::uint64_t>(&value)) return static_cast<double>(*u);
  return std::get<bool>(value) ? 1.0 : 0.0;
}

template <class T>
OptionValue parse_integer(const std::string& flag, const std::string& text) {
  T v = 0;
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(text.data(), last, v);
  TESSERA_CHECK(ec == std::errc() && end == last && !text.empty(), InvalidArgument, flag,
                std::is_signed_v<T> ? ": expected an integer" : ": expected a non-negative integer",
                ", got '", text, "'");
  return v;
}

void check_rule(const OptionSpec& spec, const OptionRule& rule, const OptionValue& value,
                const TrainConfig& config) {
  const std::string& flag = spec.flag;
  const double x = std::holds_alternative<std::string>(value) ? 0.0 : number_of(value);
  const std::string got = number_text(x), lo = number_text(rule.lo), hi = number_text(rule.hi);
  switch (rule.kind) {
    case OptionRule::AtLeast:
      TESSERA_CHECK(x >= rule.lo, InvalidArgument, flag, " must be >= ", lo, ", got ", got);
      break;
    case OptionRule::Above:
      TESSERA_CHECK(x > rule.lo, InvalidArgument, flag, " must be > ", lo, ", got ", got);
      break;
    case OptionRule::Within:
      TESSERA_CHECK(x >= rule.lo && x <= rule.hi, InvalidArgument, flag, " must be in [", lo, ", ",
                    hi, "], got ", got);
      break;
    case OptionRule::HalfOpen:
      TESSERA_CHECK(x >= rule.lo && x < rule.hi, InvalidArgument, flag, " must be in [", lo, ", ",
                    hi, "), got ", got);
      break;
    case OptionRule::Finite: break;  // every floating-point value is checked
    case OptionRule::OneOf: {
      const std::vector<std::string> names = rule.names();
      const std::string& text = std::get<std::string>(value);
      if (std::find(names.begin(), names.end(), text) != names.end()) break;
      TESSERA_FAIL(InvalidArgument, flag, ": expected one of ", detail::join_names(names),
                   ", got '", text, "'");
    }
    case OptionRule::Custom: rule.custom(config); break;
    case OptionRule::RefusedBy: {
      const ParallelMode mode = config.mode();
      TESSERA_CHECK(value == spec.default_value || (rule.modes & mode_bit(mode)) == 0,
                    InvalidArgument, "--parallel ", to_string(mode), ": ", flag, " ", rule.why);
      break;
    }
  }
}

}  // namespace

std::span<const OptionSpec> option_table() {
  static const std::vector<OptionSpec> table = build_table();
  return table;
}

const OptionSpec& option_spec(std::string_view name) {
  for (const OptionSpec& spec : option_table())
    if (spec.name == name) return spec;
  TESSERA_FAIL(InvalidArgument, "unknown option '", name, "'");
}

std::vector<std::string> option_choices(const OptionSpec& spec) {
  for (const OptionRule& rule : spec.rules)
    if (rule.kind == OptionRule::OneOf) return rule.names();
  return {};
}

OptionValue parse_option_text(const OptionSpec& spec, const std::string& text) {
  switch (spec.type) {
    case OptionType::Bool:
      if (text == "true" || text == "on" || text == "1" || text == "yes") return true;
      if (text == "false" || text == "off" || text == "0" || text == "no") return false;
      TESSERA_FAIL(InvalidArgument, spec.flag, ": expected true or false, got '", text, "'");
    case OptionType::Int: return parse_integer<std::int64_t>(spec.flag, text);
    case OptionType::UInt: return parse_integer<std::uint64_t>(spec.flag, text);
    case OptionType::Float: {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      TESSERA_CHECK(!text.empty() && end == text.c_str() + text.size(), InvalidArgument, spec.flag,
                    ": expected a number, got '", text, "'");
      return v;
    }
    case OptionType::String: return text;
  }
  TESSERA_FAIL(Internal, spec.flag, ": unknown option type");
}

void check_options(const TrainConfig& config) {
  for (const OptionSpec& spec : option_table()) {
    const OptionValue value = spec.get(config);
    if (const double* x = std::get_if<double>(&value)) {
      TESSERA_CHECK(std::isfinite(*x), InvalidArgument, spec.flag, " must be a finite number, got ",
                    *x);
    }
    for (const OptionRule& rule : spec.rules) {
      if (rule.only_adaptive && !config.adaptive()) continue;
      check_rule(spec, rule, value, config);
    }
  }
}

std::vector<std::pair<std::string, OptionValue>> summary_values(const TrainConfig& config) {
  std::vector<std::pair<std::string, OptionValue>> values;
  for (const OptionSpec& spec : option_table()) {
    if (spec.record == RecordKind::ReportedAs || spec.record == RecordKind::NotRecorded) continue;
    if (spec.record == RecordKind::IdentityIfAdaptive && !config.adaptive()) continue;
    values.emplace_back(
        spec.name, spec.record_text ? OptionValue(spec.record_text(config)) : spec.get(config));
  }
  return values;
}

std::vector<std::pair<std::string, std::string>> identity_values(const TrainConfig& config) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const OptionSpec& spec : option_table()) {
    if (spec.record == RecordKind::Identity) {
      values.emplace_back(
          spec.flag, spec.record_text ? spec.record_text(config) : option_text(spec.get(config)));
    } else if (spec.record == RecordKind::IdentityUnlessDefault) {
      if (spec.get(config) != spec.default_value)
        values.emplace_back(spec.flag, option_text(spec.get(config)));
    } else if (spec.record == RecordKind::IdentityUnless) {
      const std::string text = option_text(spec.get(config));
      if (text != spec.record_key) values.emplace_back(spec.flag, text);
    } else if (spec.record == RecordKind::IdentityIfAdaptive) {
      values.emplace_back(spec.flag, config.adaptive() ? option_text(spec.get(config)) : "-");
    }
  }
  return values;
}

std::string option_text(const OptionValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "on" : "off";
  if (const std::int64_t* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  if (const std::uint64_t* u = std::get_if<std::uint64_t>(&value)) return std::to_string(*u);
  if (const double* d = std::get_if<double>(&value)) {
    std::ostringstream os;
    os.precision(9);
    os << *d;
    return os.str();
  }
  return std::get<std::string>(value);
}

}  // namespace tessera
