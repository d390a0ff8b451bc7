// xgrad/ops.h: every op, as free functions named like torch's.
//
// One source file per family under core/src/ops/ (creation, elementwise, reduce, shape,
// indexing, linalg, activation, attention, nn_functional); each op's backward closure sits
// right under its forward. Binary elementwise ops broadcast like NumPy/PyTorch. Integer dims
// may be negative. Parameters are typed like torch's: Flag (bool only), Int (integers only),
// Dims (an int or a list) from arg_types.h, so no int slides into a flag or a bool into a dim.
// Adding an op: declare it here, implement forward + backward in its family's file, add a
// row to the gradcheck table (tests/core/gradcheck_rows_<family>.cpp).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "xgrad/tensor.h"

namespace xgrad {

// =====================================================================  creation.cpp
Tensor zeros(const Shape& shape, DType dtype = kFloat32);
Tensor ones(const Shape& shape, DType dtype = kFloat32);
// full: the dtype follows the value unless `dtype` says otherwise, as in torch: full(s, 1.5)
// is float32, full(s, 1) int64, full(s, true) bool.
namespace detail {
Tensor full_impl(const Shape& shape, double value, DType dtype);
}  // namespace detail
template <class V>
requires std::is_arithmetic_v<V> Tensor full(const Shape& shape, V value,
                                             std::optional<DType> dtype = std::nullopt) {
  const DType inferred = std::same_as<V, bool> ? kBool : Integer<V> ? kInt64 : kFloat32;
  return detail::full_impl(shape, static_cast<double>(value), dtype.value_or(inferred));
}
// arange: int64 when every bound is an integer, else float32 (torch's inference: arange(5)
// is int64, arange(5.0) and arange(0, 1, 0.1) float32), unless `dtype` says otherwise.
namespace detail {
Tensor arange_impl(double start, double end, double step, DType dtype);
template <class... T>
constexpr DType arange_dtype() {
  return (Integer<T> && ...) ? kInt64 : kFloat32;
}
}  // namespace detail
template <class E>
requires std::is_arithmetic_v<E> Tensor arange(E end, std::optional<DType> dtype = std::nullopt) {
  return detail::arange_impl(0.0, static_cast<double>(end), 1.0, dtype.value_or(detail::arange_dtype<E>()));
}
template <class S, class E, class St = int>
requires std::is_arithmetic_v<S> && std::is_arithmetic_v<E> && std::is_arithmetic_v<St> Tensor
arange(S start, E end, St step = 1, std::optional<DType> dtype = std::nullopt) {
  return detail::arange_impl(static_cast<double>(start), static_cast<double>(end), static_cast<double>(step),
                             dtype.value_or(detail::arange_dtype<S, E, St>()));
}
Tensor linspace(double start, double end, Int steps, DType dtype = kFloat32);
Tensor eye(Int n, Int m = -1, DType dtype = kFloat32);
// Random tensors draw from `gen`, or the default generator (see random.h); the streams
// match torch's for the same seed and shape.
Tensor rand(const Shape& shape, Generator* gen = nullptr, DType dtype = kFloat32);
Tensor randn(const Shape& shape, Generator* gen = nullptr, DType dtype = kFloat32);
Tensor randint(Int low, Int high, const Shape& shape, Generator* gen = nullptr);
// A random permutation of 0 .. n-1 (int64), torch.randperm's CPU algorithm and stream
// (randperm.cpp): n - 1 draws from `gen`, or from the default generator.
Tensor randperm(Int n, Generator* gen = nullptr);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor empty_like(const Tensor& t);
Tensor rand_like(const Tensor& t, Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, Generator* gen = nullptr);
// From a flat vector in row-major order.
Tensor from_vector(const std::vector<float>& values, const Shape& shape);
Tensor from_vector(const std::vector<double>& values, const Shape& shape);
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape);
Tensor scalar_tensor(double value, DType dtype = kFloat32);

