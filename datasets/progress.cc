// SPDX-License-Identifier: Apache-2.0
// ProgressBar drawing: "\r<label> [#####     ]  45%  123.4 / 274.2 MB  3.1 s" on a terminal,
// "<label>: 274.2 MB in 3.1 s" once elsewhere.
#include "datasets/progress.h"

#include <unistd.h>

#include <algorithm>

namespace tessera {
namespace {
constexpr auto kRedrawInterval = std::chrono::milliseconds(200);
constexpr int kBarWidth = 30;
}  // namespace

ProgressBar::ProgressBar(std::string label, std::uint64_t total, bool enabled, std::FILE* out)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      out_(out),
      terminal_(enabled && ::isatty(::fileno(out)) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (drawn_ && !finished_) std::fputc('\n', out_);
}

void ProgressBar::update(std::uint64_t done) {
  if (!terminal_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  draw(done);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (!terminal_) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(out_, "%s: %.1f MB in %.1f s\n", label_.c_str(), static_cast<double>(total_) / 1e6,
                 seconds);
    std::fflush(out_);
    return;
  }
  draw(total_);
  std::fputc('\n', out_);
}

void ProgressBar::draw(std::uint64_t done) {
  done = std::min(done, total_);
  double fraction = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  int filled = static_cast<int>(fraction * kBarWidth);
  char bar[kBarWidth + 1];
  for (int i = 0; i < kBarWidth; ++i) bar[i] = i < filled ? '#' : ' ';
  bar[kBarWidth] = '\0';
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(out_, "\r%s [%s] %3d%%  %.1f / %.1f MB  %.1f s  ", label_.c_str(), bar,
               static_cast<int>(fraction * 100.0), static_cast<double>(done) / 1e6,
               static_cast<double>(total_) / 1e6, seconds);
  std::fflush(out_);
  drawn_ = true;
}

}  // namespace tessera
