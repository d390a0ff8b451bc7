// xgrad/profiler.h: an op-level profiler, like torch.profiler.profile.
//
//   {
//     xgrad::profiler::profile prof;              // records from here ...
//     loss = model(x); loss.backward();
//     prof.stop();                                // ... to here (or the end of the scope)
//     std::cout << prof.key_averages().table("self_cpu_time_total", 20);
//     prof.export_chrome_trace("trace.json");     // chrome://tracing or ui.perfetto.dev
//   }
//
// Every op (core/src/ops/*.cpp: one RecordFunction line at its entry, named like torch's
// aten op, "matmul", "softmax") and every backward node (core/src/autograd.cpp, named by its
// grad_fn, "MmBackward0") is an event: start, duration, the time not spent in nested events
// (self time) and the bytes of tensor storage allocated inside it. Events of the thread that
// runs the op are recorded (the kernels' worker threads are inside their op's time).
//
// Off (no profile alive) a RecordFunction is one relaxed atomic load and a branch: see
// bench/profiler_overhead.cpp for the figure. One profile at a time.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace xgrad::profiler {

struct Event {
  std::string name;
  bool backward = false;  // a backward node (grad_fn) rather than a forward op
  int64_t start_ns = 0;   // since the profile started
  int64_t duration_ns = 0;
  int64_t self_ns = 0;  // duration minus the nested events' durations
  int64_t bytes = 0;    // storage allocated inside, nested events included
  int64_t self_bytes = 0;
  int depth = 0;   // nesting level (0 = called from user code)
  int thread = 0;  // 0 = the thread that started the profile, then in order of appearance
};

// One row of key_averages(): every event of one name.
struct FunctionAverage {
  std::string name;
  int64_t count = 0;
  int64_t self_cpu_ns = 0, cpu_ns = 0;  // totals
  int64_t self_cpu_bytes = 0, cpu_bytes = 0;
};

class KeyAverages {
 public:
  std::vector<FunctionAverage> rows;  // in order of first appearance
  // torch's EventList.table(): Name, Self CPU %, Self CPU, CPU total %, CPU total,
  // CPU time avg, CPU Mem, Self CPU Mem, # of Calls, sorted (descending) by sort_by:
  // "self_cpu_time_total" (default), "cpu_time_total", "cpu_memory_usage",
  // "self_cpu_memory_usage" or "count"; at most row_limit rows (< 0: all). Throws
  // xgrad::Error for another sort key.
  std::string table(const std::string& sort_by = "self_cpu_time_total", int row_limit = -1) const;
};

class profile {
 public:
  profile();   // starts recording; throws xgrad::Error if another profile is recording
  ~profile();  // stops
  profile(const profile&) = delete;
  profile& operator=(const profile&) = delete;

  void stop();                                                  // idempotent; events are available after it
  const std::vector<Event>& events() const { return events_; }  // in order of completion
  KeyAverages key_averages() const;
  // Chrome's trace event format (complete "X" events, microseconds): opens in
  // chrome://tracing and ui.perfetto.dev. Written atomically; throws xgrad::Error on failure.
  void export_chrome_trace(const std::string& path) const;
  std::string chrome_trace_json() const;

 private:
  bool recording_ = false;
  std::vector<Event> events_;
};

namespace detail {
inline std::atomic<bool> enabled{false};
void begin(const char* name, bool backward);
void end();
void on_alloc(std::size_t bytes);  // called by Storage's constructor
}  // namespace detail

// The hook an op puts at its entry: `profiler::RecordFunction rec("matmul");` records the
// rest of the op's scope as one event while a profile is recording. `name` is copied only then.
class RecordFunction {
 public:
  explicit RecordFunction(const char* name, bool backward = false)
      : active_(detail::enabled.load(std::memory_order_relaxed)) {
    if (active_) detail::begin(name, backward);
  }
  ~RecordFunction() {
    if (active_) detail::end();
  }
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  bool active_;
};

// Is a profile recording?
inline bool is_enabled() { return detail::enabled.load(std::memory_order_relaxed); }

}  // namespace xgrad::profiler
