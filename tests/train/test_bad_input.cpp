// tests/train/test_bad_input.cpp: nothing a user feeds train_lm gets a silent wrong answer,
// through the command line (run_cli in-process, as a user runs train_lm):
//   1 flipped header bytes (step, vocabulary, RNG state) are refused
//   2 out-of-range numbers are refused naming the flag, never clamped
//   3 a configuration that cannot fit in memory is refused with the figure; --dry-run
//   4 sampling parameters are validated as torch's samplers do (denormal temperature, top-p)
//   5 a directory a failed first run left (metrics, no checkpoint) can be started or resumed
//   6 a torn last line of metrics.csv does not block --resume
//   + leftover latest.tmp.<pid> files are cleaned; a vocabulary mismatch lists the characters
// Shapes whose element count overflows are tests/core/test_shape_overflow.cpp's.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "cli_capture.h"
#include "options.h"
#include "progress.h"
#include "train.h"
#include "train_test_util.h"

using namespace train_lm;
using train_test::expect_error;
using train_test::slurp;
using train_test::spit;
using train_test::TempDir;

using train_test::RunResult;

namespace {

std::string corpus_text() { return train_test::ishmael_corpus(); }

RunResult run(const std::vector<std::string>& args) { return train_test::run_captured(args); }

std::vector<std::string> train_args(const TempDir& tmp, std::initializer_list<std::string> extra,
                                    const std::string& ck = "ck") {
  std::vector<std::string> a = train_test::tiny_train_args(
      tmp / "corpus.txt", tmp / ck, {"--batch-size", "4", "--eval-iters", "2", "--sample-length", "10"});
  a.insert(a.end(), extra);
  return a;
}

std::vector<std::string> resume_args(const TempDir& tmp, std::initializer_list<std::string> extra) {
  std::vector<std::string> a = {"train", "--checkpoint-dir", (tmp / "ck").string(), "--resume",
                                "--no-progress"};
  a.insert(a.end(), extra);
  return a;
}

// Replaces the first occurrence of `from` (same length as `to`) in a file.
void patch(const fs::path& p, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::string bytes = slurp(p);
  auto at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << p;
  bytes.replace(at, from.size(), to);
  spit(p, bytes);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override { spdlog::set_level(spdlog::level::info); }
};

}  // namespace

// 1. The header is covered by a checksum: a changed step, vocabulary character or RNG byte
// is refused by --resume and generate.
TEST_F(BadInput, FlippedHeaderIsRefused) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  ASSERT_EQ(run(train_args(tmp, {"--steps", "4", "--eval-interval", "4"})).code, 0);
  const fs::path dir = tmp / "ck" / "step_00000004";
  const std::string model = slurp(dir / kModelFile), state = slurp(dir / kTrainStateFile);
  auto restore = [&] {
    spit(dir / kModelFile, model);
    spit(dir / kTrainStateFile, state);
  };

  patch(dir / kTrainStateFile, R"("step":"4")", R"("step":"5")");
  RunResult r = run(resume_args(tmp, {"--steps", "6"}));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "header checksum mismatch")) << r.out;
  EXPECT_FALSE(has(r.out, "resumed from")) << r.out;
  restore();

  // one vocabulary character, 'C' -> 'D' (still sorted, still one character): generate used
  // to print with the wrong characters
  patch(dir / kModelFile, R"(\"C\")", R"(\"D\")");
  r = run({"generate", "--checkpoint", (tmp / "ck").string(), "--prompt", "me", "--max-new-tokens", "5"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "header checksum mismatch")) << r.out;
  restore();

  // one character of the base64 RNG state
  {
    std::string bytes = slurp(dir / kTrainStateFile);
    auto at = bytes.find("\"rng.default\":\"");
    ASSERT_NE(at, std::string::npos);
    char& c = bytes[at + 40];
    c = c == 'A' ? 'B' : 'A';
    spit(dir / kTrainStateFile, bytes);
  }
  r = run(resume_args(tmp, {"--steps", "6"}));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "header checksum mismatch")) << r.out;
  restore();

  // untouched files still resume
  r = run(resume_args(tmp, {"--steps", "6"}));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "at step 4")) << r.out;
}

