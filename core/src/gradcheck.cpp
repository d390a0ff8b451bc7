// core/src/gradcheck.cpp: compare analytic gradients (backward) with central differences
// (gradcheck), and analytic second derivatives with central differences of the first-order
// gradient (gradgradcheck, at the end).
//
// loss(inputs) = sum(fn(inputs) * w), w uniform in [-1, 1] from a private generator, so every
// output element gets a different weight. For each input that requires grad and each of its
// elements e: numeric = (loss(x_e + eps) - loss(x_e - eps)) / (2 eps), perturbing the element
// in storage (so non-contiguous views are checked through their strides). The difference is
// taken per output element, column = (fn(x_e + eps) - fn(x_e - eps)) / (2 eps), and dotted with
// w, so one column serves every layout of w below.
//
// Layouts of dout: backward gets w itself from out.backward(w), so w laid out strided reaches
// the op's closure strided, exactly as when the op above was a transpose, a slice, a view of
// an offset buffer or a sum (whose backward expands). Each layout is a separate backward pass
// from zeroed gradients; its weights are the contiguous w's values, except "expanded", whose
// weights repeat along the expanded dim (stride 0 cannot hold different values).
#include <cmath>
#include <sstream>

#include "kernels.h"
#include "xgrad/autograd.h"
#include "xgrad/gradcheck.h"
#include "xgrad/ops.h"
#include "xgrad/random.h"

namespace xgrad {

namespace {
std::string index_str(int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return shape_str(idx);
}

int64_t storage_index(int64_t flat, const Tensor& t) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (flat % t.shape()[d]) * t.strides()[d];
    flat /= t.shape()[d];
  }
  return off;  // relative to the view's first element
}

bool overlaps(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.shape()[d] > 1 && t.strides()[d] == 0) return true;
  return false;
}

// fn(inputs) without recording, as float64 values in row-major order
std::vector<double> eval(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard guard;
  return fn(inputs).to_vector<double>();
}

struct DoutLayout {
  std::string name;
  Tensor w;                    // out's shape, laid out as named
  std::vector<double> values;  // w in row-major order
};

// w (contiguous) in each layout a tensor of its shape can have. Every layout but "expanded"
// holds w's values.
std::vector<DoutLayout> dout_layouts(const Tensor& w, bool all) {
  NoGradGuard guard;
  std::vector<DoutLayout> out;
  auto add = [&](const std::string& name, const Tensor& t) {
    out.push_back({name, t, t.to_vector<double>()});
  };
  add("contiguous", w);
  if (!all || w.numel() == 0) return out;
  const Shape& shape = w.shape();
  const int64_t nd = w.dim(), n = w.numel();
  {  // a view 3 elements into a larger buffer
    Tensor buf = zeros({n + 3}, w.dtype());
    Tensor t = buf.narrow(0, 3, n).view(shape);
    t.copy_(w);
    add("offset", t);
  }
  if (nd >= 2) {  // stored with all dims reversed, seen through permute
    Shape rev(shape.rbegin(), shape.rend()), perm(static_cast<std::size_t>(nd));
    for (int64_t d = 0; d < nd; ++d) perm[d] = nd - 1 - d;
    Tensor t = zeros(rev, w.dtype()).permute(perm);
    t.copy_(w);
    if (!t.is_contiguous()) add("transposed", t);
  }
  int64_t last = -1, row = -1;  // the last dim longer than 1, and the last such but the last dim
  for (int64_t d = 0; d < nd; ++d)
    if (shape[d] > 1) {
      last = d;
      if (d < nd - 1) row = d;
    }
  if (last >= 0) {  // every other element of a buffer twice as wide along `last`, from 1
    Shape wide = shape;
    wide[last] = 2 * shape[last] + 1;
    Tensor t = zeros(wide, w.dtype()).slice(last, 1, wide[last], 2);
    t.copy_(w);
    add("step-sliced", t);
  }
  // the first slice along `row` (the rows of a row-wise op: softmax(-1), layer_norm, attention
  // queries) repeated with stride 0, as sum(dim) and expand hand it down; along `last` for 1-D
  const int64_t e = row >= 0 ? row : last;
  if (e >= 0) add("expanded", w.narrow(e, 0, 1).contiguous().expand(shape));
  return out;
}

std::string strides_str(const Tensor& t) {
  return shape_str(t.strides()) + " offset " + std::to_string(t.storage_offset());
}

