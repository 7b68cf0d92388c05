// What a training run tells the outside world: the per-epoch metrics file (one JSON object per
// line, streamed to FILE.tmp and renamed to FILE when the run completes, removed on failure),
// the summary JSON (stable keys, written atomically) and the human progress lines on stderr.
// Keys ending in "_s" and "peak_rss_bytes" are measurements; everything else is deterministic.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "engine/train_config.h"
#include "engine/trainer.h"

namespace tessera {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Opens path + ".tmp"; an empty path makes a writer that writes nothing.
  MetricsWriter(const std::string& path, const std::string& metric);
  ~MetricsWriter();  // removes the temporary file unless commit() ran
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void write(const EpochRecord& record);
  void commit();  // renames FILE.tmp to FILE

 private:
  std::string path_;
  std::string metric_;
  std::ofstream out_;
  bool committed_ = false;
};

struct RunInfo {
  const TrainConfig* config = nullptr;
  const Dataset* dataset = nullptr;
  std::int64_t graph_edges = 0;  // entries of the normalised operator (with self loops for GCN)
  double load_s = 0.0;
  double setup_s = 0.0;
  double total_s = 0.0;
};

// The summary JSON text (one object, newline-terminated).
std::string summary_json(const RunInfo& info, const std::vector<RunResult>& results);

// "Run 01 | Epoch 0005 | Loss 1.2345 | Train 45.00% | Valid 40.00% | Test 41.00% | 12.3 ms"
std::string progress_line(const EpochRecord& record, const std::string& metric);
// The OGB-Logger style closing lines: highest valid, test at best valid, final test; with
// mean ± std over runs when there are several.
std::string final_report(const std::vector<RunResult>& results, const std::string& metric);

}  // namespace tessera
