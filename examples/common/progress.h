// examples/common/progress.h: what a training program shows and records while it runs, for
// any example (train_lm uses it; it is not part of the library, which never prints).
//
// - Progress: on a terminal, one live line redrawn with '\r'
//     step 1200/5000 [#######.............]  24%  loss 1.7321  41.2k tok/s  ETA 3m05s
//   elsewhere (a pipe, a CI log), a plain spdlog line every `log_every` steps.
// - MetricsLog: a CSV file step,train_loss,val_loss,lr,tokens_per_s,elapsed_s (one row per
//   logged step; val_loss empty when not evaluated). On --resume rows after the resumed step
//   are dropped, so the file matches the run.
// - plot_loss_curve: loss.png through gnuplot when it is installed, else a hand-written SVG.
// - StepProfile: xgrad::profiler over the first N steps, its op table and a Chrome trace.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "xgrad/io/file.h"
#include "xgrad/profiler.h"

namespace xgrad_examples {

namespace fs = std::filesystem;

std::string format_duration(double seconds);  // "3m05s", "1h02m", "12.3s"
std::string format_rate(double per_second);   // "41.2k", "1.20M", "950"

class Progress {
 public:
  // live: redraw one line on `out` (a terminal); otherwise log through spdlog.
  Progress(int64_t total_steps, bool live, int64_t log_every = 10, std::FILE* out = stdout);
  ~Progress();
  // After each step: elapsed/ETA come from the caller (a time budget may end the run first).
  void update(int64_t step, double loss, double tokens_per_s, double eta_s);
  // Prints a line above the progress bar (or a plain log line): evaluations, samples, saves.
  void message(const std::string& text);
  void finish();  // ends the live line

  // Whether a progress bar makes sense for stdout (isatty and TERM is not "dumb").
  static bool stdout_is_terminal();

 private:
  void clear_line();
  int64_t total_;
  bool live_;
  int64_t log_every_;
  std::FILE* out_;
  bool line_open_ = false;
  std::string last_line_;
};

struct MetricsRow {
  int64_t step = 0;
  double train_loss = 0;
  std::optional<double> val_loss;
  double lr = 0;
  double tokens_per_s = 0;
  double elapsed_s = 0;
};

class MetricsLog {
 public:
  static constexpr const char* kHeader = "step,train_loss,val_loss,lr,tokens_per_s,elapsed_s";
  // resume_step < 0: a new run; the file must not exist (throws xgrad::Error, so an existing
  // log is never overwritten). resume_step >= 0: keep the existing rows with step <=
  // resume_step (rewritten atomically) and append after them. A resume never refuses over the
  // log: malformed lines (a torn last line after a kill or a full disk) are dropped, and a
  // file that is not a metrics log at all is kept as <path>.unreadable-<pid> before a new one
  // starts; note() says what was done.
  MetricsLog(fs::path path, int64_t resume_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void append(const MetricsRow& row);  // flushed at once
  const std::vector<MetricsRow>& rows() const { return rows_; }
  const fs::path& path() const { return path_; }

  const std::string& note() const { return note_; }  // "" or what a resume repaired

  // Renames the log of a run that failed before it saved anything to
  // <stem>.failed-<UTC time>[-n]<ext>, so a new run can start there; returns the new name.
  static fs::path set_aside(const fs::path& path);
  // A log exists at `path`, in the directory `dir` (a run's checkpoint directory).
  static bool exists_in(const fs::path& path, const fs::path& dir);

  static std::vector<MetricsRow> read(const fs::path& path);  // throws for a malformed file
  // The rows that parse; each malformed line is counted in *dropped (the header must match).
  static std::vector<MetricsRow> read_lenient(const fs::path& path, std::size_t* dropped);

 private:
  fs::path path_;
  std::FILE* file_ = nullptr;
  std::vector<MetricsRow> rows_;
  std::string note_;
};

// Writes an SVG line chart of train (and val) loss against step.
void write_loss_svg(const std::vector<MetricsRow>& rows, const fs::path& path,
                    const std::string& title = "train_lm loss");
// loss curve next to the metrics file: <stem>.png with gnuplot if it is on PATH (and
// works), else <stem>.svg. Returns the file written; throws only if the SVG fails too.
fs::path plot_loss_curve(const std::vector<MetricsRow>& rows, const fs::path& metrics_csv,
                         bool try_gnuplot = true);

// Profiles the first `steps` steps from its construction (nothing when 0); after the last of
// them, or at finish() for a shorter run, `say`s the op table (by self time) and writes
// `trace` (a Chrome trace: ui.perfetto.dev, chrome://tracing).
class StepProfile {
 public:
  StepProfile(int64_t steps, fs::path trace, std::function<void(const std::string&)> say);
  void step_done();
  void finish();

 private:
  std::optional<xgrad::profiler::profile> prof_;
  int64_t steps_, done_ = 0;
  fs::path trace_;
  std::function<void(const std::string&)> say_;
};

}  // namespace xgrad_examples