namespace detail {
template <class T>
struct literal_dtype {
  static constexpr DType value = kFloat32;
};
template <>
struct literal_dtype<int> {
  static constexpr DType value = kInt64;
};
template <>
struct literal_dtype<long> {
  static constexpr DType value = kInt64;
};
template <>
struct literal_dtype<long long> {
  static constexpr DType value = kInt64;
};
template <>
struct literal_dtype<bool> {
  static constexpr DType value = kBool;
};
template <class T>
void flatten_into(std::vector<double>& out, std::initializer_list<T> l) {
  for (const T& v : l) out.push_back(static_cast<double>(v));
}
template <class T>
void flatten_into(std::vector<double>& out, std::initializer_list<std::initializer_list<T>> l) {
  for (auto& v : l) flatten_into(out, v);
}
template <class T>
void flatten_into(std::vector<double>& out,
                  std::initializer_list<std::initializer_list<std::initializer_list<T>>> l) {
  for (auto& v : l) flatten_into(out, v);
}
Tensor tensor_from_values(const std::vector<double>& values, const Shape& shape, DType dtype);
Shape nested_shape_checked(const char* op, const std::vector<Shape>& row_shapes, Shape inner);
}  // namespace detail

// torch.tensor(...) from nested braces. Floating literals give float32 (torch's default
// dtype), integer literals int64, bools bool, unless `dtype` says otherwise:
//   auto inputs = tensor({{0.43, 0.15, 0.89}, {0.55, 0.87, 0.66}});   // (2, 3) float32
//   auto ids = tensor({0, 1, 2, 3});                                   // (4,) int64
template <class T>
Tensor tensor(std::initializer_list<T> values, std::optional<DType> dtype = std::nullopt) {
  std::vector<double> flat;
  detail::flatten_into(flat, values);
  return detail::tensor_from_values(flat, {static_cast<int64_t>(values.size())},
                                    dtype.value_or(detail::literal_dtype<T>::value));
}
template <class T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> values,
              std::optional<DType> dtype = std::nullopt) {
  std::vector<double> flat;
  std::vector<Shape> rows;
  for (auto& r : values) rows.push_back({static_cast<int64_t>(r.size())});
  Shape shape = detail::nested_shape_checked("tensor", rows, {static_cast<int64_t>(values.size())});
  detail::flatten_into(flat, values);
  return detail::tensor_from_values(flat, shape, dtype.value_or(detail::literal_dtype<T>::value));
}
template <class T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values,
              std::optional<DType> dtype = std::nullopt) {
  std::vector<double> flat;
  std::vector<Shape> rows;
  for (auto& m : values) {
    std::vector<Shape> inner;
    for (auto& r : m) inner.push_back({static_cast<int64_t>(r.size())});
    rows.push_back(detail::nested_shape_checked("tensor", inner, {static_cast<int64_t>(m.size())}));
  }
  Shape shape = detail::nested_shape_checked("tensor", rows, {static_cast<int64_t>(values.size())});
  detail::flatten_into(flat, values);
  return detail::tensor_from_values(flat, shape, dtype.value_or(detail::literal_dtype<T>::value));
}

