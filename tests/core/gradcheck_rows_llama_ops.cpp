// tests/core/gradcheck_rows_llama_ops.cpp: gradcheck rows for rms_norm, apply_rotary_emb and
// silu_mul (core/src/ops/norm.cpp, rotary.cpp, silu_mul.cpp). The rotary tables are random leaves here (not
// cos and sin of angles), so their gradients are checked too; rows named */x_only keep them constant.
#include "gradcheck_table.h"

namespace xgrad::testing {

namespace {
using V = std::vector<Tensor>;
}  // namespace

std::vector<GradcheckRow> llama_ops_rows() {
  std::vector<GradcheckRow> rows;
  // ---- rms_norm
  rows.push_back({"rms_norm/2d",
                  [] {
                    return inputs({{3, 8}, {8}});
                  },
                  [](const V& x) { return rms_norm(x[0], {8}, x[1], 1e-5); }});
  rows.push_back({"rms_norm/3d_over_2dims",
                  [] {
                    return inputs({{2, 3, 4}, {3, 4}});
                  },
                  [](const V& x) {
                    return rms_norm(x[0], {3, 4}, x[1], 1e-6);
                  }});
  rows.push_back({"rms_norm/noncontig",
                  [] {
                    return V{noncontig({5, 6}), inputs({{6}})[0]};
                  },
                  [](const V& x) { return rms_norm(x[0], {6}, x[1]); }});
  rows.push_back({"rms_norm/no_weight",
                  [] {
                    return inputs({{4, 7}});
                  },
                  [](const V& x) { return rms_norm(x[0], {7}); }});
  rows.push_back({"rms_norm/wide",
                  [] {
                    return inputs({{3, 37}, {37}});
                  },
                  [](const V& x) { return rms_norm(x[0], {37}, x[1], 1e-3); }});
  // 150 rows: the backward sums dw over blocks of 64 rows (two whole, one partial)
  rows.push_back({"rms_norm/row_blocks",
                  [] {
                    return inputs({{2, 75, 5}, {5}});
                  },
                  [](const V& x) { return rms_norm(x[0], {5}, x[1], 1e-5); }});

  // ---- apply_rotary_emb
  rows.push_back({"apply_rotary_emb/bhtd",
                  [] {
                    return inputs({{2, 3, 4, 6}, {4, 6}, {4, 6}});
                  },
                  [](const V& x) { return apply_rotary_emb(x[0], x[1], x[2]); }});
  rows.push_back({"apply_rotary_emb/transposed_heads",
                  [] {
                    return inputs({{2, 5, 3, 4}, {5, 4}, {5, 4}});
                  },
                  [](const V& x) { return apply_rotary_emb(x[0].transpose(1, 2), x[1], x[2]); }});
  rows.push_back({"apply_rotary_emb/wide/x_only",
                  [] {
                    return inputs({{2, 3, 40}});
                  },
                  [](const V& x) {
                    Generator g(9);
                    return apply_rotary_emb(x[0], randn({3, 40}, &g, kFloat64), randn({3, 40}, &g, kFloat64));
                  }});
  rows.push_back({"apply_rotary_emb/2d",
                  [] {
                    return inputs({{5, 2}, {5, 2}, {5, 2}});
                  },
                  [](const V& x) { return apply_rotary_emb(x[0], x[1], x[2]); }});

  // ---- silu_mul
  rows.push_back({"silu_mul/2d",
                  [] {
                    return inputs({{4, 5}, {4, 5}});
                  },
                  [](const V& x) { return silu_mul(x[0] * 3.0, x[1]); }});
  rows.push_back({"silu_mul/noncontig",
                  [] {
                    return V{noncontig({5, 6}), inputs({{5, 6}})[0]};
                  },
                  [](const V& x) { return silu_mul(x[0], x[1]); }});
  return rows;
}

INSTANTIATE_TEST_SUITE_P(LlamaOps, OpGradcheck, ::testing::ValuesIn(llama_ops_rows()), row_name);

}  // namespace xgrad::testing
