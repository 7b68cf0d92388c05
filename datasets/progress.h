// SPDX-License-Identifier: Apache-2.0
// ProgressBar: a one-line progress bar on stderr for long loads (bytes done of a known total),
// redrawn at most a few times per second — on a terminal only: into a file or a pipe (a Slurm
// log) it writes one line when done, without carriage returns. Disabled bars cost one branch
// per update.
// Relies on nothing but the standard library.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tessera {

class ProgressBar {
 public:
  // `total` is in the unit of update() (bytes here); enabled = false makes every call a no-op.
  // `out`: stderr unless a test says otherwise.
  ProgressBar(std::string label, std::uint64_t total, bool enabled, std::FILE* out = stderr);
  ~ProgressBar();  // finishes the line if it was drawn
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Sets the amount done so far (clamped to total); redraws when enough time has passed.
  void update(std::uint64_t done);
  // Draws 100 % and ends the line.
  void finish();
  bool enabled() const { return enabled_; }

 private:
  void draw(std::uint64_t done);

  std::string label_;
  std::uint64_t total_;
  bool enabled_;
  std::FILE* out_;
  bool terminal_;  // out_ is a terminal: the bar is drawn
  bool drawn_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tessera
