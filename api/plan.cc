// SPDX-License-Identifier: Apache-2.0
// tessera::plan (include/tessera/session.h) over the engine's planner (engine/planner.h).
#include <span>
#include <stdexcept>
#include <string>

#include "api/api_support.h"
#include "engine/planner.h"
#include "engine/system.h"

namespace tessera {

Plan plan(const Options& options, const std::vector<int>& ranks, const std::string& json_path) {
  try {
    // Planned with the CPU's step wherever it will run: a login node has no GPU to check.
    Options cpu = options;
    const bool gpu = options.device != "cpu";
    cpu.device = "cpu";
    const TrainConfig config = api::to_config(cpu);
    const PlanReport report =
        make_plan(config, std::span<const int>(ranks), config.progress(), gpu);
    Plan out{plan_table(report), plan_json(report)};
    if (!json_path.empty()) write_file_atomic(json_path, out.json);
    return out;
  } catch (const Error& e) {
    api::rethrow_public(e);
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("planning: ") + e.what());
  }
}

}  // namespace tessera
