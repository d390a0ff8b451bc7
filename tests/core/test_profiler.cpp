// tests/core/test_profiler.cpp: xgrad::profiler::profile records forward ops and backward
// nodes with calls, nesting (self time <= total), bytes allocated; key_averages().table()
// sorts like torch's; the Chrome trace parses as JSON (nlohmann) with the trace event
// format's fields; nothing is recorded outside a profile; one profile at a time.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::expect_error;

std::map<std::string, profiler::FunctionAverage> by_name(const profiler::profile& p) {
  std::map<std::string, profiler::FunctionAverage> m;
  for (const auto& row : p.key_averages().rows) m[row.name] = row;
  return m;
}

TEST(Profiler, RecordsForwardAndBackwardOpsWithCallsAndBytes) {
  Tensor w = randn({64, 32}).requires_grad_();
  Tensor x = randn({16, 64});
  profiler::profile prof;
  EXPECT_TRUE(profiler::is_enabled());
  Tensor y = matmul(x, w);  // one (16, 32) float32 output: 2048 bytes
  Tensor loss = (y * y).sum();
  loss = loss + (y * 2.0).sum();
  loss.backward();
  prof.stop();
  EXPECT_FALSE(profiler::is_enabled());
  auto rows = by_name(prof);
  ASSERT_TRUE(rows.count("matmul"));
  EXPECT_EQ(rows["matmul"].count, 1);
  EXPECT_GE(rows["matmul"].cpu_bytes, 16 * 32 * 4);
  EXPECT_GE(rows["mul"].count, 2);  // 2 forward, more inside MulBackward0
  EXPECT_EQ(rows["sum"].count, 2);
  ASSERT_TRUE(rows.count("MmBackward0")) << rows.size();
  EXPECT_EQ(rows["MmBackward0"].count, 1);
  EXPECT_EQ(rows["MulBackward0"].count, 2);
  // ops a backward node calls are nested inside it
  bool nested = false;
  int top_level_muls = 0;
  for (const auto& e : prof.events()) {
    EXPECT_LE(e.self_ns, e.duration_ns) << e.name;
    EXPECT_GE(e.self_ns, 0) << e.name;
    EXPECT_LE(e.self_bytes, e.bytes) << e.name;
    if (e.name == "MmBackward0") EXPECT_TRUE(e.backward);
    if (e.name == "mul" && e.depth > 0) nested = true;
    if (e.name == "mul" && e.depth == 0) ++top_level_muls;
  }
  EXPECT_TRUE(nested);
  EXPECT_EQ(top_level_muls, 2);
  const int64_t sum_events = static_cast<int64_t>(prof.events().size());
  // outside the profile nothing is recorded
  Tensor z = matmul(x, w);
  EXPECT_EQ(static_cast<int64_t>(prof.events().size()), sum_events);
}

TEST(Profiler, TableSortsLikeTorch) {
  Tensor a = randn({128, 128});
  profiler::profile prof;
  for (int i = 0; i < 3; ++i) a = matmul(a, a) * 1e-2;
  Tensor s = a.sum();
  prof.stop();
  const std::string by_self = prof.key_averages().table();
  EXPECT_NE(by_self.find("Self CPU %"), std::string::npos) << by_self;
  EXPECT_NE(by_self.find("# of Calls"), std::string::npos);
  EXPECT_NE(by_self.find("Self CPU time total:"), std::string::npos);
  // sorted by self time: three 128^3 matmuls come before one sum
  EXPECT_LT(by_self.find("matmul"), by_self.find(" sum "));
  const std::string by_count = prof.key_averages().table("count", 2);
  std::istringstream lines(by_count);
  std::vector<std::string> body;
  for (std::string l; std::getline(lines, l);)
    if (l.find("---") == std::string::npos && l.find("Name") == std::string::npos &&
        l.find("total:") == std::string::npos)
      body.push_back(l);
  ASSERT_EQ(body.size(), 2u) << by_count;  // row_limit
  EXPECT_NE(body[0].find("  3  "), std::string::npos) << by_count;
  expect_error([&] { prof.key_averages().table("cuda_time_total"); }, {"unknown sort_by 'cuda_time_total'"});
}

TEST(Profiler, ChromeTraceIsValidJson) {
  Tensor w = randn({8, 8}).requires_grad_();
  profiler::profile prof;
  Tensor loss = softmax(matmul(randn({4, 8}), w), -1).pow(2.0).sum();
  loss.backward();
  prof.stop();
  const auto path = std::filesystem::temp_directory_path() / "xgrad_profiler_trace.json";
  prof.export_chrome_trace(path.string());
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);  // throws on invalid JSON
  std::filesystem::remove(path);
  ASSERT_TRUE(j.contains("traceEvents"));
  const auto& ev = j["traceEvents"];
  ASSERT_EQ(ev.size(), prof.events().size());
  bool has_backward = false;
  for (const auto& e : ev) {
    EXPECT_EQ(e["ph"], "X");
    EXPECT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e["pid"].is_number() && e["tid"].is_number() &&
                e["name"].is_string());
    EXPECT_GE(e["dur"].get<double>(), 0);
    has_backward = has_backward || e["cat"] == "backward";
  }
  EXPECT_TRUE(has_backward);
  expect_error([&] { prof.export_chrome_trace("/nonexistent-dir/trace.json"); },
               {"export_chrome_trace", "cannot write"});
}

TEST(Profiler, OneAtATime) {
  profiler::profile a;
  expect_error([] { profiler::profile b; }, {"another profile is already recording"});
  a.stop();
  profiler::profile c;  // fine after stop
  Tensor t = zeros({3});
  c.stop();
  EXPECT_EQ(c.events().size(), 1u);
  EXPECT_EQ(c.events()[0].name, "zeros");
  EXPECT_EQ(c.events()[0].bytes, 12);
}

}  // namespace
}  // namespace xgrad
