// SPDX-License-Identifier: Apache-2.0
// Plan files through the hdf5_io layer: attributes of "/" (format, version, method, dataset name
// and fingerprint, K, N, edge cut) and /owner (int32, chunked with checksums).
#include "partition/plan_file.h"

#include <unistd.h>

#include <system_error>

#include "core/error.h"
#include "datasets/dataset.h"
#include "datasets/hdf5_io.h"

namespace tessera {
namespace {

constexpr const char* kPlanFormat = "tessera-plan";
constexpr std::int64_t kPlanVersion = 1;

}  // namespace

void write_plan_file(const std::filesystem::path& path, const PlanFile& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TESSERA_CHECK(!fs::exists(path, ec), InvalidArgument, path.string(),
                ": exists; choose a new plan file");
  const fs::path temporary = path.string() + ".tmp-" + std::to_string(::getpid());
  try {
    hdf5::Writer out(temporary, path.string());
    out.enable_checksums();
    out.attribute("format", std::string(kPlanFormat));
    out.attribute("format_version", kPlanVersion);
    out.attribute("method", file.method);
    out.attribute("dataset_name", file.dataset);
    out.attribute("dataset_fingerprint", file.dataset_fingerprint);
    out.attribute("num_parts", std::int64_t{file.plan.num_parts});
    out.attribute("num_nodes", static_cast<std::int64_t>(file.plan.owner.size()));
    out.attribute("edge_cut", file.edge_cut);
    out.array("/owner", hdf5::kInt32, file.plan.owner.data(),
              static_cast<std::int64_t>(file.plan.owner.size()), 1, 1, true);
    out.close();
    fs::rename(temporary, path);
  } catch (const fs::filesystem_error& error) {
    fs::remove(temporary, ec);
    TESSERA_FAIL(Io, path.string(), ": ", error.code().message());
  } catch (...) {
    fs::remove(temporary, ec);
    throw;
  }
}

PlanFile read_plan_file(const std::filesystem::path& path) {
  std::error_code ec;
  TESSERA_CHECK(std::filesystem::is_regular_file(path, ec), InvalidArgument, path.string(),
                ": no such plan file");
  hdf5::Reader in(path, path.string());
  TESSERA_CHECK(in.has_attribute("format") && in.string_attribute("format") == kPlanFormat,
                InvalidInput, path.string(), ": not a Tessera plan file (format '", kPlanFormat,
                "' expected; partition_distributed writes them)");
  const std::int64_t version = in.int64_attribute("format_version");
  TESSERA_CHECK(version == kPlanVersion, InvalidInput, path.string(), ": plan format version ",
                version, ", this build reads version ", kPlanVersion);
  PlanFile file;
  file.method = in.string_attribute("method");
  file.dataset = in.string_attribute("dataset_name");
  file.dataset_fingerprint = in.uint64_attribute("dataset_fingerprint");
  file.edge_cut = in.int64_attribute("edge_cut");
  const std::int64_t parts = in.int64_attribute("num_parts");
  const std::int64_t nodes = in.int64_attribute("num_nodes");
  TESSERA_CHECK(parts >= 1 && parts <= (1 << 20) && nodes >= parts, InvalidInput,
                in.attribute_where("num_parts"), ": ", parts, " parts of ", nodes,
                " nodes (1 <= parts <= nodes expected)");
  file.plan.num_parts = static_cast<int>(parts);
  file.plan.owner = in.vector<std::int32_t>("/owner", hdf5::kInt32, nodes);
  for (std::size_t v = 0; v < file.plan.owner.size(); ++v) {
    const std::int32_t p = file.plan.owner[v];
    TESSERA_CHECK(p >= 0 && p < file.plan.num_parts, InvalidInput, in.where("/owner"), ": node ", v,
                  " has part ", p, ", outside [0, ", parts, ")");
  }
  return file;
}

void check_plan_matches(const PlanFile& file, const std::string& what, std::int64_t num_nodes,
                        std::uint64_t fingerprint, int parts) {
  const auto n = static_cast<std::int64_t>(file.plan.owner.size());
  TESSERA_CHECK(n == num_nodes && file.dataset_fingerprint == fingerprint, InvalidInput, what,
                ": a plan of another dataset (", file.dataset, ", ", n, " nodes, fingerprint ",
                fingerprint_hex(file.dataset_fingerprint), "; this one has ", num_nodes,
                " nodes, fingerprint ", fingerprint_hex(fingerprint), ")");
  TESSERA_CHECK(file.plan.num_parts == parts, InvalidInput, what, ": a plan of ",
                file.plan.num_parts, " parts, but this job has ", parts, " ranks (one part each)");
}

}  // namespace tessera
