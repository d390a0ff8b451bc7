// examples/common/progress.cpp: see progress.h.
#include "progress.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "xgrad/error.h"
#include "xgrad/io/file.h"

namespace xgrad_examples {

using xgrad::io::write_file_atomic;

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", int(s / 60), int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  return buf;
}

std::string format_rate(double r) {
  char buf[32];
  if (!std::isfinite(r)) return "?";
  if (r >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", r / 1e6);
  else if (r >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", r / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", r);
  return buf;
}

// ---------------------------------------------------------------- Progress
Progress::Progress(int64_t total_steps, bool live, int64_t log_every, std::FILE* out)
    : total_(total_steps), live_(live), log_every_(std::max<int64_t>(1, log_every)), out_(out) {}

Progress::~Progress() { finish(); }

bool Progress::stdout_is_terminal() {
  if (!::isatty(STDOUT_FILENO)) return false;
  const char* term = std::getenv("TERM");
  return !(term && std::string(term) == "dumb");
}

void Progress::clear_line() {
  if (live_ && line_open_) {
    std::fprintf(out_, "\r\033[2K");
    line_open_ = false;
  }
}

void Progress::update(int64_t step, double loss, double tokens_per_s, double eta_s) {
  char loss_buf[32];
  std::snprintf(loss_buf, sizeof loss_buf, "%.4f", loss);
  if (!live_) {
    if (step % log_every_ == 0 || step == total_)
      spdlog::info("step {}/{}  loss {}  {} tok/s  ETA {}", step, total_, loss_buf, format_rate(tokens_per_s),
                   format_duration(eta_s));
    return;
  }
  constexpr int kWidth = 24;
  double frac = total_ > 0 ? std::clamp(double(step) / double(total_), 0.0, 1.0) : 0.0;
  int filled = static_cast<int>(frac * kWidth);
  std::string bar(filled, '#');
  bar.append(kWidth - filled, '.');
  char line[256];
  std::snprintf(line, sizeof line, "step %lld/%lld [%s] %3d%%  loss %s  %s tok/s  ETA %s",
                static_cast<long long>(step), static_cast<long long>(total_), bar.c_str(),
                static_cast<int>(frac * 100), loss_buf, format_rate(tokens_per_s).c_str(),
                format_duration(eta_s).c_str());
  last_line_ = line;
  std::fprintf(out_, "\r\033[2K%s", line);
  std::fflush(out_);
  line_open_ = true;
}

void Progress::message(const std::string& text) {
  if (live_) {
    clear_line();
    std::fflush(out_);
    spdlog::info("{}", text);
    if (!last_line_.empty()) {  // redraw the bar below the message
      std::fprintf(out_, "%s", last_line_.c_str());
      std::fflush(out_);
      line_open_ = true;
    }
  } else {
    spdlog::info("{}", text);
  }
}

void Progress::finish() {
  if (live_ && line_open_) {
    std::fprintf(out_, "\n");
    std::fflush(out_);
    line_open_ = false;
  }
  last_line_.clear();
}

// ---------------------------------------------------------------- MetricsLog
namespace {
std::string row_text(const MetricsRow& r) {
  char buf[256];
  char val[32] = "";
  if (r.val_loss) std::snprintf(val, sizeof val, "%.6f", *r.val_loss);
  std::snprintf(buf, sizeof buf, "%lld,%.6f,%s,%.6g,%.1f,%.3f\n", static_cast<long long>(r.step),
                r.train_loss, val, r.lr, r.tokens_per_s, r.elapsed_s);
  return buf;
}

double parse_double(const std::string& s, const fs::path& path, std::size_t line) {
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    xgrad::fail("metrics", path.string(), ": line ", line, ": '", s, "' is not a number");
  }
}
}  // namespace

namespace {
// Parses one data line; throws xgrad::Error naming the line when it is malformed.
MetricsRow parse_row(const std::string& line, const fs::path& path, std::size_t lineno) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) f.push_back(cell);
  if (!line.empty() && line.back() == ',') f.emplace_back();
  if (f.size() != 6)
    xgrad::fail("metrics", path.string(), ": line ", lineno, " has ", f.size(), " fields, expected 6");
  MetricsRow r;
  r.step = static_cast<int64_t>(parse_double(f[0], path, lineno));
  r.train_loss = parse_double(f[1], path, lineno);
  if (!f[2].empty()) r.val_loss = parse_double(f[2], path, lineno);
  r.lr = parse_double(f[3], path, lineno);
  r.tokens_per_s = parse_double(f[4], path, lineno);
  r.elapsed_s = parse_double(f[5], path, lineno);
  return r;
}

std::vector<MetricsRow> read_rows(const fs::path& path, std::size_t* dropped) {
  std::ifstream in(path);
  if (!in) xgrad::fail("metrics", "cannot open ", path.string());
  std::string line;
  std::vector<MetricsRow> rows;
  if (!std::getline(in, line) || line != MetricsLog::kHeader)
    xgrad::fail("metrics", path.string(), ": the first line is not the header '", MetricsLog::kHeader, "'");
  std::size_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    if (!dropped) {
      rows.push_back(parse_row(line, path, lineno));
      continue;
    }
    try {
      rows.push_back(parse_row(line, path, lineno));
    } catch (const xgrad::Error&) {
      ++*dropped;
    }
  }
  return rows;
}
}  // namespace