// =====================================================================  elementwise.cpp
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max = std::nullopt);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// where(cond, a, b): a where cond is true, else b (broadcasting all three).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);  // torch.where(c, x, 0.0)
Tensor where(const Tensor& cond, double a, const Tensor& b);
// Comparisons return bool tensors and record no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_not(const Tensor& a);
// Gradient helper: sums `grad` over the dims that broadcasting expanded, giving `shape`.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// =====================================================================  elementwise_math.cpp
// sin, cos, log1p, expm1, erf and atan2 compute int64/bool inputs in float32, as torch does.
Tensor silu(const Tensor& a);                                                  // F.silu: x * sigmoid(x)
Tensor softplus(const Tensor& a, double beta = 1.0, double threshold = 20.0);  // F.softplus
Tensor sin(const Tensor& a);                                                   // torch.sin
Tensor cos(const Tensor& a);                                                   // torch.cos
Tensor log1p(const Tensor& a);                                                 // torch.log1p: log(1 + x)
Tensor expm1(const Tensor& a);                                                 // torch.expm1: exp(x) - 1
Tensor erf(const Tensor& a);                                                   // torch.erf
Tensor atan2(const Tensor& a, const Tensor& b);  // torch.atan2(a, b): angle of (b, a), broadcast

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator-(double a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator/(double a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, double b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, double b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, double b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, double b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, double b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, double b) { return ge(a, b); }
inline Tensor operator!(const Tensor& a) { return logical_not(a); }

// =====================================================================  reduce.cpp
// dims: one dim (sum(x, -1)), a list (sum(x, {0, 2})) or a Shape; {} = all dims. keepdim
// keeps reduced dims with size 1. Flags bind to bool only and dims to integers only
// (arg_types.h), so var(x, 1) is the variance over dim 1, as in torch.
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, Dims dims, Flag keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, Dims dims, Flag keepdim = false);
Tensor var(const Tensor& a, Flag unbiased = true);
Tensor var(const Tensor& a, Dims dims, Flag unbiased = true, Flag keepdim = false);
Tensor std(const Tensor& a, Flag unbiased = true);  // sqrt(var)
Tensor std(const Tensor& a, Dims dims, Flag unbiased = true, Flag keepdim = false);
Tensor max(const Tensor& a);  // over all elements
ValuesIndices max(const Tensor& a, Int dim, Flag keepdim = false);
Tensor max(const Tensor& a, const Tensor& other);  // torch.max(a, b): maximum
Tensor min(const Tensor& a);
ValuesIndices min(const Tensor& a, Int dim, Flag keepdim = false);
Tensor min(const Tensor& a, const Tensor& other);  // minimum
Tensor amax(const Tensor& a, Dims dims = {}, Flag keepdim = false);
Tensor amin(const Tensor& a, Dims dims = {}, Flag keepdim = false);
Tensor argmax(const Tensor& a);  // flat index, int64
Tensor argmax(const Tensor& a, Int dim, Flag keepdim = false);
Tensor argmin(const Tensor& a);
Tensor argmin(const Tensor& a, Int dim, Flag keepdim = false);
// torch.cumsum(x, dim): running sums along dim; int64/bool give int64.
Tensor cumsum(const Tensor& a, Int dim);
// torch.logsumexp(x, dim, keepdim): log(sum(exp(x))) over dims ({} = all), shifted by the
// max (a row of -inf gives -inf); int64/bool compute in float32.
Tensor logsumexp(const Tensor& a, Dims dims, Flag keepdim = false);

// =====================================================================  shape.cpp
// (view, reshape, transpose, permute, slice, narrow, select, unsqueeze, squeeze, expand and
// contiguous are Tensor methods; their backward lives in shape.cpp too.)
Tensor cat(const std::vector<Tensor>& tensors, Int dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, Int dim = 0);
std::vector<Tensor> split(const Tensor& a, Int split_size, Int dim = 0);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, Int dim = 0);
// split(x, {2}, 1) means sizes {2}, as torch.split(x, [2], 1) (not split_size 2).
inline std::vector<Tensor> split(const Tensor& a, std::initializer_list<int64_t> sizes, Int dim = 0) {
  return split(a, std::vector<int64_t>(sizes), dim);
}
std::vector<Tensor> chunk(const Tensor& a, Int chunks, Int dim = 0);
// out[..., i, ...] = a[..., index[i], ...] along dim; index is 1-D int64.
Tensor index_select(const Tensor& a, Int dim, const Tensor& index);
// value where mask (bool, broadcast to a's shape) is true.
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);
Tensor triu(const Tensor& a, Int diagonal = 0);
Tensor tril(const Tensor& a, Int diagonal = 0);
// In place (differentiable, like masked_fill_): zero outside the triangle.
Tensor& triu_(Tensor& a, Int diagonal = 0);
Tensor& tril_(Tensor& a, Int diagonal = 0);
// torch.roll: shift elements along dims (one int or a list each, same length), wrapping
// around; dims {} rolls the flattened tensor and restores the shape.
Tensor roll(const Tensor& a, Dims shifts, Dims dims = {});
// torch.repeat_interleave(x, repeats, dim): each slice along dim repeated `repeats` times in
// place ([a, b] -> [a, a, b, b]); without dim, of the flattened x. An index_select, as torch's.
Tensor repeat_interleave(const Tensor& a, Int repeats);
Tensor repeat_interleave(const Tensor& a, Int repeats, Int dim);

