// tests/core/gradcheck_rows_math.cpp: gradcheck rows for silu, softplus, sin, cos, log1p,
// expm1, erf, atan2 (broadcast), cumsum (every dim), logsumexp (one dim, several, keepdim)
// and repeat_interleave (each dim, flattened). The shared test is OpGradcheck
// (test_gradcheck.cpp), which also runs every row on strided and broadcast inputs.
#include <string>

#include "gradcheck_table.h"

namespace xgrad::testing {

namespace {
using V = std::vector<Tensor>;
}  // namespace

std::vector<GradcheckRow> math_rows() {
  std::vector<GradcheckRow> rows;
  const std::vector<std::pair<std::string, GradcheckFn>> unary{
      {"silu", [](const V& x) { return silu(x[0] * 3.0); }},
      {"softplus", [](const V& x) { return softplus(x[0] * 3.0); }},
      // beta x crosses the threshold 4 (at x = 2) between the inputs x * 3
      {"softplus/beta2_th4", [](const V& x) { return softplus(x[0] * 3.0, 2.0, 4.0); }},
      {"sin", [](const V& x) { return sin(x[0] * 2.0); }},
      {"cos", [](const V& x) { return cos(x[0] * 2.0); }},
      {"expm1", [](const V& x) { return expm1(x[0]); }},
      {"erf", [](const V& x) { return erf(x[0]); }},
  };
  for (const auto& [name, fn] : unary) {
    rows.push_back({name + "/2d", [] { return inputs({{3, 4}}); }, fn});
    rows.push_back({name + "/noncontig", [] { return V{noncontig({4, 5})}; }, fn});
  }
  // log1p is defined above -1
  rows.push_back({"log1p/2d",
                  [] {
                    return V{positive({3, 4}, -0.5, 2.0)};
                  },
                  [](const V& x) { return log1p(x[0]); }});
  rows.push_back({"atan2/same_shape",
                  [] {
                    return inputs({{3, 4}, {3, 4}});
                  },
                  [](const V& x) { return atan2(x[0], x[1]); }});
  rows.push_back({"atan2/broadcast",
                  [] {
                    return inputs({{3, 1, 4}, {2, 4}});
                  },
                  [](const V& x) { return atan2(x[0], x[1]); }});
  rows.push_back({"atan2/noncontig",
                  [] {
                    return V{noncontig({4, 3}), inputs({{3}})[0]};
                  },
                  [](const V& x) { return atan2(x[0], x[1]); }});
  for (int64_t d : {0, 1, -1}) {
    rows.push_back({"cumsum/3d/dim" + std::to_string(d),
                    [] {
                      return inputs({{2, 3, 4}});
                    },
                    [d](const V& x) { return cumsum(x[0], d); }});
    rows.push_back({"logsumexp/3d/dim" + std::to_string(d),
                    [] {
                      return inputs({{2, 3, 4}});
                    },
                    [d](const V& x) { return logsumexp(x[0], d); }});
  }
  rows.push_back({"cumsum/noncontig",
                  [] {
                    return V{noncontig({4, 5})};
                  },
                  [](const V& x) { return cumsum(x[0], 1); }});
  rows.push_back({"logsumexp/dims02/keepdim",
                  [] {
                    return inputs({{2, 3, 4}});
                  },
                  [](const V& x) {
                    return logsumexp(x[0], {0, 2}, true);
                  }});
  rows.push_back({"logsumexp/noncontig",
                  [] {
                    return V{noncontig({4, 5})};
                  },
                  [](const V& x) { return logsumexp(x[0], 0); }});
  rows.push_back({"repeat_interleave/dim0",
                  [] {
                    return inputs({{3, 4}});
                  },
                  [](const V& x) { return repeat_interleave(x[0], 2, 0); }});
  rows.push_back({"repeat_interleave/dim-1",
                  [] {
                    return inputs({{2, 3, 4}});
                  },
                  [](const V& x) { return repeat_interleave(x[0], 3, -1); }});
  rows.push_back({"repeat_interleave/flat",
                  [] {
                    return V{noncontig({3, 4})};
                  },
                  [](const V& x) { return repeat_interleave(x[0], 2); }});
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Math, OpGradcheck, ::testing::ValuesIn(math_rows()), row_name);

}  // namespace xgrad::testing
