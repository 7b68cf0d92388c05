// SPDX-License-Identifier: Apache-2.0
// ProgressBar draws with carriage returns on a terminal (a pseudo-terminal here) and writes one
// plain line into a file, as a Slurm log is.
#include "datasets/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

// Everything written to `file` so far.
std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text += static_cast<char>(c);
  return text;
}

TEST(ProgressBar, IntoAFileOneLineWithoutCarriageReturns) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    tessera::ProgressBar bar("read x.csv.gz", 2'500'000, true, file);
    bar.update(1'000'000);
    bar.update(2'000'000);
    bar.finish();
  }
  const std::string text = contents(file);
  std::fclose(file);
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.rfind("read x.csv.gz: 2.5 MB in ", 0), 0u) << text;
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line: " << text;
}

TEST(ProgressBar, OnATerminalABarRedrawnInPlace) {
  int leader = -1, follower = -1;
  ASSERT_EQ(::openpty(&leader, &follower, nullptr, nullptr, nullptr), 0);
  std::FILE* terminal = ::fdopen(follower, "w");
  ASSERT_NE(terminal, nullptr);
  {
    tessera::ProgressBar bar("read y", 100, true, terminal);
    bar.finish();
  }
  std::fflush(terminal);
  ::fcntl(leader, F_SETFL, O_NONBLOCK);
  char buffer[512];
  const ssize_t n = ::read(leader, buffer, sizeof buffer);
  std::fclose(terminal);
  ::close(leader);
  ASSERT_GT(n, 0);
  const std::string text(buffer, static_cast<std::size_t>(n));
  EXPECT_EQ(text.rfind("\rread y [", 0), 0u) << text;
  EXPECT_NE(text.find("100%"), std::string::npos) << text;
}

TEST(ProgressBar, DisabledWritesNothing) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    tessera::ProgressBar bar("read z", 10, false, file);
    bar.update(5);
    bar.finish();
  }
  EXPECT_EQ(contents(file), "");
  std::fclose(file);
}

}  // namespace