// =====================================================================  indexing.cpp
// out[i][j][k] = a[index[i][j][k]][j][k] (dim 0; likewise for any dim): index int64 with the
// same rank as a and index.size(d) <= a.size(d) for d != dim.
Tensor gather(const Tensor& a, Int dim, const Tensor& index);
// out = a, then out[index[i][j][k]][j][k] += src[i][j][k] (dim 0): gather's adjoint.
Tensor scatter_add(const Tensor& a, Int dim, const Tensor& index, const Tensor& src);
// The elements where mask (bool, broadcast with a) is true, as a 1-D tensor (row-major order).
Tensor masked_select(const Tensor& a, const Tensor& mask);
// The k largest (largest = false: smallest) along dim, in order (also when !sorted: torch
// leaves that order unspecified); indices int64. Equal values keep the lower index first
// (torch leaves their order unspecified too); NaN ranks above every number. values carry
// the gradient back to the chosen elements.
ValuesIndices topk(const Tensor& a, Int k, Int dim = -1, Flag largest = true, Flag sorted = true);
// torch.index_put / x.index_put_(indices, values, accumulate) (x[i, j] = v in Python):
// indices are int64 tensors for a's first k dims, broadcast together to B (negative indices
// count from the end); the indexed region is B + a.shape[k:] and values broadcast to it.
// accumulate adds (repeated indices add up); otherwise a repeated index keeps its last value.
// Differentiable in a and values. (Bool masks and None slices: use masked_fill_ / slice.)
Tensor index_put(const Tensor& a, const std::vector<Tensor>& indices, const Tensor& values,
                 Flag accumulate = false);

// =====================================================================  linalg.cpp
// torch.matmul: 1-D..N-D, batch dims broadcast; OpenBLAS sgemm/dgemm with transpose flags
// for views that are plain transposes, no copies of them.
Tensor matmul(const Tensor& a, const Tensor& b);
// F.linear: x @ weight.T + bias, weight (out, in), bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// torch.outer: a (n) and b (m) 1-D -> (n, m), out[i][j] = a[i] * b[j].
Tensor outer(const Tensor& a, const Tensor& b);
// torch.norm / Tensor.norm: the p-norm (sum |x|^p)^(1/p) over dims ({} = all); p = inf is
// the largest |x|. norm(x, 2, 1) is each row's 2-norm, as torch's x.norm(2, 1).
Tensor norm(const Tensor& a, double p = 2.0, Dims dims = {}, Flag keepdim = false);

// =====================================================================  einsum.cpp
// torch.einsum with explicit letters: einsum("bhqd,bhkd->bhqk", q, k) (or a vector of
// operands); without "->" the output is the letters used once, in alphabetical order.
// Operands are contracted left to right with batched matmuls; the backward is that of the
// composed ops. Throws for "...", a letter repeated within one operand, and a letter whose
// sizes differ (torch would broadcast a size-1 dim).
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
template <class... T>
requires(sizeof...(T) > 0 && (std::same_as<std::remove_cvref_t<T>, Tensor> && ...)) Tensor
    einsum(const std::string& equation, const T&... operands) {
  return einsum(equation, std::vector<Tensor>{operands...});
}

