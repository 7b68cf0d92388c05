// What a training run tells the outside world: the per-epoch metrics file (one JSON object per
// line, streamed to FILE.tmp and renamed to FILE when the run completes, removed on failure),
// the summary JSON (stable keys, written atomically) and the human progress lines on stderr.
// Keys ending in "_s", starting with "peak_rss_bytes", and the partitioner's "seconds" are
// measurements; everything else is deterministic.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "partition/graph_part.h"
#include "partition/partition_plan.h"
#include "engine/train_config.h"
#include "engine/trainer.h"

namespace tessera {

// How the ranks shared the work: the mode ("single", "graph", "pipeline" or "hybrid"), the
// graph parts, the pipeline stages per part with the first layer of each, and the chunks.
struct ParallelInfo {
  std::string mode = "single";
  int parts = 1;
  int stages = 1;
  int chunks = 1;
  std::vector<int> stage_first_layer{0};  // (stages)
};
// The parallel layout of a trainer (mode "single" for graph mode on one rank).
ParallelInfo parallel_info(const Trainer& trainer, int ranks);

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Opens path + ".tmp"; an empty path makes a writer that writes nothing. Every line carries
  // the parallel mode, stages and chunks.
  MetricsWriter(const std::string& path, const std::string& metric, ParallelInfo parallel = {});
  ~MetricsWriter();  // removes the temporary file unless commit() ran
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void write(const EpochRecord& record);
  void commit();  // renames FILE.tmp to FILE

 private:
  std::string path_;
  std::string metric_;
  ParallelInfo parallel_;
  std::ofstream out_;
  bool committed_ = false;
};

// What the summary says beyond the runs' results. Pointers must be non-null, except
// `partition` (absent on ranks other than 0 when rank 0 partitioned in process).
struct RunInfo {
  const TrainConfig* config = nullptr;
  const DatasetInfo* dataset = nullptr;
  const GraphTotals* totals = nullptr;
  int ranks = 1;
  std::string partition_method = "none";  // metis | random | block | none (one rank)
  const PartitionStats* partition = nullptr;
  double load_s = 0.0;
  double setup_s = 0.0;
  double total_s = 0.0;
  std::uint64_t peak_rss_bytes_max = 0;  // over ranks
  std::uint64_t peak_rss_bytes_sum = 0;
  std::vector<std::uint64_t> peak_rss_bytes_per_rank;  // (ranks)
  ParallelInfo parallel;
};

// The summary JSON text (one object, newline-terminated).
std::string summary_json(const RunInfo& info, const std::vector<RunResult>& results);

// "Run 01 | Epoch 0005 | Loss 1.2345 | Train 45.00% | Valid 40.00% | Test 41.00% | 12.3 ms",
// followed by "| comm 3.1 ms (62% hidden) | halo 1.20 MB" when bytes crossed ranks.
std::string progress_line(const EpochRecord& record, const std::string& metric);
// The OGB-Logger style closing lines: highest valid, test at best valid, final test; with
// mean ± std over runs when there are several.
std::string final_report(const std::vector<RunResult>& results, const std::string& metric);

}  // namespace tessera
