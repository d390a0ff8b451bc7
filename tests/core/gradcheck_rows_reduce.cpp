// tests/core/gradcheck_rows_reduce.cpp: gradcheck rows for core/src/ops/reduce.cpp.
// Each reduction over all dims, one dim, several dims, negative dims, keepdim true/false, and
// non-contiguous inputs. max/min/amax use randn inputs (no ties, so finite differences hold);
// their tie rules are checked against torch in test_reduce.cpp.
#include "gradcheck_table.h"

namespace xgrad::testing {
namespace {

using In = std::vector<Tensor>;

// The inputs every reduction variant is checked on: 3-D contiguous and 3-D transposed.
struct Input {
  const char* name;
  std::function<In()> make;
};
std::vector<Input> reduce_inputs() {
  return {
      {"3d",
       [] {
         return inputs({{2, 3, 4}});
       }},
      {"noncontig",
       [] {
         return In{noncontig({2, 4, 3})};
       }},
  };
}

void add_rows(std::vector<GradcheckRow>& rows, const std::string& op,
              const std::vector<std::pair<std::string, GradcheckFn>>& variants) {
  for (const Input& in : reduce_inputs())
    for (const auto& [vname, fn] : variants) rows.push_back({op + "/" + vname + "/" + in.name, in.make, fn});
}

}  // namespace

std::vector<GradcheckRow> reduce_rows() {
  std::vector<GradcheckRow> rows;
  add_rows(rows, "sum",
           {
               {"all", [](const In& x) { return sum(x[0]); }},
               {"dim1", [](const In& x) { return sum(x[0], {1}); }},
               {"dim-1-keepdim", [](const In& x) { return sum(x[0], {-1}, true); }},
               {"dims0,2",
                [](const In& x) {
                  return sum(x[0], {0, 2});
                }},
               {"dims-1,0-keepdim",
                [](const In& x) {
                  return sum(x[0], {-1, 0}, true);
                }},
               {"leading",
                [](const In& x) {
                  return sum(x[0], {0, 1});
                }},
           });
  add_rows(rows, "mean",
           {
               {"all", [](const In& x) { return mean(x[0]); }},
               {"dim0", [](const In& x) { return mean(x[0], {0}); }},
               {"dim-2-keepdim", [](const In& x) { return mean(x[0], {-2}, true); }},
               {"dims1,2",
                [](const In& x) {
                  return mean(x[0], {1, 2});
                }},
           });
  add_rows(rows, "var",
           {
               {"all", [](const In& x) { return var(x[0]); }},
               {"all-biased", [](const In& x) { return var(x[0], false); }},
               {"dim1", [](const In& x) { return var(x[0], {1}); }},
               {"dim-1-biased-keepdim", [](const In& x) { return var(x[0], {-1}, false, true); }},
               {"dims0,2",
                [](const In& x) {
                  return var(x[0], {0, 2});
                }},
           });
  // an int is a dim (x.var(-1) is the variance of each row, not of everything)
  add_rows(rows, "var-int-dim",
           {
               {"m1", [](const In& x) { return x[0].var(-1); }},
               {"0-biased-keepdim", [](const In& x) { return var(x[0], 0, false, true); }},
           });
  add_rows(rows, "std",
           {
               {"all", [](const In& x) { return xgrad::std(x[0]); }},
               {"all-biased", [](const In& x) { return x[0].std(false); }},
               {"dim-1", [](const In& x) { return x[0].std(-1); }},
               {"dim1-biased-keepdim", [](const In& x) { return xgrad::std(x[0], 1, false, true); }},
               {"dims0,2",
                [](const In& x) {
                  return x[0].std({0, 2});
                }},
           });
  add_rows(rows, "amin",
           {
               {"dim1", [](const In& x) { return amin(x[0], 1); }},
               {"dims0,-1-keepdim",
                [](const In& x) {
                  return x[0].amin({0, -1}, true);
                }},
               {"all", [](const In& x) { return amin(x[0]); }},
           });
  add_rows(rows, "max",
           {
               {"all", [](const In& x) { return max(x[0]); }},
               {"dim1", [](const In& x) { return max(x[0], 1).values; }},
               {"dim-1-keepdim", [](const In& x) { return max(x[0], -1, true).values; }},
               {"dim0", [](const In& x) { return max(x[0], 0).values; }},
           });
  add_rows(rows, "min",
           {
               {"all", [](const In& x) { return min(x[0]); }},
               {"dim2", [](const In& x) { return min(x[0], 2).values; }},
               {"dim-3-keepdim", [](const In& x) { return min(x[0], -3, true).values; }},
           });
  add_rows(rows, "amax",
           {
               {"dim1", [](const In& x) { return amax(x[0], {1}); }},
               {"dims0,-1-keepdim",
                [](const In& x) {
                  return amax(x[0], {0, -1}, true);
                }},
               {"all", [](const In& x) { return amax(x[0], {}); }},
           });
  // 1-D strided and 0-d inputs
  rows.push_back(
      {"sum/1d-strided", [] { return In{noncontig({5})}; }, [](const In& x) { return sum(x[0], {0}); }});
  rows.push_back({"mean/0d", [] { return inputs({{}}); }, [](const In& x) { return mean(x[0]); }});
  rows.push_back(
      {"max/0d-dim", [] { return inputs({{}}); }, [](const In& x) { return max(x[0], 0).values; }});
  rows.push_back(
      {"var/1d-strided", [] { return In{noncontig({6})}; }, [](const In& x) { return var(x[0]); }});
  // a reduction feeding broadcasting ops: softmax written by hand
  rows.push_back({"chain/softmax-by-hand",
                  [] {
                    return inputs({{3, 5}});
                  },
                  [](const In& x) {
                    Tensor e = exp(x[0] - amax(x[0], {-1}, true));
                    return e / sum(e, {-1}, true);
                  }});
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Reduce, OpGradcheck, ::testing::ValuesIn(reduce_rows()), row_name);

}  // namespace xgrad::testing