// =====================================================================  activation.cpp
Tensor softmax(const Tensor& a, Int dim);
Tensor log_softmax(const Tensor& a, Int dim);
Tensor relu(const Tensor& a);
Tensor sigmoid(const Tensor& a);
// approximate: "none" (erf) or "tanh" (GPT-2's).
Tensor gelu(const Tensor& a, const std::string& approximate = "none");

// =====================================================================  attention.cpp
// F.scaled_dot_product_attention (PyTorch 2.x): query (..., L, E), key (..., S, E), value
// (..., S, Ev) -> (..., L, Ev), with the same batch dims on all three (but for the heads, dim
// -3, under enable_gqa). Computes, fused,
//   w = softmax(query @ key^T * scale + attn_mask [causal: -inf above the diagonal], -1)  (..., L, S)
//   out = dropout(w, dropout_p, true, gen) @ value
// scale defaults to 1/sqrt(E); is_causal masks key j > query i (top-left aligned, as torch's
// tril(ones(L, S))). The dropout mask is exactly dropout()'s: one bernoulli draw over a
// contiguous (..., L, S) tensor, so a Generator with the same seed gives the composed chain's
// numbers. The result is a (B, H, L, Ev) view of a (B, L, H, Ev) buffer when there are two or
// more batch dims (so out.transpose(1, 2).contiguous() copies nothing), contiguous otherwise.
// Inputs need a unit-stride last dim to be read in place (the MHA's transpose(1, 2) views
// are); others are copied once.
//
// torch 2.x's arguments, in its order, with the two this overload leaves out:
//   attn_mask   undefined (none), bool (true: the key takes part, false: -inf) or an additive
//               float mask of query's dtype, broadcastable to (..., L, S) (a (L, S) causal or
//               (B, 1, 1, S) padding mask is read in place, not repeated). A query row whose
//               every score is -inf gets zero weights (torch 2.5's _safe_softmax), so its
//               output and gradients are 0, not NaN. A float mask may require grad. Not
//               together with is_causal (torch's rule: put the causal -inf into the mask).
//   enable_gqa  grouped-query attention (torch 2.5): key and value (..., Hkv, S, *) with fewer
//               heads than query (..., Hq, L, E), Hq % Hkv == 0; query head h attends with
//               key/value head h / (Hq / Hkv), as key.repeat_interleave(Hq / Hkv, -3) would,
//               but the repeated keys are never formed (the key/value gradients sum over each
//               group). Dropout draws the composed chain's (..., Hq, L, S) mask.
// The backward is differentiable (create_graph): with grad mode on it computes from recorded
// ops (matmul, softmax, the saved dropout mask), else it runs the fused kernel.
// Spelled positionally in torch's order:
//   scaled_dot_product_attention(q, k, v, mask, 0.0, false, std::nullopt, true)
// or by keyword, as in torch (the options struct below):
//   scaled_dot_product_attention(q, k, v, {.attn_mask = mask, .enable_gqa = true})
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    double dropout_p = 0.0, Flag is_causal = false,
                                    std::optional<double> scale = std::nullopt, Generator* gen = nullptr);
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p = 0.0, Flag is_causal = false,
                                    std::optional<double> scale = std::nullopt, Flag enable_gqa = false,
                                    Generator* gen = nullptr);
// F.scaled_dot_product_attention's keyword arguments (torch's names and defaults; generator is
// xgrad's, for the dropout mask: null draws from the default generator).
struct ScaledDotProductAttentionOptions {
  Tensor attn_mask = Tensor();  // undefined: none
  double dropout_p = 0.0;
  bool is_causal = false;
  std::optional<double> scale = std::nullopt;
  bool enable_gqa = false;
  Generator* generator = nullptr;
};
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const ScaledDotProductAttentionOptions& options);
namespace detail {
// The same op with its row strip size given (rows run through scores, softmax and output
// together; the public one uses attention_kernel::kDefaultBlock): tests shrink it so that
// small inputs span several strips and tiles.
Tensor scaled_dot_product_attention_blocked(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const ScaledDotProductAttentionOptions& options, int64_t block);
Tensor scaled_dot_product_attention_blocked(const Tensor& query, const Tensor& key, const Tensor& value,
                                            double dropout_p, bool is_causal, std::optional<double> scale,
                                            Generator* gen, int64_t block);
}  // namespace detail

