// tests/data/fixture.h: reads tests/fixtures/data.txt (written by tests/fixtures/gen_data.py
// with torch 1.13): one record per line, "<name> <n> <v0> ... <v(n-1)>".
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "xgrad/ops.h"

namespace xgrad::testing {

inline const std::vector<std::string>& data_record(const std::string& name) {
  static const std::map<std::string, std::vector<std::string>> records = [] {
    std::map<std::string, std::vector<std::string>> out;
    std::ifstream in(std::string(XGRAD_FIXTURES_DIR) + "/data.txt");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string key, tok;
      size_t n = 0;
      if (!(ss >> key >> n)) continue;
      std::vector<std::string> values;
      while (ss >> tok) values.push_back(tok);
      if (values.size() != n) ADD_FAILURE() << "record " << key << " has " << values.size() << " of " << n;
      out[key] = std::move(values);
    }
    return out;
  }();
  static const std::vector<std::string> missing;
  auto it = records.find(name);
  if (it == records.end()) {
    ADD_FAILURE() << "no record '" << name << "' in " << XGRAD_FIXTURES_DIR << "/data.txt";
    return missing;
  }
  return it->second;
}

inline std::vector<int64_t> fixture_ints(const std::string& name) {
  std::vector<int64_t> out;
  for (const std::string& s : data_record(name)) out.push_back(std::stoll(s));
  return out;
}

inline std::vector<float> fixture_floats(const std::string& name) {
  std::vector<float> out;
  for (const std::string& s : data_record(name)) out.push_back(std::strtof(s.c_str(), nullptr));
  return out;
}

// The next three torch.rand draws of the default generator (or `gen`) equal the record
// `name`: pins the generator's state after what the test did, exactly.
inline void expect_next_rand(const std::string& name, Generator* gen = nullptr) {
  EXPECT_EQ(rand({3}, gen).to_vector<float>(), fixture_floats(name)) << name;
}

}  // namespace xgrad::testing
