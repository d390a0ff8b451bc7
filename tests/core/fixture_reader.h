// tests/core/fixture_reader.h: reads the PyTorch fixtures in tests/fixtures/*.txt (written by
// the tests/fixtures/gen_*.py scripts) into named tensors, and compares tensors in tests.
//
// File format: plain text, one tensor per block, blocks in any order; blank lines and lines
// starting with '#' are ignored. A block is four lines (the keyword first on each line):
//
//   name chain1.a.grad          any characters except whitespace; unique in the file
//   dtype float32               float32 | float64 | int64 | bool
//   shape 2 3                   sizes; "shape" alone is a 0-d tensor (a scalar)
//   values 0.1 -2 3e-05 ...     numel() values in row-major order (written with %.9g for
//                               float32, %.17g for float64; nan/inf/-inf allowed; bools 0/1)
//
// Python side (copy into your generator):
//
//   def write(f, name, t):
//       t = t.detach().contiguous()
//       dt = {torch.float32: 'float32', torch.float64: 'float64',
//             torch.int64: 'int64', torch.bool: 'bool'}[t.dtype]
//       fmt = '%.17g' if t.dtype == torch.float64 else '%.9g'
//       vals = t.reshape(-1).tolist()
//       if t.dtype in (torch.int64, torch.bool): s = ' '.join(str(int(v)) for v in vals)
//       else: s = ' '.join(fmt % v for v in vals)
//       f.write(f'name {name}\ndtype {dt}\nshape {" ".join(map(str, t.shape))}\nvalues {s}\n\n')
//
// C++ side:
//
//   Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/elementwise_reduce.txt");
//   Tensor a = fx.get("chain1.a");                 // throws xgrad::Error naming a missing key
//   expect_close(result, fx.get("chain1.out"), 1e-6, 1e-5, "chain1.out");
//
// Everything is header-only and needs no libraries beyond the standard one and GoogleTest.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "xgrad/xgrad.h"

namespace xgrad::testing {

// The tensors of one fixture file by name. get() throws xgrad::Error for a missing name.
struct Fixture : std::map<std::string, Tensor> {
  std::string path;
  const Tensor& get(const std::string& name) const {
    auto it = find(name);
    if (it == end()) fail("read_fixture", "no tensor named '", name, "' in ", path);
    return it->second;
  }
  bool has(const std::string& name) const { return count(name) > 0; }
};

namespace detail_fixture {
inline DType parse_dtype(const std::string& s, const std::string& where) {
  if (s == "float32") return kFloat32;
  if (s == "float64") return kFloat64;
  if (s == "int64") return kInt64;
  if (s == "bool") return kBool;
  fail("read_fixture", where, ": unknown dtype '", s, "'");
}
}  // namespace detail_fixture

// Parses a fixture file; throws xgrad::Error (with file and line) on a malformed block.
inline Fixture read_fixture(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("read_fixture", "cannot open ", path, " (run the generator in tests/fixtures/)");
  Fixture fx;
  fx.path = path;
  std::string line, name;
  DType dtype = kFloat32;
  Shape shape;
  bool have_name = false, have_shape = false;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::istringstream ls(line);
    std::string key;
    if (!(ls >> key) || key[0] == '#') continue;
    const std::string where = path + ":" + std::to_string(lineno);
    if (key == "name") {
      if (!(ls >> name)) fail("read_fixture", where, ": 'name' without a name");
      have_name = true;
      have_shape = false;
      dtype = kFloat32;
    } else if (key == "dtype") {
      std::string s;
      ls >> s;
      dtype = detail_fixture::parse_dtype(s, where);
    } else if (key == "shape") {
      shape.clear();
      int64_t d;
      while (ls >> d) shape.push_back(d);
      have_shape = true;
    } else if (key == "values") {
      if (!have_name || !have_shape) fail("read_fixture", where, ": 'values' before 'name' and 'shape'");
      const int64_t n = numel_of(shape);
      Tensor t;
      if (dtype == kInt64) {
        std::vector<int64_t> v;
        std::string tok;
        while (ls >> tok) v.push_back(std::strtoll(tok.c_str(), nullptr, 10));
        if (static_cast<int64_t>(v.size()) != n)
          fail("read_fixture", where, ": '", name, "' has ", v.size(), " values for shape ", shape);
        t = from_vector(v, shape);
      } else {
        std::vector<double> v;
        std::string tok;
        while (ls >> tok) {
          if (tok == "True" || tok == "true") v.push_back(1.0);
          else if (tok == "False" || tok == "false") v.push_back(0.0);
          else v.push_back(std::strtod(tok.c_str(), nullptr));  // parses nan, inf, -inf
        }
        if (static_cast<int64_t>(v.size()) != n)
          fail("read_fixture", where, ": '", name, "' has ", v.size(), " values for shape ", shape);
        t = from_vector(v, shape);
        if (dtype != kFloat64) t = t.to(dtype);
      }
      fx[name] = t;
      have_name = have_shape = false;
    } else {
      fail("read_fixture", where, ": unknown keyword '", key, "'");
    }
  }
  return fx;
}

// Expects same shape and |actual - expected| <= atol + rtol * |expected| everywhere (NaNs
// must match NaNs, infinities must match exactly). Reports the first few bad elements.
inline void expect_close(const Tensor& actual, const Tensor& expected, double rtol = 1e-5, double atol = 1e-6,
                         const std::string& what = "") {
  ASSERT_TRUE(actual.defined()) << what << ": actual tensor is undefined";
  ASSERT_EQ(shape_str(actual.shape()), shape_str(expected.shape())) << what;
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  int reported = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    bool ok;
    if (std::isnan(e[i])) ok = std::isnan(a[i]);
    else if (std::isinf(e[i])) ok = a[i] == e[i];
    else ok = std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i]);
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i] << " (diff "
                    << a[i] - e[i] << ")";
  }
}

}  // namespace xgrad::testing
