// SPDX-License-Identifier: Apache-2.0
// What a training run tells the outside world: the per-epoch metrics file (one JSON object per
// line, streamed to FILE as each epoch ends, to follow with tail -f), the summary JSON (stable
// keys, written atomically once the run has ended: a metrics file is complete when its summary
// exists) and the human progress lines on stderr.
// Keys ending in "_s", starting with "peak_rss_bytes", and the partitioner's "seconds" are
// measurements; everything else is deterministic.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "engine/mode_runner.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "partition/graph_part.h"
#include "partition/partition_plan.h"

namespace tessera {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Creates (or empties) `path`; an empty path makes a writer that writes nothing. Every line
  // carries the parallel mode, stages and chunks.
  MetricsWriter(const std::string& path, const std::string& metric, ParallelInfo parallel = {});
  // Closes the file; one never committed (a run that failed) is removed.
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Appends the epoch's line with one write(2): a reader sees whole lines only.
  void write(const EpochRecord& record);
  void commit();  // closes the file and keeps it: the run finished, or stopped to continue later

 private:
  std::string path_;
  std::string metric_;
  ParallelInfo parallel_;
  int fd_ = -1;
  bool committed_ = false;
};

// What the summary says beyond the runs' results: the options (as the option table records them,
// engine/option_table.h) and what the run resolved. Pointers must be non-null, except
// `partition` (absent on ranks other than 0 when rank 0 partitioned in process).
// Where and from what a run came, recorded under the summary's "provenance" (it differs between
// runs of the same configuration: compare summaries without it), with rank 0's CPU kernels and
// BLAS (core/cpu/dispatch.h).
struct Provenance {
  std::string version;             // Tessera's
  std::string git_commit;          // of the source tree it was built from
  std::string command;             // the process's command line (rank 0)
  std::vector<std::string> hosts;  // every rank's host, in rank order
  std::string slurm_job_id;        // empty outside Slurm
  std::string slurm_array_task;    // "JOB_TASK" in a job array, else empty
};

struct RunInfo {
  const TrainConfig* config = nullptr;
  const DatasetInfo* dataset = nullptr;
  const GraphTotals* totals = nullptr;
  int ranks = 1;
  std::string partition_method = "none";  // metis | random | block | none (one rank)
  const PartitionStats* partition = nullptr;
  double load_s = 0.0;
  double node_order_s = 0.0;  // finding the node order and renumbering (rank 0; 0 for none)
  double setup_s = 0.0;
  double total_s = 0.0;
  std::uint64_t peak_rss_bytes_max = 0;  // over ranks
  std::uint64_t peak_rss_bytes_sum = 0;
  std::vector<std::uint64_t> peak_rss_bytes_per_rank;  // (ranks)
  ParallelInfo parallel;
  Provenance provenance;
};

// The summary JSON text (one object, newline-terminated).
std::string summary_json(const RunInfo& info, const std::vector<RunResult>& results);

// "Run 01 | Epoch 0005 | Loss 1.2345 | Train 45.00% | Valid 40.00% | Test 41.00% | 12.3 ms",
// followed by "| comm 3.1 ms (62% hidden) | halo 1.20 MB" when bytes crossed ranks.
std::string progress_line(const EpochRecord& record, const std::string& metric);
// OGB's Logger's report (its labels and meanings): a run's "Run 01:" block (Highest Train,
// Highest Valid, Final Train and Final Test, the last two at the epoch of the highest valid) and
// the "All runs:" block with mean ± sample std, then one line with the last epoch's figures.
std::string run_report(const RunResult& run);
std::string final_report(const std::vector<RunResult>& results, const std::string& metric);

}  // namespace tessera
