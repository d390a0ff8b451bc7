// core/src/profiler.cpp: see xgrad/profiler.h. Each thread keeps a stack of open events; a
// closed event adds its duration and bytes to its parent's (for self time) and is appended to
// the recording profile's list under a mutex.
#include "xgrad/profiler.h"

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "xgrad/error.h"

namespace xgrad::profiler {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Frame {
  std::string name;
  bool backward;
  int64_t start;
  int64_t child_ns = 0;
  int64_t self_bytes = 0, child_bytes = 0;
  uint64_t session;
};

struct Recorder {
  std::mutex mutex;
  std::vector<Event> events;
  std::atomic<uint64_t> session{0};  // bumped at every start: a frame of an earlier one is dropped
  int64_t t0 = 0;
  std::map<std::thread::id, int> threads;
};
Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: ops may run during static teardown
  return *r;
}

thread_local std::vector<Frame> stack;

}  // namespace

namespace detail {

void begin(const char* name, bool backward) {
  stack.push_back(Frame{name, backward, now_ns(), 0, 0, 0, recorder().session.load()});
}

void end() {
  if (stack.empty()) return;
  const int64_t t = now_ns();
  Frame f = std::move(stack.back());
  stack.pop_back();
  const int64_t dur = t - f.start;
  if (!stack.empty()) {
    stack.back().child_ns += dur;
    stack.back().child_bytes += f.self_bytes + f.child_bytes;
  }
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!enabled.load(std::memory_order_relaxed) || f.session != r.session) return;
  auto [it, fresh] = r.threads.emplace(std::this_thread::get_id(), static_cast<int>(r.threads.size()));
  Event e;
  e.name = std::move(f.name);
  e.backward = f.backward;
  e.start_ns = f.start - r.t0;
  e.duration_ns = dur;
  e.self_ns = dur - f.child_ns;
  e.self_bytes = f.self_bytes;
  e.bytes = f.self_bytes + f.child_bytes;
  e.depth = static_cast<int>(stack.size());
  e.thread = it->second;
  r.events.push_back(std::move(e));
}

void on_alloc(std::size_t bytes) {
  if (!enabled.load(std::memory_order_relaxed) || stack.empty()) return;
  stack.back().self_bytes += static_cast<int64_t>(bytes);
}

}  // namespace detail

profile::profile() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (detail::enabled.load())
    fail("profiler::profile", "another profile is already recording (one at a time)");
  ++r.session;
  r.events.clear();
  r.threads.clear();
  r.threads.emplace(std::this_thread::get_id(), 0);
  r.t0 = now_ns();
  detail::enabled.store(true);
  recording_ = true;
}

profile::~profile() { stop(); }

void profile::stop() {
  if (!recording_) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  detail::enabled.store(false);
  events_ = std::move(r.events);
  r.events.clear();
  recording_ = false;
}

KeyAverages profile::key_averages() const {
  KeyAverages out;
  std::map<std::string, std::size_t> row_of;
  for (const Event& e : events_) {
    auto [it, fresh] = row_of.emplace(e.name, out.rows.size());
    if (fresh) out.rows.push_back({e.name});
    FunctionAverage& a = out.rows[it->second];
    ++a.count;
    a.self_cpu_ns += e.self_ns;
    a.cpu_ns += e.duration_ns;
    a.self_cpu_bytes += e.self_bytes;
    a.cpu_bytes += e.bytes;
  }
  return out;
}

