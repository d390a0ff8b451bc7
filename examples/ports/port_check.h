// examples/ports/port_check.h: how a ported page checks itself against its torch run.
//
// The Python page (tests/fixtures/gen_<name>.py) writes what it printed as named tensors to
// tests/fixtures/<name>.txt (the format of tests/core/fixture_reader.h: blocks of
// "name / dtype / shape / values" lines). The port computes the same things, and
// Checker::close compares each with torch's: same shape, and every element within
// atol + rtol * |torch| (float32 math in a different order: not the same bits). finish()
// prints "<program>: N passed, N failed" and returns the exit status (1 on any mismatch).
#pragma once
#include <xgrad/xgrad.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ports {

using xgrad::Shape;
using xgrad::Tensor;

// name -> (shape, values as doubles) from a fixture file; throws xgrad::Error if unreadable.
class TorchRun {
 public:
  explicit TorchRun(const std::string& path) {
    std::ifstream in(path);
    if (!in) xgrad::fail("ports", "cannot open the torch run ", path);
    std::string line, name;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string key;
      ls >> key;
      if (key == "name") {
        ls >> name;
      } else if (key == "shape") {
        Shape s;
        for (int64_t v; ls >> v;) s.push_back(v);
        entries_[name].first = s;
      } else if (key == "values") {
        std::vector<double>& vals = entries_[name].second;
        for (std::string v; ls >> v;) vals.push_back(std::strtod(v.c_str(), nullptr));
      }
    }
  }
  const std::pair<Shape, std::vector<double>>& get(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) xgrad::fail("ports", "the torch run has no tensor '", name, "'");
    return it->second;
  }

 private:
  std::map<std::string, std::pair<Shape, std::vector<double>>> entries_;
};

class Checker {
 public:
  Checker(std::string program, const std::string& fixture) : program_(std::move(program)), torch_(fixture) {}

  void close(const std::string& name, const Tensor& t, double rtol = 1e-4, double atol = 1e-5) {
    const auto& [shape, want] = torch_.get(name);
    if (t.shape() != shape)
      return mismatch(name, "shape " + xgrad::shape_str(t.shape()) + ", torch " + xgrad::shape_str(shape));
    const std::vector<double> got = t.to_vector<double>();
    for (std::size_t i = 0; i < got.size(); ++i) {
      const bool ok = std::isinf(want[i]) ? got[i] == want[i]
                                          : std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]);
      if (!ok) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "element %zu is %.9g, torch %.9g", i, got[i], want[i]);
        return mismatch(name, buf);
      }
    }
    ++passed_;
  }

  int finish() const {
    std::cout << "\n" << program_ << ": " << passed_ << " passed, " << failed_ << " failed" << std::endl;
    return failed_ == 0 ? 0 : 1;
  }

 private:
  void mismatch(const std::string& what, const std::string& detail) {
    ++failed_;
    std::cout << "MISMATCH " << what << ": " << detail << std::endl;
  }

  std::string program_;
  TorchRun torch_;
  int passed_ = 0;
  int failed_ = 0;
};

}  // namespace ports
