// tests/core/gradcheck_rows_linalg.cpp: gradcheck rows for matmul (every rank combination,
// broadcast batch dims, transposed and sliced operands), linear, outer and norm.
// Adding an op adds a row (see gradcheck_table.h).
#include <cmath>

#include "gradcheck_table.h"

namespace xgrad::testing {
namespace {

using V = const std::vector<Tensor>&;

Tensor mm(V x) { return matmul(x[0], x[1]); }

GradcheckRow mm_row(const std::string& name, Shape a, Shape b) {
  return {"matmul/" + name, [a, b] { return inputs({a, b}); }, mm};
}

std::vector<GradcheckRow> linalg_rows() {
  return {
      mm_row("dot", {4}, {4}),
      mm_row("vecmat", {3}, {3, 4}),
      mm_row("matvec", {4, 3}, {3}),
      mm_row("mm", {3, 4}, {4, 2}),
      mm_row("vec-batched", {3}, {2, 3, 4}),
      mm_row("batched-vec", {2, 4, 3}, {3}),
      mm_row("bmm", {2, 3, 4}, {2, 4, 5}),
      mm_row("fold-3d-2d", {2, 3, 4}, {4, 5}),
      mm_row("2d-3d", {3, 4}, {2, 4, 5}),
      mm_row("bcast-batch", {2, 1, 3, 4}, {5, 4, 2}),
      mm_row("bcast-both", {3, 1, 2, 5}, {1, 4, 5, 3}),
      mm_row("batch1", {1, 3, 4}, {3, 4, 2}),
      mm_row("k1", {3, 1}, {1, 4}),
      {"matmul/noncontig-a",
       [] {
         return std::vector<Tensor>{noncontig({3, 4}), inputs({{4, 5}})[0]};
       },
       mm},
      {"matmul/noncontig-both-batched",
       [] {
         return std::vector<Tensor>{noncontig({2, 3, 4}), noncontig({2, 4, 5})};
       },
       mm},
      {"matmul/noncontig-vec",
       [] {
         return std::vector<Tensor>{noncontig({4}), noncontig({2, 4, 3})};
       },
       mm},
      {"matmul/keys-transposed",
       [] {
         return inputs({{2, 2, 3, 4}, {2, 2, 3, 4}});
       },
       [](V x) { return matmul(x[0], x[1].transpose(2, 3)); }},
      {"matmul/weight-t",
       [] {
         return inputs({{2, 3, 4}, {5, 4}});
       },
       [](V x) { return matmul(x[0], x[1].t()); }},
      {"matmul/strided-cols",
       [] {
         return inputs({{3, 8}, {4, 2}});
       },
       [](V x) { return matmul(x[0].slice(1, 0, 8, 2), x[1]); }},
      {"matmul/expanded",
       [] {
         return inputs({{3, 1}, {1, 2, 3}});
       },
       [](V x) {
         return matmul(x[1].expand({4, 2, 3}), x[0].expand({3, 5}));
       }},
      {"matmul/same-input",
       [] {
         return inputs({{3, 3}});
       },
       [](V x) { return matmul(x[0], x[0]); }},
      {"matmul/permuted-batch",
       [] {
         return inputs({{3, 2, 4}, {2, 4, 3}});
       },
       [](V x) { return matmul(x[0].transpose(0, 1), x[1]); }},
      // M and K >= 64: the batch is not folded by copying; one GEMM per matrix, accumulating
      {"matmul/permuted-batch-tall",
       [] {
         return inputs({{70, 2, 3}, {3, 2}});
       },
       [](V x) { return matmul(x[0].transpose(0, 1), x[1]); }},
      {"matmul/bcast-a-wide",
       [] {
         return inputs({{2, 3}, {2, 3, 66}});
       },
       mm},

      {"linear/2d",
       [] {
         return inputs({{3, 4}, {5, 4}, {5}});
       },
       [](V x) { return linear(x[0], x[1], x[2]); }},
      {"linear/3d",
       [] {
         return inputs({{2, 3, 4}, {5, 4}, {5}});
       },
       [](V x) { return linear(x[0], x[1], x[2]); }},
      {"linear/4d-nobias",
       [] {
         return inputs({{2, 2, 3, 4}, {5, 4}});
       },
       [](V x) { return linear(x[0], x[1]); }},
      {"linear/1d",
       [] {
         return inputs({{4}, {3, 4}, {3}});
       },
       [](V x) { return linear(x[0], x[1], x[2]); }},
      {"linear/noncontig-x-weight",
       [] {
         return std::vector<Tensor>{noncontig({2, 3, 4}), noncontig({5, 4}), inputs({{5}})[0]};
       },
       [](V x) { return linear(x[0], x[1], x[2]); }},
      {"linear/permuted-x",
       [] {
         return inputs({{3, 2, 4}, {5, 4}, {5}});
       },
       [](V x) { return linear(x[0].transpose(0, 1), x[1], x[2]); }},

      {"outer",
       [] {
         return inputs({{3}, {4}});
       },
       [](V x) { return outer(x[0], x[1]); }},
      {"outer/strided",
       [] {
         return std::vector<Tensor>{noncontig({5}), noncontig({2}, 3)};
       },
       [](V x) { return x[0].outer(x[1]); }},
      {"norm/2-all",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) { return norm(x[0]); }},
      {"norm/2-dim1",
       [] {
         return inputs({{3, 4, 2}});
       },
       [](V x) { return x[0].norm(2, 1); }},
      {"norm/1-dim-1-keepdim",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) { return x[0].norm(1, -1, true); }},
      {"norm/3-dims",
       [] {
         return inputs({{3, 4, 2}});
       },
       [](V x) {
         return norm(x[0], 3, {0, 2});
       }},
      {"norm/1.5-noncontig",
       [] {
         return std::vector<Tensor>{noncontig({4, 3})};
       },
       [](V x) { return x[0].norm(1.5, 0); }},
      {"norm/inf-dim1",
       [] {
         return inputs({{3, 5}});
       },
       [](V x) { return x[0].norm(INFINITY, 1); }},
      // ---- einsum (the seeds' attention patterns, and contraction orders beyond them)
      {"einsum/bhqd,bhkd->bhqk",
       [] {
         return inputs({{2, 2, 3, 4}, {2, 2, 5, 4}});
       },
       [](V x) { return einsum("bhqd,bhkd->bhqk", x[0], x[1]); }},
      {"einsum/bhqk,bhkd->bhqd-noncontig",
       [] {
         return std::vector<Tensor>{noncontig({2, 3, 4}), inputs({{2, 4, 5}})[0]};
       },
       [](V x) { return einsum("bqk,bkd->bqd", x[0], x[1]); }},
      {"einsum/ij,jk->ik",
       [] {
         return inputs({{3, 4}, {4, 2}});
       },
       [](V x) { return einsum("ij,jk->ik", x[0], x[1]); }},
      {"einsum/i,j->ij",
       [] {
         return inputs({{3}, {4}});
       },
       [](V x) { return einsum("i,j->ij", x[0], x[1]); }},
      {"einsum/implicit-ji,kj",
       [] {
         return inputs({{4, 3}, {2, 4}});
       },
       [](V x) { return einsum("ji,kj", x[0], x[1]); }},
      {"einsum/bij->jb-sums-i",
       [] {
         return inputs({{2, 3, 4}});
       },
       [](V x) { return einsum("bij->jb", {x[0]}); }},
      {"einsum/ij,jk,kl->il",
       [] {
         return inputs({{2, 3}, {3, 4}, {4, 2}});
       },
       [](V x) { return einsum("ij,jk,kl->il", x[0], x[1], x[2]); }},
      {"einsum/bthd,hde->bte",
       [] {
         return inputs({{2, 3, 2, 4}, {2, 4, 3}});
       },
       [](V x) { return einsum("bthd,hde->bte", x[0], x[1]); }},
  };
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Linalg, OpGradcheck, ::testing::ValuesIn(linalg_rows()), row_name);

}  // namespace xgrad::testing