// numeric[i][e]: the Jacobian's column for element e of input i, by central differences
// (equal outputs, -inf included, give 0); empty for inputs that do not require grad.
std::vector<std::vector<std::vector<double>>> numeric_columns(const GradcheckFn& fn,
                                                              const std::vector<Tensor>& inputs, double eps) {
  std::vector<std::vector<std::vector<double>>> numeric(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    for (int64_t e = 0; e < x.numel(); ++e) {
      const int64_t off = storage_index(e, x);
      std::vector<double> plus, minus;
      kernels::dispatch_float(x.dtype(), "gradcheck", [&](auto tag) {
        using T = decltype(tag);
        T* p = x.data_ptr<T>() + off;
        const T orig = *p;
        *p = static_cast<T>(orig + eps);
        plus = eval(fn, inputs);
        *p = static_cast<T>(orig - eps);
        minus = eval(fn, inputs);
        *p = orig;
      });
      for (std::size_t k = 0; k < plus.size(); ++k)
        plus[k] = plus[k] == minus[k] ? 0.0 : (plus[k] - minus[k]) / (2.0 * eps);
      numeric[i].push_back(std::move(plus));
    }
  }
  return numeric;
}

// The first element of an input whose gradient x.grad() (from backward with dout layout L)
// differs from its numeric column dotted with L's weights by more than the tolerance: the
// message naming it, or empty. Raises max_abs_error to every error seen.
std::string compare_gradients(const std::vector<Tensor>& inputs,
                              const std::vector<std::vector<std::vector<double>>>& numeric,
                              const DoutLayout& L, const GradcheckOptions& opt, const std::string& out_fn,
                              double& max_abs_error) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    const Tensor g = x.grad();
    const std::vector<double> analytic =
        g.defined() ? g.to_vector<double>() : std::vector<double>(x.numel(), 0.0);
    for (int64_t e = 0; e < x.numel(); ++e) {
      const std::vector<double>& column = numeric[i][static_cast<std::size_t>(e)];
      double num = 0.0;
      for (std::size_t k = 0; k < column.size(); ++k) num += column[k] * L.values[k];
      const double a = analytic[static_cast<std::size_t>(e)];
      const double err = std::abs(a - num);
      max_abs_error = std::max(max_abs_error, err);
      if (!(err <= opt.atol + opt.rtol * std::abs(num))) {
        std::ostringstream os;
        os.precision(10);
        os << "input " << i << " (shape " << shape_str(x.shape()) << ", element " << index_str(e, x.shape())
           << "): analytic " << a << " vs numeric " << num << " (|diff| " << err << " > atol " << opt.atol
           << " + rtol " << opt.rtol << " * |numeric|) with a " << L.name << " dout (strides "
           << strides_str(L.w) << "); the output came from " << out_fn;
        return os.str();
      }
    }
  }
  return {};
}
}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  GradcheckResult result;
  auto failed = [&](const std::string& msg) {
    result.ok = false;
    result.message = "gradcheck(" + opt.name + "): " + msg;
    return result;
  };

  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) return failed("input " + std::to_string(i) + " is undefined");
    if (inputs[i].requires_grad() && !inputs[i].is_leaf())
      return failed("input " + std::to_string(i) + " is not a leaf; pass leaves and build views inside fn");
    if (inputs[i].requires_grad() && overlaps(inputs[i]))
      return failed("input " + std::to_string(i) + " has overlapping memory (an expanded view of shape " +
                    shape_str(inputs[i].shape()) + "); pass the unexpanded tensor and expand inside fn");
  }

  // keep the callers' gradients; compute ours from none
  std::vector<Tensor> saved_grads;
  for (const Tensor& t : inputs) {
    saved_grads.push_back(t.grad());
    if (t.requires_grad()) const_cast<Tensor&>(t).set_grad(Tensor());
  }
  auto restore = [&] {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].requires_grad()) const_cast<Tensor&>(inputs[i]).set_grad(saved_grads[i]);
  };

  Tensor out = fn(inputs);
  if (!out.requires_grad()) {
    restore();
    return failed("the output does not require grad (no input requires grad, or fn detached it)");
  }
  Generator gen(opt.seed);
  Tensor w = rand(out.shape(), &gen, kFloat64) * 2.0 - 1.0;
  w = w.to(out.dtype());
  const std::string out_fn = out.grad_fn_name();
  const std::vector<DoutLayout> layouts = dout_layouts(w, opt.dout_layouts);
  out = Tensor();  // each layout runs backward through a graph of its own

  const std::vector<std::vector<std::vector<double>>> numeric = numeric_columns(fn, inputs, opt.eps);

  // per layout, from a fresh graph and zeroed gradients: backward, then each element's analytic derivative of
  // sum(out * weights) against the column dotted with the weights
  for (std::size_t l = 0; l < layouts.size(); ++l) {
    const DoutLayout& L = layouts[l];
    for (const Tensor& t : inputs)
      if (t.requires_grad()) const_cast<Tensor&>(t).set_grad(Tensor());
    out = fn(inputs);
    try {
      out.backward(L.w);
    } catch (const Error& err) {
      restore();
      return failed("backward with a " + L.name + " dout (strides " + strides_str(L.w) +
                    ") threw: " + err.what());
    }
    out = Tensor();
    result.layouts.push_back(L.name);
    const std::string mismatch = compare_gradients(inputs, numeric, L, opt, out_fn, result.max_abs_error);
    if (!mismatch.empty()) {
      restore();
      return failed(mismatch);
    }
  }
  restore();
  return result;
}