// =====================================================================  nn_functional.cpp
// Inverted dropout: zeroes with probability p, scales the rest by 1/(1-p); identity when
// !training or p == 0. The mask comes from bernoulli_(1-p) on `gen` (torch's stream).
Tensor dropout(const Tensor& a, double p, Flag training = true, Generator* gen = nullptr);
// The one check of a dropout probability (dropout, Dropout, scaled_dot_product_attention's
// dropout_p, GPTConfig::drop_rate): 0 <= p <= 1 as torch's nn.Dropout, else
// "<op>: dropout probability has to be between 0 and 1, but got <p>".
void check_dropout_p(const char* op, double p);
// weight (num_embeddings, dim), indices int64 of any shape -> indices.shape + (dim,).
Tensor embedding(const Tensor& weight, const Tensor& indices);
// Normalises over the trailing dims `normalized_shape`; weight/bias may be undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps = 1e-5);
// F.cross_entropy's keyword arguments (torch's names and defaults; no `weight`):
//   cross_entropy(x, t, {.ignore_index = 0, .reduction = "sum", .label_smoothing = 0.1})
struct CrossEntropyOptions {
  Int ignore_index = -100;
  std::string reduction = "mean";  // "mean" (over targets != ignore_index), "sum", "none"
  double label_smoothing = 0.0;    // in [0, 1]
};
// torch's F.cross_entropy: classes in dim 1. input (C), (N, C) or (N, C, d1, ...), target
// int64 () / (N) / (N, d1, ...); so F.cross_entropy(logits.flatten(0, 1), targets.flatten())
// ports unchanged. Fused log-softmax + NLL.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});
// The same loss with classes in the LAST dim: logits (..., C), targets (...), e.g. a GPT's
// (B, T, C) logits against (B, T) targets without flattening. Not a torch function (torch
// would read (B, T, C) as C = T classes); its own name keeps cross_entropy meaning torch's.
Tensor cross_entropy_last_dim(const Tensor& logits, const Tensor& targets,
                              const CrossEntropyOptions& options = {});
Tensor mse_loss(const Tensor& input, const Tensor& target);

// =====================================================================  norm.cpp, rotary.cpp, silu_mul.cpp
// torch 2.4's F.rms_norm over the trailing dims normalized_shape:
//   y = x * rsqrt(mean(x^2) + eps) * weight
// weight (normalized_shape) may be undefined; eps defaults to torch.finfo(x.dtype).eps.
Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
// Rotary embeddings in the rotate-half convention (Llama, GPT-NeoX): x (..., seq, head_dim),
// cos and sin (seq, head_dim) broadcast over x's leading dims, head_dim even:
//   out = x * cos + cat(-x2, x1) * sin     (x1, x2: the halves of x's last dim)
// A KV cache's positions offset .. offset + seq - 1 pass the tables' rows
// cos.narrow(0, offset, seq). Differentiable in x, cos and sin. The tables have x's dtype; a
// bfloat16 x takes float32 (or bfloat16) tables and is rotated in float32, the result rounded
// once to bfloat16 (the book's apply_rope on a bfloat16 x with its float32 tables).
Tensor apply_rotary_emb(const Tensor& x, const Tensor& cos, const Tensor& sin);
// silu(a) * b for a and b of one shape: a SwiGLU feed-forward's gated product, in one pass.
// bfloat16 a and b: computed in float32, the result (and each gradient) rounded once.
Tensor silu_mul(const Tensor& a, const Tensor& b);

}  // namespace xgrad
