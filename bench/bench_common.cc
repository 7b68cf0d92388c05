// SPDX-License-Identifier: Apache-2.0
// The shared benchmark helpers of bench_common.h: scratch directories, JSON lines, formatting,
// and child processes by fork/exec with their output in log files.
#include "bench/bench_common.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "core/error.h"
#include "engine/system.h"

namespace tessera {
namespace {

// In the forked child: the extra environment, stdout/stderr into the log files, then exec.
[[noreturn]] void exec_child(const std::vector<std::string>& argv,
                             const std::vector<std::string>& env, const std::string& out_file,
                             const std::string& err_file) {
  for (const std::string& entry : env) ::putenv(const_cast<char*>(entry.c_str()));
  const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out >= 0) ::dup2(out, STDOUT_FILENO);
  if (err >= 0) ::dup2(err, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  std::fprintf(stderr, "cannot execute %s: %s\n", args[0], std::strerror(errno));
  ::_exit(127);
}

}  // namespace

ScratchDir::ScratchDir(const std::filesystem::path& parent) {
  std::string pattern = (parent / "tessera_bench_XXXXXX").string();
  TESSERA_CHECK(::mkdtemp(pattern.data()) != nullptr, Io, "cannot create a directory in ",
                parent.string(), ": ", std::strerror(errno));
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void JsonLines::emit(const char* bench, const nlohmann::ordered_json& fields) {
  nlohmann::ordered_json line = {{"bench", bench}};
  line.update(fields);
  const std::string text = line.dump();
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  all_ += text + '\n';
}

std::string fixed(double value, int digits) {
  if (std::isnan(value)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string join(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& w : words) line += (line.empty() ? "" : " ") + w;
  return line;
}

std::string program_path(const char* name, const char* built) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : built;
}

double run_child(const char* program, const std::vector<std::string>& argv,
                 const std::vector<std::string>& env, const std::filesystem::path& log) {
  const std::string out_file = log.string() + ".out", err_file = log.string() + ".err";
  std::fflush(stdout);
  std::fflush(stderr);
  Stopwatch watch;
  const pid_t pid = ::fork();
  TESSERA_CHECK(pid >= 0, Io, "fork failed: ", std::strerror(errno));
  if (pid == 0) exec_child(argv, env, out_file, err_file);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    TESSERA_CHECK(errno == EINTR, Io, "waitpid failed: ", std::strerror(errno));
  }
  const double seconds = watch.seconds();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return seconds;
  const std::string how = WIFEXITED(status)
                              ? "exited with status " + std::to_string(WEXITSTATUS(status))
                              : "was killed by signal " + std::to_string(WTERMSIG(status));
  std::fprintf(stderr, "%s: this command %s after %.1f s:\n  %s %s\n"
               "---- its stderr ----\n%s---- its stdout ----\n%s--------\n",
               program, how.c_str(), seconds, join(env).c_str(), join(argv).c_str(),
               read_text(err_file).c_str(), read_text(out_file).c_str());
  throw std::runtime_error(std::filesystem::path(argv[0]).filename().string() + " " + how +
                           " (its output is above)");
}

std::vector<std::string> child_env(int threads) {
  return {"OMP_NUM_THREADS=" + std::to_string(threads), "OPENBLAS_NUM_THREADS=1"};
}

double load_average() {
  double avg[1];
  return ::getloadavg(avg, 1) == 1 ? avg[0] : -1.0;
}

nlohmann::ordered_json number(double v) {
  return std::isnan(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v);
}

EpochTimes read_epoch_times(const std::filesystem::path& metrics, int warmup_epochs) {
  std::ifstream in(metrics);
  std::vector<double> epoch_s, comm_s, hidden_s, eval_s;
  EpochTimes t;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::ordered_json record = nlohmann::ordered_json::parse(line);
    const double seconds = record.at("epoch_s").get<double>();
    const double evaluation = record.value("eval_s", 0.0);
    if (evaluation > 0.0) {
      if (std::isnan(t.first_eval_s)) {
        t.first_eval_s = evaluation;
      } else {
        eval_s.push_back(evaluation);
      }
    }
    if (record.at("epoch").get<int>() <= warmup_epochs) {
      if (record.at("run").get<int>() == 0 && record.at("epoch").get<int>() == 1)
        t.first_epoch_s = seconds;
      continue;
    }
    epoch_s.push_back(seconds);
    comm_s.push_back(record.at("comm_s").get<double>());
    hidden_s.push_back(record.at("comm_hidden_s").get<double>());
  }
  TESSERA_CHECK(!epoch_s.empty(), InvalidInput, metrics.string(), ": no timed epoch");
  t.epoch_s = median(epoch_s);
  t.epoch_min_s = *std::min_element(epoch_s.begin(), epoch_s.end());
  t.epoch_max_s = *std::max_element(epoch_s.begin(), epoch_s.end());
  t.comm_s = median(comm_s);
  t.hidden_s = median(hidden_s);
  if (!eval_s.empty()) t.eval_s = median(eval_s);
  return t;
}

}  // namespace tessera
