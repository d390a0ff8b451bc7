// tests/train/cli_capture.h: train_lm's command line run in-process with its output captured
// (the train tests only: it needs train_lm's cli.h).
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "options.h"

namespace train_test {

// What `train_lm <args...>` exits with and prints (stdout, then stderr), run in-process.
struct RunResult {
  int code;
  std::string out;
};
inline RunResult run_captured(const std::vector<std::string>& args) {
  std::vector<std::string> a = {"train_lm"};
  a.insert(a.end(), args.begin(), args.end());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int code = train_lm::run_cli(a);
  std::string out = ::testing::internal::GetCapturedStdout();
  out += ::testing::internal::GetCapturedStderr();
  return {code, out};
}

}  // namespace train_test
