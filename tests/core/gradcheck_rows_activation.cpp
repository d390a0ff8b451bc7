// tests/core/gradcheck_rows_activation.cpp: gradcheck rows for softmax, log_softmax, relu,
// sigmoid and gelu (several shapes and dims, non-contiguous inputs, masked softmax rows).
// Add a row per new case; the shared test is OpGradcheck (test_gradcheck.cpp).
#include <cmath>

#include "gradcheck_table.h"

namespace xgrad::testing {

namespace {
using V = std::vector<Tensor>;

// (3, 5) float64 leaf with -inf in a causal pattern: row 0 keeps one element, row 1 two, ...
Tensor masked_leaf() {
  Tensor t = inputs({{3, 5}}, 21)[0].detach();
  double* p = t.data_ptr<double>();
  for (int r = 0; r < 3; ++r)
    for (int c = r + 1; c < 5; ++c) p[r * 5 + c] = -INFINITY;
  return t.requires_grad_();
}

// relu has a kink at 0: keep the inputs at least 0.1 away from it
Tensor away_from_zero(const Shape& shape) {
  Tensor t = inputs({shape}, 23)[0].detach();
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] < 0 ? p[i] - 0.1 : p[i] + 0.1;
  return t.requires_grad_();
}
}  // namespace

std::vector<GradcheckRow> activation_rows() {
  std::vector<GradcheckRow> rows;
  for (int64_t d : {-1, 0, 1}) {
    const std::string s = std::to_string(d);
    rows.push_back({"softmax/2d/dim" + s,
                    [] {
                      return inputs({{3, 4}});
                    },
                    [d](const V& x) { return softmax(x[0], d); }});
    rows.push_back({"softmax/3d/dim" + s,
                    [] {
                      return inputs({{2, 3, 4}});
                    },
                    [d](const V& x) { return softmax(x[0], d); }});
    rows.push_back({"softmax/noncontig/dim" + s,
                    [] {
                      return V{noncontig({4, 5})};
                    },
                    [d](const V& x) { return softmax(x[0], d); }});
    rows.push_back({"log_softmax/2d/dim" + s,
                    [] {
                      return inputs({{3, 4}});
                    },
                    [d](const V& x) { return log_softmax(x[0], d); }});
    rows.push_back({"log_softmax/3d/dim" + s,
                    [] {
                      return inputs({{2, 3, 4}});
                    },
                    [d](const V& x) { return log_softmax(x[0], d); }});
    rows.push_back({"log_softmax/noncontig/dim" + s,
                    [] {
                      return V{noncontig({4, 5})};
                    },
                    [d](const V& x) { return log_softmax(x[0], d); }});
  }
  rows.push_back({"softmax/long_row",
                  [] {
                    return inputs({{2, 37}});
                  },
                  [](const V& x) { return softmax(x[0], -1); }});
  rows.push_back({"log_softmax/long_row",
                  [] {
                    return inputs({{2, 37}});
                  },
                  [](const V& x) { return log_softmax(x[0], -1); }});
  rows.push_back({"softmax/4d/dim2",
                  [] {
                    return inputs({{2, 2, 3, 3}});
                  },
                  [](const V& x) { return softmax(x[0], 2); }});
  rows.push_back(
      {"softmax/masked_rows", [] { return V{masked_leaf()}; }, [](const V& x) { return softmax(x[0], -1); }});
  rows.push_back({"softmax/masked_rows/dim0", [] { return V{masked_leaf()}; },
                  [](const V& x) { return softmax(x[0].t(), 0); }});
  rows.push_back({"softmax/1d", [] { return inputs({{6}}); }, [](const V& x) { return softmax(x[0], 0); }});

  rows.push_back({"relu/2d",
                  [] {
                    return V{away_from_zero({4, 5})};
                  },
                  [](const V& x) { return relu(x[0]); }});
  rows.push_back({"relu/3d_transposed",
                  [] {
                    return V{away_from_zero({2, 3, 4})};
                  },
                  [](const V& x) { return relu(x[0].transpose(0, 2)); }});
  rows.push_back({"sigmoid/2d", [] { return inputs({{4, 5}}); }, [](const V& x) { return sigmoid(x[0]); }});
  rows.push_back({"sigmoid/noncontig",
                  [] {
                    return V{noncontig({3, 6})};
                  },
                  [](const V& x) { return sigmoid(x[0]); }});
  rows.push_back(
      {"sigmoid/long", [] { return inputs({{37}}); }, [](const V& x) { return sigmoid(x[0] * 3.0); }});
  for (std::string approx : {"none", "tanh"}) {
    rows.push_back({"gelu/" + approx + "/2d",
                    [] {
                      return inputs({{4, 5}});
                    },
                    [approx](const V& x) { return gelu(x[0], approx); }});
    rows.push_back({"gelu/" + approx + "/noncontig",
                    [] {
                      return V{noncontig({3, 6})};
                    },
                    [approx](const V& x) { return gelu(x[0], approx); }});
    rows.push_back({"gelu/" + approx + "/long",
                    [] {
                      return inputs({{2, 19}});
                    },
                    [approx](const V& x) { return gelu(x[0] * 2.5, approx); }});
  }
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Activation, OpGradcheck, ::testing::ValuesIn(activation_rows()), row_name);

}  // namespace xgrad::testing