// ---------------------------------------------------------------- gradgradcheck
namespace {
// v's values laid out with a step: every other element of a buffer twice as wide along the
// last dim longer than 1 (v itself when there is none), as a leaf that requires grad.
Tensor noncontiguous_leaf(const Tensor& v) {
  NoGradGuard guard;
  int64_t last = -1;
  for (int64_t d = 0; d < v.dim(); ++d)
    if (v.size(d) > 1) last = d;
  if (last < 0) return Tensor();
  Shape wide = v.shape();
  wide[last] = 2 * v.size(last);
  Tensor t = zeros(wide, v.dtype()).slice(last, 0, wide[last], 2);
  t.copy_(v);
  return t.detach().requires_grad_();
}
}  // namespace

GradcheckResult gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                              const GradgradcheckOptions& opt) {
  GradcheckResult result;
  auto failed = [&](const std::string& msg) {
    result.ok = false;
    result.message = "gradgradcheck(" + opt.name + "): " + msg;
    return result;
  };
  std::vector<std::size_t> wrt;  // the inputs that require grad
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) wrt.push_back(i);
  Tensor out;
  {
    AutoGradMode grad_on(true);
    out = fn(inputs);
  }
  if (!out.requires_grad())
    return failed("the output does not require grad (no input requires grad, or fn detached it)");
  const std::string out_fn = out.grad_fn_name();
  const Shape out_shape = out.shape();
  const DType out_dtype = out.dtype();
  out = Tensor();

  // (inputs..., v) -> the first-order gradients, flattened and concatenated: one vector output
  const GradcheckFn first_order = [fn, wrt](const std::vector<Tensor>& args) {
    AutoGradMode grad_on(true);  // gradcheck evaluates under NoGradGuard; this needs the graph
    const std::vector<Tensor> x(args.begin(), args.end() - 1);
    std::vector<Tensor> xs;
    for (std::size_t i : wrt) xs.push_back(x[i]);
    const std::vector<Tensor> g =
        autograd::grad({fn(x)}, xs, {args.back()}, {.create_graph = true, .allow_unused = true});
    std::vector<Tensor> flat;
    for (std::size_t k = 0; k < g.size(); ++k)
      flat.push_back(g[k].defined() ? g[k].reshape({-1}) : zeros({xs[k].numel()}, xs[k].dtype()));
    return cat(flat, 0);
  };

  Generator gen(opt.seed);
  const Tensor v0 = randn(out_shape, &gen, kFloat64).to(out_dtype);
  std::vector<std::pair<std::string, Tensor>> grad_outputs;
  if (opt.contiguous_grad_outputs) grad_outputs.emplace_back("contiguous", v0.clone().requires_grad_());
  if (opt.noncontiguous_grad_outputs)
    if (Tensor v = noncontiguous_leaf(v0); v.defined()) grad_outputs.emplace_back("non-contiguous", v);
  if (grad_outputs.empty()) grad_outputs.emplace_back("contiguous", v0.clone().requires_grad_());

  for (const auto& [layout, v] : grad_outputs) {
    std::vector<Tensor> args = inputs;
    args.push_back(v);
    {  // a first-order gradient without history must be zero (pow(x, 0): a constant function);
      // any other has no second derivative to check, its backward did not record
      Tensor g = first_order(args);
      if (!g.requires_grad()) {
        bool zero = true;
        for (double e : g.to_vector<double>()) zero = zero && e == 0.0;
        if (zero) continue;
        return failed("the first-order gradient of " + out_fn +
                      " has no history: its backward does not record under create_graph");
      }
    }
    GradcheckOptions o;
    o.name = opt.name + " second order, " + layout + " grad_outputs";
    o.eps = opt.eps;
    o.atol = opt.atol;
    o.rtol = opt.rtol;
    o.seed = opt.seed + 1;
    o.dout_layouts = opt.dout_layouts;
    GradcheckResult r = gradcheck(first_order, args, o);
    result.max_abs_error = std::max(result.max_abs_error, r.max_abs_error);
    for (const std::string& l : r.layouts) result.layouts.push_back(layout + " v, " + l);
    if (!r.ok) {
      result.ok = false;
      result.message = "gradgradcheck(" + opt.name + "): input " + std::to_string(inputs.size()) +
                       " is the grad_output v; " + r.message;
      return result;
    }
  }
  return result;
}

}  // namespace xgrad
