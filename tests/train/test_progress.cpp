// tests/train/test_progress.cpp: metrics CSV (new run, refusal to overwrite, resume), the
// loss-curve plots (hand-written SVG, gnuplot PNG when installed) and the progress line.
#include <gtest/gtest.h>

#include <cstdio>

#include "progress.h"
#include "train_test_util.h"

using namespace xgrad_examples;
using train_test::expect_error;
using train_test::slurp;
using train_test::spit;
using train_test::TempDir;

namespace {
MetricsRow row(int64_t step, double loss, std::optional<double> val = std::nullopt) {
  return MetricsRow{step, loss, val, 1e-3, 12345.0, step * 0.5};
}
}  // namespace

TEST(MetricsLog, WritesHeaderAndRows) {
  TempDir tmp;
  fs::path p = tmp / "m" / "metrics.csv";
  {
    MetricsLog log(p, -1);
    log.append(row(1, 4.5));
    log.append(row(2, 4.25, 4.4));
  }
  EXPECT_EQ(slurp(p),
            "step,train_loss,val_loss,lr,tokens_per_s,elapsed_s\n"
            "1,4.500000,,0.001,12345.0,0.500\n"
            "2,4.250000,4.400000,0.001,12345.0,1.000\n");
  auto rows = MetricsLog::read(p);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows[0].val_loss.has_value());
  EXPECT_DOUBLE_EQ(*rows[1].val_loss, 4.4);
}

TEST(MetricsLog, NewRunRefusesAnExistingFile) {
  TempDir tmp;
  fs::path p = tmp / "metrics.csv";
  spit(p, "precious");
  expect_error([&] { MetricsLog log(p, -1); }, {"already exists", "--resume"});
  EXPECT_EQ(slurp(p), "precious");
}

TEST(MetricsLog, ResumeDropsRowsAfterTheCheckpoint) {
  TempDir tmp;
  fs::path p = tmp / "metrics.csv";
  {
    MetricsLog log(p, -1);
    for (int s = 1; s <= 6; ++s) log.append(row(s, 5.0 - s * 0.1));
  }
  {
    MetricsLog log(p, 4);  // the run crashed after step 6, its last checkpoint is step 4
    EXPECT_EQ(log.rows().size(), 4u);
    log.append(row(5, 9.0));
  }
  auto rows = MetricsLog::read(p);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[4].step, 5);
  EXPECT_DOUBLE_EQ(rows[4].train_loss, 9.0);
}

TEST(MetricsLog, ResumeNeverRefusesOverTheLog) {
  TempDir tmp;
  fs::path p = tmp / "metrics.csv";
  {
    MetricsLog log(p, -1);
    for (int s = 1; s <= 6; ++s) log.append(row(s, 5.0 - s * 0.1));
  }
  // a torn row in the middle (an earlier kill) and a torn last row (disk full)
  std::string text = slurp(p);
  text.insert(text.find("\n4,") + 1, "3,4.7\n");
  spit(p, text + "7,4.3,,0.0");
  {
    MetricsLog log(p, 5);
    EXPECT_EQ(log.rows().size(), 5u);
    EXPECT_NE(log.note().find("dropped 2 malformed line"), std::string::npos) << log.note();
  }
  auto rows = MetricsLog::read(p);  // strict: the repaired file is clean
  ASSERT_EQ(rows.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rows[i].step, i + 1);
  // not a metrics log at all: kept aside (nothing a user saved is lost), a new log starts
  spit(p, "not,a,header\n");
  {
    MetricsLog log(p, 4);
    EXPECT_TRUE(log.rows().empty());
    EXPECT_NE(log.note().find("unreadable"), std::string::npos) << log.note();
  }
  EXPECT_EQ(slurp(p), std::string(MetricsLog::kHeader) + "\n");
  int kept = 0;
  for (const auto& e : fs::directory_iterator(tmp.path))
    if (e.path().filename().string().rfind("metrics.csv.unreadable-", 0) == 0) {
      EXPECT_EQ(slurp(e.path()), "not,a,header\n");
      ++kept;
    }
  EXPECT_EQ(kept, 1);
}

TEST(Plot, SvgFallback) {
  TempDir tmp;
  std::vector<MetricsRow> rows;
  for (int s = 1; s <= 50; ++s)
    rows.push_back(row(s, 4.0 / s, s % 10 == 0 ? std::optional(4.5 / s) : std::nullopt));
  fs::path svg = plot_loss_curve(rows, tmp / "metrics.csv", /*try_gnuplot=*/false);
  EXPECT_EQ(svg, tmp / "metrics.svg");
  std::string s = slurp(svg);
  EXPECT_EQ(s.rfind("<svg", 0), 0u);
  EXPECT_NE(s.find("</svg>"), std::string::npos);
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n') > 10, true);
  EXPECT_NE(s.find("polyline"), std::string::npos);
  EXPECT_NE(s.find("val loss"), std::string::npos);
  // no rows at all still gives a valid (empty) chart
  EXPECT_NO_THROW(write_loss_svg({}, tmp / "empty.svg"));
}

TEST(Plot, GnuplotPngWhenAvailable) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  TempDir tmp;
  std::vector<MetricsRow> rows = {row(1, 3.0), row(2, 2.0, 2.5), row(3, 1.5)};
  fs::path out = plot_loss_curve(rows, tmp / "metrics.csv");
  EXPECT_EQ(out, tmp / "metrics.png");
  std::string png = slurp(out);
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
}

TEST(Progress, FormatsAndLiveLine) {
  EXPECT_EQ(format_duration(5.25), "5.2s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_rate(41234), "41.2k");
  EXPECT_EQ(format_rate(1.2e6), "1.20M");
  EXPECT_EQ(format_rate(950), "950");

  TempDir tmp;
  std::FILE* f = std::fopen((tmp / "out.txt").c_str(), "w");
  {
    Progress p(100, /*live=*/true, 10, f);
    p.update(24, 1.7321, 41234, 185);
    p.update(25, 1.7, 41234, 180);
    p.finish();
  }
  std::fclose(f);
  std::string s = slurp(tmp / "out.txt");
  EXPECT_NE(s.find("\r\033[2Kstep 24/100"), std::string::npos) << s;
  EXPECT_NE(s.find("loss 1.7321"), std::string::npos);
  EXPECT_NE(s.find("41.2k tok/s"), std::string::npos);
  EXPECT_NE(s.find("ETA 3m05s"), std::string::npos);
  EXPECT_NE(s.find(" 25%"), std::string::npos);
  EXPECT_EQ(s.back(), '\n');
}