fs::path MetricsLog::set_aside(const fs::path& path) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
  const std::string base = path.stem().string() + ".failed-" + stamp;
  fs::path aside = path;
  aside.replace_filename(base + path.extension().string());
  std::error_code ec;
  for (int i = 1; fs::exists(aside, ec); ++i)
    aside.replace_filename(base + "-" + std::to_string(i) + path.extension().string());
  fs::rename(path, aside, ec);
  if (ec) xgrad::fail("metrics", "cannot rename ", path.string(), " to ", aside.string(), ": ", ec.message());
  xgrad::io::fsync_dir(aside.parent_path());
  return aside;
}

bool MetricsLog::exists_in(const fs::path& path, const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  const fs::path parent = fs::weakly_canonical(path, ec).parent_path();
  return !ec && parent == fs::weakly_canonical(dir, ec) && !ec;
}

std::vector<MetricsRow> MetricsLog::read(const fs::path& path) { return read_rows(path, nullptr); }

std::vector<MetricsRow> MetricsLog::read_lenient(const fs::path& path, std::size_t* dropped) {
  std::size_t n = 0;
  auto rows = read_rows(path, &n);
  if (dropped) *dropped = n;
  return rows;
}

MetricsLog::MetricsLog(fs::path path, int64_t resume_step) : path_(std::move(path)) {
  std::error_code ec;
  bool exists = fs::exists(path_, ec);
  if (resume_step < 0 && exists)
    xgrad::fail("metrics", path_.string(),
                " already exists; pass --resume to continue that run, "
                "or choose another --metrics file");
  if (!path_.parent_path().empty()) fs::create_directories(path_.parent_path(), ec);
  std::string text = std::string(kHeader) + "\n";
  if (exists) {
    std::size_t dropped = 0;
    std::vector<MetricsRow> old;
    try {
      old = read_lenient(path_, &dropped);
    } catch (const xgrad::Error& e) {  // not a metrics log (or unreadable): keep it aside
      fs::path aside = path_;
      aside += ".unreadable-" + std::to_string(::getpid());
      fs::rename(path_, aside, ec);
      if (ec)
        xgrad::fail("metrics", "cannot rename ", path_.string(), " to ", aside.string(), ": ", ec.message());
      note_ = std::string(e.what()) + "; kept it as " + aside.string() + " and started a new log";
    }
    for (const MetricsRow& r : old) {
      if (r.step > resume_step) continue;  // after the checkpoint: the run redoes them
      rows_.push_back(r);
      text += row_text(r);
    }
    if (dropped > 0)
      note_ = path_.string() + ": dropped " + std::to_string(dropped) +
              " malformed line(s) (a torn last line after a kill or a full disk?)";
  }
  write_file_atomic(path_, text);
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) xgrad::fail("metrics", "cannot open ", path_.string(), " for appending");
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::append(const MetricsRow& row) {
  std::string t = row_text(row);
  if (std::fwrite(t.data(), 1, t.size(), file_) != t.size() || std::fflush(file_) != 0)
    xgrad::fail("metrics", "cannot write ", path_.string());
  rows_.push_back(row);
}