namespace {
// torch's _format_time: "12.345us", "1.234ms", "2.000s"
std::string format_time(int64_t ns) {
  char buf[32];
  const double us = double(ns) / 1e3;
  if (us >= 1e6) std::snprintf(buf, sizeof buf, "%.3fs", us / 1e6);
  else if (us >= 1e3) std::snprintf(buf, sizeof buf, "%.3fms", us / 1e3);
  else std::snprintf(buf, sizeof buf, "%.3fus", us);
  return buf;
}
// torch's _format_memory: "1.50 Mb", "512 b"
std::string format_memory(int64_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (std::abs(b) >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f Gb", b / (1024.0 * 1024 * 1024));
  else if (std::abs(b) >= 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.2f Mb", b / (1024.0 * 1024));
  else if (std::abs(b) >= 1024.0) std::snprintf(buf, sizeof buf, "%.2f Kb", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld b", static_cast<long long>(bytes));
  return buf;
}
std::string percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", whole > 0 ? 100.0 * double(part) / double(whole) : 0.0);
  return buf;
}
}  // namespace

// reference: torch/autograd/profiler_util.py, _build_table
std::string KeyAverages::table(const std::string& sort_by, int row_limit) const {
  std::function<int64_t(const FunctionAverage&)> key;
  if (sort_by == "self_cpu_time_total") key = [](const FunctionAverage& a) { return a.self_cpu_ns; };
  else if (sort_by == "cpu_time_total") key = [](const FunctionAverage& a) { return a.cpu_ns; };
  else if (sort_by == "cpu_memory_usage") key = [](const FunctionAverage& a) { return a.cpu_bytes; };
  else if (sort_by == "self_cpu_memory_usage")
    key = [](const FunctionAverage& a) { return a.self_cpu_bytes; };
  else if (sort_by == "count") key = [](const FunctionAverage& a) { return a.count; };
  else
    fail("profiler::KeyAverages::table", "unknown sort_by '", sort_by,
         "' (self_cpu_time_total, "
         "cpu_time_total, cpu_memory_usage, self_cpu_memory_usage or count)");
  std::vector<FunctionAverage> sorted = rows;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const FunctionAverage& a, const FunctionAverage& b) { return key(a) > key(b); });
  if (row_limit >= 0 && sorted.size() > static_cast<std::size_t>(row_limit))
    sorted.resize(static_cast<std::size_t>(row_limit));
  int64_t self_total = 0;
  for (const FunctionAverage& a : rows) self_total += a.self_cpu_ns;

  std::size_t name_w = 4;
  for (const FunctionAverage& a : sorted) name_w = std::max(name_w, a.name.size());
  name_w = std::min<std::size_t>(name_w, 55);
  const std::vector<std::string> headers = {"Name",        "Self CPU %",   "Self CPU",
                                            "CPU total %", "CPU total",    "CPU time avg",
                                            "CPU Mem",     "Self CPU Mem", "# of Calls"};
  const int w = 12;
  std::ostringstream os;
  auto rule = [&] {
    os << std::string(name_w, '-');
    for (std::size_t i = 1; i < headers.size(); ++i) os << "  " << std::string(w, '-');
    os << "  \n";
  };
  auto row = [&](const std::vector<std::string>& cells) {
    std::string name = cells[0].size() > name_w ? cells[0].substr(0, name_w - 3) + "..." : cells[0];
    os << std::string(name_w - name.size(), ' ') << name;
    for (std::size_t i = 1; i < cells.size(); ++i)
      os << "  " << std::string(w - std::min<std::size_t>(w, cells[i].size()), ' ') << cells[i];
    os << "  \n";
  };
  rule();
  row(headers);
  rule();
  for (const FunctionAverage& a : sorted)
    row({a.name, percent(a.self_cpu_ns, self_total), format_time(a.self_cpu_ns),
         percent(a.cpu_ns, self_total), format_time(a.cpu_ns), format_time(a.count ? a.cpu_ns / a.count : 0),
         format_memory(a.cpu_bytes), format_memory(a.self_cpu_bytes), std::to_string(a.count)});
  rule();
  os << "Self CPU time total: " << format_time(self_total) << "\n";
  return os.str();
}

namespace {
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}
}  // namespace

// reference: the Trace Event Format (Google), "Complete events" (ph "X")
std::string profile::chrome_trace_json() const {
  std::ostringstream os;
  os << "{\"traceEvents\": [";
  const int pid = static_cast<int>(::getpid());
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    char times[96];
    std::snprintf(times, sizeof times, "\"ts\": %.3f, \"dur\": %.3f", double(e.start_ns) / 1e3,
                  double(e.duration_ns) / 1e3);
    os << (i ? ",\n  " : "\n  ") << "{\"ph\": \"X\", \"cat\": \"" << (e.backward ? "backward" : "cpu_op")
       << "\", \"name\": " << json_string(e.name) << ", \"pid\": " << pid << ", \"tid\": " << e.thread << ", "
       << times << ", \"args\": {\"bytes\": " << e.bytes << ", \"self bytes\": " << e.self_bytes << "}}";
  }
  os << "\n], \"displayTimeUnit\": \"ms\"}\n";
  return os.str();
}

void profile::export_chrome_trace(const std::string& path) const {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << chrome_trace_json();
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      fail("profiler::export_chrome_trace", "cannot write '", tmp, "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("profiler::export_chrome_trace", "cannot rename '", tmp, "' to '", path, "'");
  }
}

}  // namespace xgrad::profiler
