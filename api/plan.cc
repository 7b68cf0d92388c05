// SPDX-License-Identifier: Apache-2.0
// tessera::plan (include/tessera/session.h) over the engine's planner (engine/planner.h).
#include <span>

#include "api/api_support.h"
#include "engine/planner.h"
#include "engine/system.h"

namespace tessera {

Plan plan(const Options& options, const std::vector<int>& ranks, const std::string& json_path) {
  try {
    const TrainConfig config = api::to_config(options);
    const PlanReport report = make_plan(config, std::span<const int>(ranks), config.progress());
    Plan out{plan_table(report), plan_json(report)};
    if (!json_path.empty()) write_file_atomic(json_path, out.json);
    return out;
  } catch (const Error& e) {
    api::rethrow_public(e);
  }
}

}  // namespace tessera
