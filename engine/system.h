// SPDX-License-Identifier: Apache-2.0
// Small process-level utilities the engine and apps share: a monotonic stopwatch, peak
// resident memory, the median of a sample, writing a file atomically (temp file + rename), and
// the stop request that SIGUSR1 / SIGTERM turn into (see Trainer::train).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// This process's command line as one line, arguments that need it quoted ("" when unknown).
std::string command_line();

// Peak resident set size of this process so far, in bytes (getrusage).
std::uint64_t peak_rss_bytes();
// Resident bytes now, and at their highest since the last reset_rss_peak() (Linux's VmRSS and
// VmHWM; 0 where /proc does not say). reset_rss_peak sets the high-water mark to the current
// size (/proc/self/clear_refs), for a phase's own peak; false where it cannot.
std::uint64_t current_rss_bytes();
std::uint64_t rss_peak_since_reset();
bool reset_rss_peak();
// Hands the free memory inside the heap back to the system (glibc's malloc_trim; nothing
// elsewhere). The blocks a training step frees every epoch leave free chunks between live small
// ones that malloc does not return by itself: at 4 ranks on one node a rank's heap grew by tens
// of MiB per thousand epochs while its live memory stayed under 20 MiB (bench/soak.py).
void release_free_heap();
// This machine's physical memory in bytes (sysconf).
std::uint64_t physical_memory_bytes();

// Median of the values (mean of the two middle ones for an even count); 0 for none.
double median(std::vector<double> values);
// Sample mean and standard deviation (n - 1 denominator; 0 for fewer than two values).
double mean(const std::vector<double>& values);
double stddev(const std::vector<double>& values);

// Writes `contents` to `path` through a temporary file in the same directory and a rename, so
// readers never see a half-written file. Throws Io naming the path on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);
// The same with the contents streamed by `write` (for files too large to build in memory first).
void write_file_atomic(const std::filesystem::path& path,
                       const std::function<void(std::ostream&)>& write);
// write(2) until every byte is written (EINTR retried); false on an error (errno set).
bool write_all(int fd, const void* data, std::size_t bytes);

// Stop requests. install_stop_handlers() makes SIGUSR1 (Slurm's warning before a time limit or
// preemption) and SIGTERM (scancel, scontrol requeue, the time limit itself) record the signal
// instead of ending the process; the trainer polls stop_signal() once per epoch and all ranks
// agree on it. Idempotent; the handlers only store the signal number.
void install_stop_handlers();
// The last stop signal received since start or clear_stop_signal(); 0 when none.
int stop_signal();
void clear_stop_signal();

}  // namespace tessera
