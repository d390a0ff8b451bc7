// tests/core/double_backward_pending.h: the ops whose backward is not yet differentiable, by
// the name their gradcheck row has. Their gradgradcheck rows (tests/core/gradcheck_table.cpp)
// and the double-backward tests that go through them are skipped, saying so. An op leaves
// this list when its backward computes with recorded ops under create_graph.
#pragma once
#include <set>
#include <string>

namespace xgrad::testing {

inline const std::set<std::string>& double_backward_pending() {
  static const std::set<std::string> pending = {
      "linear",
  };
  return pending;
}

inline bool double_backward_pending(const std::string& op) { return double_backward_pending().count(op) > 0; }

}  // namespace xgrad::testing
