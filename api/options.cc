// SPDX-License-Identifier: Apache-2.0
// The public view of the option table (include/tessera/options.h): what train_gcn and the Python
// module present, and setting or reading an option by name. Errors become
// tessera::OptionError (a std::invalid_argument) naming the option, as everywhere at the API
// boundary.
#include <sstream>
#include <stdexcept>

#include "api/api_support.h"
#include "core/error.h"
#include "engine/option_table.h"
#include "tessera/options.h"

namespace tessera {
namespace {

const char* type_name(OptionType type) {
  switch (type) {
    case OptionType::Bool: return "bool";
    case OptionType::Int:
    case OptionType::UInt: return "int";
    case OptionType::Float: return "float";
    case OptionType::String: return "string";
  }
  return "string";
}

// A default as --help shows it: "true"/"false", numbers in their shortest form (0.01).
std::string default_text(const OptionValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const double* d = std::get_if<double>(&value)) {
    std::ostringstream os;
    os << *d;
    return os.str();
  }
  return option_text(value);
}

OptionInfo info_of(const OptionSpec& spec) {
  OptionInfo info;
  info.name = spec.name;
  info.flag = spec.cli_flag ? spec.flag : "";
  info.switches = spec.switches;
  info.cli_absent = spec.cli_absent;
  info.type = type_name(spec.type);
  info.choices = option_choices(spec);
  info.help = spec.help;
  if (!info.choices.empty()) info.help += " (one of: " + detail::join_names(info.choices) + ")";
  info.default_value = spec.default_value;
  info.default_text = default_text(spec.default_value);
  switch (spec.record) {
    case RecordKind::ReportedAs: info.summary_key = spec.record_key; break;
    case RecordKind::NotRecorded: info.not_recorded = spec.record_key; break;
    default: info.summary_key = spec.name;
  }
  info.identity =
      spec.record == RecordKind::Identity || spec.record == RecordKind::IdentityUnlessDefault ||
      spec.record == RecordKind::IdentityUnless || spec.record == RecordKind::IdentityIfAdaptive;
  return info;
}

template <class F>
auto at_boundary(F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error& e) {
    throw OptionError(e.message());
  }
}

}  // namespace

const std::vector<OptionInfo>& option_infos() {
  static const std::vector<OptionInfo> infos = [] {
    std::vector<OptionInfo> all;
    for (const OptionSpec& spec : option_table()) all.push_back(info_of(spec));
    return all;
  }();
  return infos;
}

void set_option(Options& options, const std::string& name, const OptionValue& value) {
  at_boundary([&] {
    const OptionSpec& spec = option_spec(name);
    spec.set(options, value, spec.flag);
  });
}

void set_option_text(Options& options, const std::string& name, const std::string& text) {
  at_boundary([&] {
    const OptionSpec& spec = option_spec(name);
    spec.set(options, parse_option_text(spec, text), spec.flag);
  });
}

OptionValue get_option(const Options& options, const std::string& name) {
  return at_boundary([&] { return option_spec(name).get(options); });
}

void check_options(const Options& options) {
  at_boundary([&] { (void)api::to_config(options); });
}

}  // namespace tessera
