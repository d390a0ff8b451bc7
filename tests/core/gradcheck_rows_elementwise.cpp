// tests/core/gradcheck_rows_elementwise.cpp: gradcheck rows for core/src/ops/elementwise.cpp.
// Every differentiable op with several shapes, broadcasting both ways, the scalar overloads
// and non-contiguous inputs. log/sqrt/pow/div take positive() inputs to stay off their poles.
#include "gradcheck_table.h"

namespace xgrad::testing {
namespace {

using In = std::vector<Tensor>;
using Fn = GradcheckFn;

// The (a, b) shape pairs every binary op is checked with.
struct Pair {
  const char* name;
  std::function<In()> make;
};
std::vector<Pair> binary_pairs(bool positive_b) {
  auto second = [positive_b](const Shape& s) {
    return positive_b ? positive(s, 0.5, 2.0, 21) : inputs({s}, 21)[0];
  };
  return {
      {"same",
       [=] {
         return In{inputs({{3, 4}})[0], second({3, 4})};
       }},
      {"bcast-b-row",
       [=] {
         return In{inputs({{2, 3, 4}})[0], second({4})};
       }},
      {"bcast-a-row",
       [=] {
         return In{inputs({{4}})[0], second({3, 4})};
       }},
      {"bcast-both",
       [=] {
         return In{inputs({{2, 1, 4}})[0], second({3, 1})};
       }},
      {"bcast-col",
       [=] {
         return In{inputs({{3, 4}})[0], second({3, 1})};
       }},
      {"scalar-b",
       [=] {
         return In{inputs({{2, 3}})[0], second({})};
       }},
      {"noncontig",
       [=] {
         return In{noncontig({4, 3}), second({4, 3})};
       }},
      {"noncontig-b",
       [=] {
         Tensor b = positive_b ? positive({3, 5}, 0.5, 2.0, 23) : inputs({{3, 5}}, 23)[0];
         return In{inputs({{5, 3}})[0], b.detach().t().requires_grad_()};
       }},
  };
}

void add_binary(std::vector<GradcheckRow>& rows, const std::string& op, bool positive_b, Fn fn) {
  for (const Pair& p : binary_pairs(positive_b)) rows.push_back({op + "/" + p.name, p.make, fn});
}

void add_unary(std::vector<GradcheckRow>& rows, const std::string& op, bool pos, Fn fn) {
  auto make = [pos](const Shape& s) { return pos ? positive(s) : inputs({s})[0]; };
  rows.push_back({op + "/1d", [=] { return In{make({5})}; }, fn});
  rows.push_back({op + "/3d", [=] { return In{make({2, 3, 4})}; }, fn});
  rows.push_back({op + "/0d", [=] { return In{make({})}; }, fn});
  rows.push_back({op + "/noncontig",
                  [=] {
                    Tensor t = make({4, 3});
                    return In{t.detach().t().requires_grad_()};
                  },
                  fn});
}

}  // namespace

std::vector<GradcheckRow> elementwise_rows() {
  std::vector<GradcheckRow> rows;
  add_binary(rows, "add", false, [](const In& x) { return add(x[0], x[1]); });
  add_binary(rows, "sub", false, [](const In& x) { return sub(x[0], x[1]); });
  add_binary(rows, "mul", false, [](const In& x) { return mul(x[0], x[1]); });
  add_binary(rows, "div", true, [](const In& x) { return div(x[0], x[1]); });
  add_binary(rows, "maximum", false, [](const In& x) { return maximum(x[0], x[1]); });
  add_binary(rows, "minimum", false, [](const In& x) { return minimum(x[0], x[1]); });
  // pow(tensor, tensor): base positive, exponent any
  for (const Pair& p : binary_pairs(false)) {
    rows.push_back(
        {std::string("pow-tensor/") + p.name,
         [make = p.make] {
           In v = make();
           Tensor base = positive(v[0].shape(), 0.5, 2.0, 31);
           if (!v[0].is_contiguous())
             base = positive({v[0].size(1), v[0].size(0)}, 0.5, 2.0, 31).detach().t().requires_grad_();
           return In{base, v[1]};
         },
         [](const In& x) { return pow(x[0], x[1]); }});
  }

  // scalar overloads
  add_unary(rows, "add-scalar", false, [](const In& x) { return x[0] + 2.5; });
  add_unary(rows, "radd-scalar", false, [](const In& x) { return 2.5 + x[0]; });
  add_unary(rows, "sub-scalar", false, [](const In& x) { return x[0] - 1.5; });
  add_unary(rows, "rsub-scalar", false, [](const In& x) { return 1.5 - x[0]; });
  add_unary(rows, "mul-scalar", false, [](const In& x) { return x[0] * -3.0; });
  add_unary(rows, "rmul-scalar", false, [](const In& x) { return 0.5 * x[0]; });
  add_unary(rows, "div-scalar", false, [](const In& x) { return x[0] / 4.0; });
  add_unary(rows, "rdiv-scalar", true, [](const In& x) { return 2.0 / x[0]; });
  add_unary(rows, "neg", false, [](const In& x) { return -x[0]; });

  for (double e : {2.0, 3.0, 1.0, 0.5, -0.5, -1.0, -2.0, 1.7, 0.0})
    add_unary(rows, "pow-" + std::to_string(e), true, [e](const In& x) { return pow(x[0], e); });
  add_unary(rows, "pow-2-negative-base", false, [](const In& x) { return pow(x[0], 2.0); });
  add_unary(rows, "exp", false, [](const In& x) { return exp(x[0]); });
  add_unary(rows, "log", true, [](const In& x) { return log(x[0]); });
  add_unary(rows, "sqrt", true, [](const In& x) { return sqrt(x[0]); });
  add_unary(rows, "rsqrt", true, [](const In& x) { return rsqrt(x[0]); });
  add_unary(rows, "tanh", false, [](const In& x) { return tanh(x[0]); });
  add_unary(rows, "abs", false, [](const In& x) { return abs(x[0]); });
  add_unary(rows, "clamp", false, [](const In& x) { return clamp(x[0], -0.5, 0.7); });
  add_unary(rows, "clamp-min", false, [](const In& x) { return clamp(x[0], 0.1); });
  add_unary(rows, "clamp-max", false, [](const In& x) { return clamp(x[0], std::nullopt, 0.2); });

  // where with a number for one branch
  add_unary(rows, "where-scalar-b", false, [](const In& x) { return where(x[0] > 0.0, x[0], -0.25); });
  add_unary(rows, "where-scalar-a", false, [](const In& x) { return where(x[0] > 0.3, 2.0, x[0]); });
  // where: a fixed condition, broadcast against both branches
  rows.push_back({"where/same",
                  [] {
                    return inputs({{3, 4}, {3, 4}});
                  },
                  [](const In& x) {
                    Tensor cond = gt(inputs({{3, 4}}, 99)[0].detach(), 0.0);
                    return where(cond, x[0], x[1]);
                  }});
  rows.push_back({"where/bcast",
                  [] {
                    return inputs({{4}, {3, 1}});
                  },
                  [](const In& x) {
                    Tensor cond = gt(inputs({{2, 3, 4}}, 98)[0].detach(), 0.0);
                    return where(cond, x[0], x[1]);
                  }});
  rows.push_back({"where/noncontig",
                  [] {
                    return In{noncontig({3, 4}), inputs({{}})[0]};
                  },
                  [](const In& x) {
                    Tensor cond = gt(inputs({{4, 3}}, 97)[0].detach(), 0.0).t();
                    return where(cond, x[0], x[1]);
                  }});

  // sum_to directly (it is differentiable too), and a composite chain
  rows.push_back({"sum_to/leading-and-ones",
                  [] {
                    return inputs({{2, 3, 4}});
                  },
                  [](const In& x) {
                    return sum_to(x[0], {3, 1});
                  }});
  rows.push_back({"chain/exp-log-div",
                  [] {
                    return In{inputs({{3, 4}})[0], inputs({{4}}, 8)[0], positive({3, 1})};
                  },
                  [](const In& x) { return log(exp(x[0] * x[1] + 1.0)) / x[2]; }});
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Elementwise, OpGradcheck, ::testing::ValuesIn(elementwise_rows()), row_name);

}  // namespace xgrad::testing
