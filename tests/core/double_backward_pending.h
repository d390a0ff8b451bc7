// tests/core/double_backward_pending.h: the gradcheck rows whose op's backward is not
// differentiable yet (under create_graph it does not compute with recorded ops), by op (the
// row name up to its first '/') or by whole row name. Their gradgradcheck rows
// (tests/core/test_gradcheck.cpp) and the double-backward tests that go through them are
// skipped, saying so. An entry leaves this list when its op's backward records.
#pragma once
#include <set>
#include <string>

namespace xgrad::testing {

inline const std::set<std::string>& double_backward_pending_set() {
  static const std::set<std::string> pending = {};
  return pending;
}

// Is the row (or its op) pending?
inline bool double_backward_pending(const std::string& row) {
  const auto& pending = double_backward_pending_set();
  return pending.count(row) > 0 || pending.count(row.substr(0, row.find('/'))) > 0;
}

}  // namespace xgrad::testing
