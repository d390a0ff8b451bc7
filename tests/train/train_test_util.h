// tests/train/train_test_util.h: helpers shared by the train tests: a fresh temporary
// directory per test, error-message checks, file byte access.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "xgrad/error.h"
#include "xgrad/io/checkpoint.h"

namespace train_test {

namespace fs = std::filesystem;

// `train_lm train` on `data` into `checkpoint_dir` with the tests' tiny model (context 8,
// emb 16, 2 heads, 1 layer) and no progress bar, then `extra` (each flag at most once).
inline std::vector<std::string> tiny_train_args(const fs::path& data, const fs::path& checkpoint_dir,
                                                const std::vector<std::string>& extra) {
  std::vector<std::string> a = {"train",
                                "--data",
                                data.string(),
                                "--checkpoint-dir",
                                checkpoint_dir.string(),
                                "--context-length",
                                "8",
                                "--emb-dim",
                                "16",
                                "--n-heads",
                                "2",
                                "--n-layers",
                                "1",
                                "--no-progress"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The checkpoint under `path` as train_lm writes it (xgrad/io/checkpoint.h): both files, or for
// generation the model alone (and the train state when there is one).
inline xgrad::io::Checkpoint load_checkpoint_files(const fs::path& path, bool need_train_state = true) {
  const std::string model = "model.safetensors", state = "train_state.safetensors";
  return need_train_state ? xgrad::io::load_checkpoint(path, {model, state})
                          : xgrad::io::load_checkpoint(path, {model}, {state});
}

// A small corpus: one sentence, 60 times.
inline std::string ishmael_corpus() {
  std::string s;
  for (int i = 0; i < 60; ++i) s += "Call me Ishmael. Some years ago, never mind how long.\n";
  return s;
}

// A directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("xgrad_train_") + (info ? info->test_suite_name() : "x") + "_" +
                       (info ? info->name() : "y") + "_" + std::to_string(::getpid());
    path = fs::temp_directory_path() / name;
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const std::string& s) const { return path / s; }
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Expects `f` to throw an exception of type E whose message contains every one of `parts`.
template <class E = xgrad::Error, class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected an exception mentioning '" << *parts.begin() << "'";
  } catch (const E& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

}  // namespace train_test
