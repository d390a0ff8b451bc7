// core/src/ops/einsum.cpp: torch.einsum over explicit subscripts ("bhqd,bhkd->bhqk").
//
// einsum is a composition, not a kernel: each operand first sums out the letters nothing
// else needs, then operands are contracted left to right, two at a time, as torch does:
//   A (batch, left, contracted) and B (batch, contracted, right), permuted and reshaped to
//   (nb, nl, nk) and (nb, nk, nr), one batched matmul, reshaped and permuted to the output.
// Every step is a differentiable op (sum, permute, reshape, matmul), so the backward is
// theirs and needs no closure here. Not supported (each a clear error): "..." (ellipsis),
// a letter repeated within one operand (diagonals), and size-1 broadcasting of a letter.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

struct Operand {
  std::string letters;  // one per dim
  Tensor t;
};

std::string strip_spaces(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ') out.push_back(c);
  return out;
}

// Sums out the letters of `x` not in `keep`.
Operand sum_unneeded(Operand x, const std::string& keep) {
  std::vector<int64_t> dims;
  std::string kept;
  for (std::size_t i = 0; i < x.letters.size(); ++i) {
    if (keep.find(x.letters[i]) == std::string::npos) dims.push_back(static_cast<int64_t>(i));
    else kept.push_back(x.letters[i]);
  }
  if (dims.empty()) return x;
  return {kept, sum(x.t, Dims(Shape(dims.begin(), dims.end())))};
}

// a (letters la) and b (letters lb) -> their product with letters `out` (each in a or b);
// letters of both that are not in `out` are summed over.
Operand contract(const Operand& a, const Operand& b, const std::string& out,
                 const std::map<char, int64_t>& size) {
  std::string batch, left, right, inner;
  for (char c : a.letters) {
    const bool in_b = b.letters.find(c) != std::string::npos, in_out = out.find(c) != std::string::npos;
    if (in_b && in_out) batch.push_back(c);
    else if (in_b) inner.push_back(c);
    else left.push_back(c);  // in out (sum_unneeded dropped the rest)
  }
  for (char c : b.letters)
    if (a.letters.find(c) == std::string::npos) right.push_back(c);
  auto arrange = [&](const Operand& x, const std::string& order) {
    Shape perm;
    for (char c : order) perm.push_back(static_cast<int64_t>(x.letters.find(c)));
    return x.t.permute(perm);
  };
  auto count = [&](const std::string& ls) {
    int64_t n = 1;
    for (char c : ls) n *= size.at(c);
    return n;
  };
  const int64_t nb = count(batch), nl = count(left), nk = count(inner), nr = count(right);
  Tensor am = arrange(a, batch + left + inner).reshape(Shape{nb, nl, nk});   // (nb, nl, nk)
  Tensor bm = arrange(b, batch + inner + right).reshape(Shape{nb, nk, nr});  // (nb, nk, nr)
  Tensor prod = matmul(am, bm);                                              // (nb, nl, nr)
  const std::string got = batch + left + right;
  Shape got_shape;
  for (char c : got) got_shape.push_back(size.at(c));
  return {got, prod.reshape(got_shape)};
}