// 2. A number outside its flag's range is an error naming the flag (never clamped).
TEST_F(BadInput, OutOfRangeNumbersAreRefused) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"train", "--steps", "99999999999999999999"}, "--steps"},
      {{"train", "--steps", "2000000000000"}, "--steps"},
      {{"train", "--batch-size", "99999999999999999999"}, "--batch-size"},
      {{"train", "--context-length", "-99999999999999999999"}, "--context-length"},
      {{"train", "--emb-dim", "18446744073709551616"}, "--emb-dim"},
      {{"train", "--seed", "-1"}, "--seed"},
      {{"train", "--seed", "18446744073709551616"}, "--seed"},
      {{"train", "--threads", "4294967297"}, "--threads"},
      {{"train", "--keep-checkpoints", "4294967297"}, "--keep-checkpoints"},
      {{"train", "--lr", "1e400"}, "--lr"},
      {{"train", "--lr", "nan"}, "--lr"},
      {{"train", "--time-budget", "inf"}, "--time-budget"},
      {{"train", "--eval-interval", "1e3"}, "--eval-interval"},
      {{"train", "--top-k", "99999999999999999999"}, "--top-k"},
      {{"generate", "--max-new-tokens", "99999999999999999999"}, "--max-new-tokens"},
      {{"generate", "--seed", "-5"}, "--seed"},
  };
  for (const auto& [args, flag] : cases) {
    std::vector<std::string> a = {"train_lm"};
    a.insert(a.end(), args.begin(), args.end());
    ::testing::internal::CaptureStderr();
    CliParse p = parse_cli(a);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(p.kind, CliParse::kExit) << ::testing::PrintToString(args);
    EXPECT_EQ(p.exit_code, 2) << ::testing::PrintToString(args);
    EXPECT_TRUE(has(err, flag)) << ::testing::PrintToString(args) << ": " << err;
  }
  // the edges of the ranges are accepted
  auto p = parse_cli({"train_lm", "train", "--steps", "1000000000", "--seed", "18446744073709551615"});
  ASSERT_EQ(p.kind, CliParse::kTrain);
  EXPECT_EQ(p.train.steps, 1000000000);
  EXPECT_EQ(p.train.seed, 18446744073709551615ull);
}

// A saved option that does not fit its type ("steps": 2e118 cast to int64 is undefined
// behaviour) is refused by name; a fitting one is taken.
TEST_F(BadInput, SavedOptionsOutOfRangeAreRefused) {
  const GPTConfig model = parse_cli({"train_lm", "train"}).train.model;
  for (const char* steps : {"2e118", "1.5", "18446744073709551615", "true", "\"7\""}) {
    TrainOptions o = parse_cli({"train_lm", "train"}).train;
    const auto saved = nlohmann::json::parse(std::string("{\"steps\": ") + steps + "}");
    expect_error<ConfigError>([&] { merge_saved_options(o, saved, model); }, {"'steps'"});
  }
  TrainOptions o = parse_cli({"train_lm", "train"}).train;
  merge_saved_options(o, nlohmann::json::parse(R"({"steps": 4242, "seed": 18446744073709551615})"), model);
  EXPECT_EQ(o.steps, 4242);
  EXPECT_EQ(o.seed, 18446744073709551615ull);
}

// 3. Memory: a batch that cannot fit is refused before anything is allocated, naming the
// flags and the figure; --dry-run reports the estimate and writes nothing.
TEST_F(BadInput, MemoryIsEstimatedBeforeAllocating) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  RunResult r = run(train_args(tmp, {"--steps", "4", "--batch-size", "10000000000"}));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "--batch-size 10000000000")) << r.out;
  EXPECT_TRUE(has(r.out, "--context-length 8")) << r.out;
  EXPECT_TRUE(has(r.out, "GiB")) << r.out;
  EXPECT_FALSE(has(r.out, "bad_alloc")) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "ck" / "metrics.csv"));

  r = run(train_args(tmp, {"--steps", "4", "--dry-run"}));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "estimated memory: ")) << r.out;
  EXPECT_TRUE(has(r.out, "4096 parameters")) << r.out;  // 16-wide, 1 layer, 22 characters
  EXPECT_TRUE(has(r.out, "available: ")) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "ck")) << "--dry-run wrote into the checkpoint directory";
}