// ---------------------------------------------------------------- plots
void write_loss_svg(const std::vector<MetricsRow>& rows, const fs::path& path, const std::string& title) {
  constexpr double W = 720, H = 420, L = 70, R = 20, T = 40, B = 50;  // size and margins
  double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;
  for (const MetricsRow& r : rows) {
    x1 = std::max(x1, double(r.step));
    for (double v : {r.train_loss, r.val_loss.value_or(r.train_loss)}) {
      if (!std::isfinite(v)) continue;
      y0 = std::min(y0, v);
      y1 = std::max(y1, v);
    }
  }
  if (!std::isfinite(y0)) {
    y0 = 0;
    y1 = 1;
  }
  if (y1 - y0 < 1e-9) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  double pad = 0.05 * (y1 - y0);
  y0 -= pad;
  y1 += pad;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };

  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 "
    << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << title
    << "</text>\n";
  // axes, ticks and grid
  s << "<g stroke=\"#ccc\">\n";
  for (int i = 0; i <= 5; ++i) {
    double yv = y0 + (y1 - y0) * i / 5, xv = x0 + (x1 - x0) * i / 5;
    s << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << py(yv) << "\" y2=\"" << py(yv)
      << "\"/>\n<line y1=\"" << T << "\" y2=\"" << H - B << "\" x1=\"" << px(xv) << "\" x2=\"" << px(xv)
      << "\"/>\n";
  }
  s << "</g>\n<g fill=\"#333\">\n";
  for (int i = 0; i <= 5; ++i) {
    double yv = y0 + (y1 - y0) * i / 5, xv = x0 + (x1 - x0) * i / 5;
    char yl[32], xl[32];
    std::snprintf(yl, sizeof yl, "%.3g", yv);
    std::snprintf(xl, sizeof xl, "%.0f", xv);
    s << "<text x=\"" << L - 6 << "\" y=\"" << py(yv) + 4 << "\" text-anchor=\"end\">" << yl
      << "</text>\n<text x=\"" << px(xv) << "\" y=\"" << H - B + 18 << "\" text-anchor=\"middle\">" << xl
      << "</text>\n";
  }
  s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">step</text>\n"
    << "<text transform=\"translate(18," << (T + H - B) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">loss</text>\n</g>\n"
    << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  auto polyline = [&](bool val, const char* color) {
    std::ostringstream pts;
    pts.setf(std::ios::fixed);
    pts.precision(1);
    int n = 0;
    for (const MetricsRow& r : rows) {
      double v = val ? r.val_loss.value_or(NAN) : r.train_loss;
      if (!std::isfinite(v)) continue;
      pts << px(double(r.step)) << "," << py(v) << " ";
      ++n;
    }
    if (n == 0) return;
    s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << (val ? 2 : 1.2)
      << "\" points=\"" << pts.str() << "\"/>\n";
  };
  polyline(false, "#1f77b4");
  polyline(true, "#d62728");
  s << "<g font-size=\"12\"><line x1=\"" << W - R - 150 << "\" x2=\"" << W - R - 125 << "\" y1=\"" << T + 16
    << "\" y2=\"" << T + 16 << "\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"" << W - R - 120
    << "\" y=\"" << T + 20 << "\">train loss</text>\n<line x1=\"" << W - R - 150 << "\" x2=\"" << W - R - 125
    << "\" y1=\"" << T + 34 << "\" y2=\"" << T + 34 << "\" stroke=\"#d62728\" stroke-width=\"2\"/><text x=\""
    << W - R - 120 << "\" y=\"" << T + 38 << "\">val loss</text></g>\n</svg>\n";
  write_file_atomic(path, s.str());
}

namespace {
bool on_path(const std::string& exe) {
  const char* p = std::getenv("PATH");
  if (!p) return false;
  std::stringstream ss(p);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) dir = ".";
    if (::access((fs::path(dir) / exe).c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool gnuplot_png(const std::vector<MetricsRow>& rows, const fs::path& png) {
  fs::path base = png;
  base += ".tmp." + std::to_string(::getpid());
  fs::path train = base, val = base, script = base, out = base;
  train += ".train";
  val += ".val";
  script += ".gp";
  out += ".png";
  std::ofstream t(train), v(val), g(script);
  bool any_val = false;
  for (const MetricsRow& r : rows) {
    t << r.step << " " << r.train_loss << "\n";
    if (r.val_loss) {
      v << r.step << " " << *r.val_loss << "\n";
      any_val = true;
    }
  }
  g << "set terminal pngcairo size 900,500\n"
    << "set output " << shell_quote(out.string()) << "\n"
    << "set title 'train\\_lm loss'\nset xlabel 'step'\nset ylabel 'loss'\nset grid\n"
    << "plot " << shell_quote(train.string()) << " using 1:2 with lines lw 1 title 'train loss'";
  if (any_val)
    g << ", " << shell_quote(val.string()) << " using 1:2 with linespoints lw 2 pt 7 ps 0.6 title 'val loss'";
  g << "\n";
  t.close();
  v.close();
  g.close();
  std::string cmd = "gnuplot " + shell_quote(script.string()) + " >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  std::error_code ec;
  bool ok = rc == 0 && fs::file_size(out, ec) > 0 && !ec;
  if (ok) fs::rename(out, png, ec), ok = !ec;
  for (const fs::path& p : {train, val, script, out}) fs::remove(p, ec);
  return ok;
}
}  // namespace

fs::path plot_loss_curve(const std::vector<MetricsRow>& rows, const fs::path& metrics_csv, bool try_gnuplot) {
  fs::path png = metrics_csv, svg = metrics_csv;
  png.replace_extension(".png");
  svg.replace_extension(".svg");
  if (try_gnuplot && !rows.empty() && on_path("gnuplot") && gnuplot_png(rows, png)) return png;
  write_loss_svg(rows, svg);
  return svg;
}

StepProfile::StepProfile(int64_t steps, fs::path trace, std::function<void(const std::string&)> say)
    : steps_(steps), trace_(std::move(trace)), say_(std::move(say)) {
  if (steps_ > 0) prof_.emplace();
}

void StepProfile::step_done() {
  if (prof_ && ++done_ == steps_) finish();
}

void StepProfile::finish() {
  if (!prof_) return;
  prof_->stop();
  say_("profile of " + std::to_string(done_) + " steps (sorted by self time):\n" +
       prof_->key_averages().table("self_cpu_time_total", 30));
  fs::create_directories(trace_.parent_path());
  prof_->export_chrome_trace(trace_.string());
  say_("wrote " + trace_.string() + " (open it in ui.perfetto.dev or chrome://tracing)");
  prof_.reset();
}

}  // namespace xgrad_examples
