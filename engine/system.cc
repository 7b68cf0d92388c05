// SPDX-License-Identifier: Apache-2.0
// Stopwatch helpers, peak RSS via getrusage, statistics, atomic file writes, stop signals.
#include "engine/system.h"

#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>

#include "core/error.h"

namespace tessera {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void record_stop_signal(int signal_number) { g_stop_signal = signal_number; }

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal_number : {SIGUSR1, SIGTERM}) {
    TESSERA_CHECK(sigaction(signal_number, &action, nullptr) == 0, Internal,
                  "sigaction(", signal_number, ") failed: ", std::strerror(errno));
  }
}

int stop_signal() { return g_stop_signal; }
void clear_stop_signal() { g_stop_signal = 0; }

std::uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                               : 0;
}

void release_free_heap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

std::uint64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

namespace {

// A "Name:   1234 kB" line of /proc/self/status, in bytes (0 when absent).
std::uint64_t status_kib(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(name + ":", 0) != 0) continue;
    return std::strtoull(line.c_str() + name.size() + 1, nullptr, 10) * 1024;
  }
  return 0;
}

}  // namespace

std::uint64_t current_rss_bytes() { return status_kib("VmRSS"); }
std::uint64_t rss_peak_since_reset() { return status_kib("VmHWM"); }

bool reset_rss_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2) return upper;
  double lower = *std::max_element(values.begin(), values.begin() + mid);
  return 0.5 * (lower + upper);
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double stddev(const std::vector<double>& values) {
  if (values.size() < 2) return 0.0;
  double m = mean(values), sum_sq = 0.0;
  for (double v : values) sum_sq += (v - m) * (v - m);
  return std::sqrt(sum_sq / static_cast<double>(values.size() - 1));
}

void write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  });
}

bool write_all(int fd, const void* data, std::size_t bytes) {
  const char* next = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, next, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    next += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

void write_file_atomic(const std::filesystem::path& path,
                       const std::function<void(std::ostream&)>& write) {
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TESSERA_CHECK(out.good(), Io, "cannot open '", tmp.string(), "' for writing: ",
                  std::strerror(errno));
    write(out);
    out.flush();
    if (!out.good()) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      TESSERA_FAIL(Io, "writing '", tmp.string(), "' failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    TESSERA_FAIL(Io, "cannot rename '", tmp.string(), "' to '", path.string(), "': ", ec.message());
  }
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string line;
  std::size_t start = 0;
  while (start < all.size()) {
    std::size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    std::string arg = all.substr(start, end - start);
    const bool plain = !arg.empty() && arg.find_first_of(" \t'\"\\$`") == std::string::npos;
    if (!plain) {  // single quotes, with a ' written as '\''
      std::string quoted = "'";
      for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      arg = quoted + "'";
    }
    line += (line.empty() ? "" : " ") + arg;
    start = end + 1;
  }
  return line;
}

}  // namespace tessera