// 4. Sampling parameters as torch's samplers check them.
TEST_F(BadInput, SamplingParametersAreValidated) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  ASSERT_EQ(run(train_args(tmp, {"--steps", "2", "--eval-interval", "2"})).code, 0);
  auto gen = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = {"generate", "--checkpoint", (tmp / "ck").string(),
                                  "--prompt", "Call",         "--max-new-tokens",
                                  "12",       "--seed",       "3"};
    a.insert(a.end(), extra);
    return run(a);
  };
  RunResult greedy = gen({"--temperature", "0"});
  ASSERT_EQ(greedy.code, 0) << greedy.out;
  RunResult tiny = gen({"--temperature", "1e-300"});  // as good as greedy
  ASSERT_EQ(tiny.code, 0) << tiny.out;
  EXPECT_EQ(tiny.out, greedy.out);
  RunResult denormal = gen({"--temperature", "1e-310"});  // logits / T would overflow to inf
  EXPECT_EQ(denormal.code, 2) << denormal.out;
  EXPECT_TRUE(has(denormal.out, "--temperature")) << denormal.out;
  for (auto bad : {std::vector<std::string>{"--top-p", "0"},
                   {"--top-p", "1.5"},
                   {"--top-p", "nan"},
                   {"--top-k", "-1"},
                   {"--temperature", "-0.5"},
                   {"--temperature", "inf"}}) {
    RunResult b = run([&] {
      std::vector<std::string> a = {"generate", "--checkpoint", (tmp / "ck").string()};
      a.insert(a.end(), bad.begin(), bad.end());
      return a;
    }());
    EXPECT_EQ(b.code, 2) << ::testing::PrintToString(bad) << b.out;
    EXPECT_TRUE(has(b.out, bad[0])) << b.out;
  }
  // top-p (nucleus) sampling: a tiny top-p keeps only the most likely character = greedy
  RunResult nucleus = gen({"--temperature", "1", "--top-p", "1e-9"});
  ASSERT_EQ(nucleus.code, 0) << nucleus.out;
  EXPECT_EQ(nucleus.out, greedy.out);
  EXPECT_EQ(run(train_args(tmp, {"--steps", "2", "--top-p", "0.9", "--dry-run"}, "ck2")).code, 0);
}

// 5. A first run that stopped before its first checkpoint (NaN loss, out of memory) leaves a
// metrics file and no checkpoint: both a new run and --resume must start.
TEST_F(BadInput, FailedFirstRunIsRestartable) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  for (bool resume : {false, true}) {
    fs::remove_all(tmp / "ck");
    { MetricsLog leftover(tmp / "ck" / "metrics.csv", -1); }  // what run_train wrote before step 1
    ASSERT_FALSE(xgrad::io::find_checkpoint(tmp / "ck", kModelFile).has_value());
    RunResult r = resume ? run(train_args(tmp, {"--steps", "2", "--eval-interval", "2", "--resume"}))
                         : run(train_args(tmp, {"--steps", "2", "--eval-interval", "2"}));
    EXPECT_EQ(r.code, 0) << (resume ? "--resume: " : "new run: ") << r.out;
    EXPECT_EQ(slurp(tmp / "ck" / "latest"), "step_00000002\n");
    EXPECT_EQ(MetricsLog::read(tmp / "ck" / "metrics.csv").size(), 2u);
  }
  // --resume on a directory that holds nothing at all is still an error
  EXPECT_EQ(run(train_args(tmp, {"--resume"}, "nothing")).code, 1);
}

// 6. A torn last line (disk full, kill) is dropped; resume truncates to the checkpoint's step.
TEST_F(BadInput, TornMetricsLineDoesNotBlockResume) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  ASSERT_EQ(run(train_args(tmp, {"--steps", "4", "--eval-interval", "4"})).code, 0);
  const fs::path m = tmp / "ck" / "metrics.csv";
  spit(m, slurp(m) + "5,2.31,,0.0");  // the run died writing step 5's row
  RunResult r = run(resume_args(tmp, {"--steps", "6"}));
  EXPECT_EQ(r.code, 0) << r.out;
  auto rows = MetricsLog::read(m);
  ASSERT_EQ(rows.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rows[i].step, i + 1);
}

// Leftover latest.tmp.<pid> of a killed save are removed by the next save.
TEST_F(BadInput, LeftoverLatestTempFilesAreCleaned) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  ASSERT_EQ(run(train_args(tmp, {"--steps", "2", "--eval-interval", "2"})).code, 0);
  spit(tmp / "ck" / "latest.tmp.4242", "step_00000");
  spit(tmp / "ck" / "metrics.csv.tmp.4243", "step,");
  spit(tmp / "ck" / "notes.txt", "mine");  // not ours: kept
  ASSERT_EQ(run(resume_args(tmp, {"--steps", "4"})).code, 0);
  EXPECT_FALSE(fs::exists(tmp / "ck" / "latest.tmp.4242"));
  EXPECT_FALSE(fs::exists(tmp / "ck" / "metrics.csv.tmp.4243"));
  EXPECT_EQ(slurp(tmp / "ck" / "notes.txt"), "mine");
}

// A vocabulary mismatch lists the characters that differ, also when the sizes differ.
TEST_F(BadInput, VocabularyMismatchListsTheCharacters) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  ASSERT_EQ(run(train_args(tmp, {"--steps", "2", "--eval-interval", "2"})).code, 0);
  spit(tmp / "corpus.txt", corpus_text() + "XYZ\n");
  RunResult r = run(resume_args(tmp, {"--steps", "4", "--data", (tmp / "corpus.txt").string()}));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "different vocabulary")) << r.out;
  EXPECT_TRUE(has(r.out, "only in the corpus: 'X' 'Y' 'Z'")) << r.out;
}