// The comma-separated operand subscripts of an equation's left-hand side.
std::vector<std::string> split_terms(const std::string& lhs) {
  std::vector<std::string> terms;
  for (std::size_t start = 0;;) {
    const std::size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return terms;
}

// The output subscripts of eq (equation without spaces; arrow: where "->" is, or npos), checked
// against the operands' letters (size) and their use counts.
std::string output_subscripts(const std::string& equation, const std::string& eq, std::size_t arrow,
                              const std::map<char, int64_t>& size, const std::map<char, int64_t>& uses) {
  const char* op = "einsum";
  std::string out;
  if (arrow == std::string::npos) {  // implicit output: the letters used once, alphabetically
    for (const auto& [c, n] : uses)
      if (n == 1) out.push_back(c);
    return out;
  }
  out = eq.substr(arrow + 2);
  for (std::size_t d = 0; d < out.size(); ++d) {
    if (!size.count(out[d]))
      fail(op, "equation \"", equation, "\": output subscript '", std::string(1, out[d]),
           "' appears in no operand");
    if (out.find(out[d]) != d)
      fail(op, "equation \"", equation, "\": output subscript '", std::string(1, out[d]), "' repeats");
  }
  return out;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  profiler::RecordFunction rec("einsum");
  const char* op = "einsum";
  const std::string eq = strip_spaces(equation);
  if (eq.find('.') != std::string::npos)
    fail(op, "equation \"", equation, "\": ellipsis (...) is not supported; write every dim's letter");
  const std::size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  const std::vector<std::string> terms = split_terms(lhs);
  if (terms.size() != operands.size())
    fail(op, "equation \"", equation, "\" has ", terms.size(), " operand(s) but ", operands.size(),
         " tensor(s) were given");
  std::map<char, int64_t> size, uses;
  std::vector<Operand> xs;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const std::string& t = terms[i];
    const Tensor& x = operands[i];
    if (!x.defined()) fail(op, "operand ", i, " is undefined");
    if (static_cast<int64_t>(t.size()) != x.dim())
      fail(op, "equation \"", equation, "\": operand ", i, " has subscripts \"", t, "\" (", t.size(),
           " dims) but shape ", x.shape());
    for (std::size_t d = 0; d < t.size(); ++d) {
      const char c = t[d];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
        fail(op, "equation \"", equation, "\": invalid subscript '", std::string(1, c), "' (letters only)");
      if (t.find(c) != d)
        fail(op, "equation \"", equation, "\": subscript '", std::string(1, c), "' repeats within operand ",
             i, " (diagonals are not supported)");
      const int64_t n = x.shape()[d];
      auto [it, fresh] = size.emplace(c, n);
      if (!fresh && it->second != n)
        fail(op, "equation \"", equation, "\": subscript '", std::string(1, c), "' is ", it->second,
             " in one operand and ", n, " in operand ", i, " (shape ", x.shape(),
             "; size-1 broadcasting is not supported)");
      ++uses[c];
    }
    if (i > 0 && x.dtype() != operands[0].dtype())
      fail(op, "operands have different dtypes: ", dtype_name(operands[0].dtype()), " (shape ",
           operands[0].shape(), ") and ", dtype_name(x.dtype()), " (shape ", x.shape(), ")");
    xs.push_back({t, x});
  }
  const std::string out = output_subscripts(equation, eq, arrow, size, uses);
  // letters still needed after operand i: the output's and those of operands i+1..
  auto needed_after = [&](std::size_t i) {
    std::string keep = out;
    for (std::size_t j = i + 1; j < xs.size(); ++j) keep += xs[j].letters;
    return keep;
  };
  Operand acc = sum_unneeded(xs[0], needed_after(0) + (xs.size() > 1 ? xs[1].letters : ""));
  for (std::size_t i = 1; i < xs.size(); ++i) {
    const std::string keep = needed_after(i);
    Operand b = sum_unneeded(xs[i], keep + acc.letters);
    std::string target;  // letters of acc or b that are still needed
    for (char c : acc.letters + b.letters)
      if (keep.find(c) != std::string::npos && target.find(c) == std::string::npos) target.push_back(c);
    acc = contract(acc, b, target, size);
  }
  acc = sum_unneeded(acc, out);
  Shape perm;
  for (char c : out) perm.push_back(static_cast<int64_t>(acc.letters.find(c)));
  if (perm.empty()) return acc.t;
  bool identity = true;
  for (std::size_t d = 0; d < perm.size(); ++d) identity = identity && perm[d] == static_cast<int64_t>(d);
  return identity ? acc.t : acc.t.permute(perm);
}

}  // namespace xgrad
