// core/src/print.cpp: `std::cout << t` prints like PyTorch.
//
// reference: torch/_tensor_str.py (torch 1.13): precision 4, linewidth 80, threshold 1000,
// edgeitems 3. A formatter looks at the (summarised) values once: all-integer floats print as
// "1.", a wide range or tiny values switch to scientific notation, and every element is padded
// to the widest. Rows wrap at 80 columns; slices of 3-D+ tensors are separated by blank lines.
#include <cmath>
#include <cstdio>
#include <functional>
#include <ostream>
#include <sstream>

#include "xgrad/autograd.h"
#include "xgrad/ops.h"

namespace xgrad {

namespace {
constexpr int kLinewidth = 80;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeitems = 3;

std::string printf_str(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string py_float(double v, const char* fmt) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return printf_str(fmt, v);
}

class Formatter {
 public:
  Formatter(const std::vector<double>& values, DType dtype) : floating_(is_floating(dtype)), dtype_(dtype) {
    if (!floating_) {
      for (double v : values) width_ = std::max<int>(width_, static_cast<int>(plain(v).size()));
      return;
    }
    std::vector<double> finite;
    for (double v : values)
      if (std::isfinite(v) && v != 0.0) finite.push_back(v);
    if (finite.empty()) return;
    double lo = std::abs(finite[0]), hi = lo;
    for (double v : finite) {
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      sci_ = hi / lo > 1000.0 || hi > 1e8;
      for (double v : finite)
        width_ = std::max<int>(
            width_, static_cast<int>(sci_ ? py_float(v, "%.4e").size() : py_float(v, "%.0f").size() + 1));
    } else {
      sci_ = hi / lo > 1000.0 || hi > 1e8 || lo < 1e-4;
      for (double v : finite)
        width_ = std::max<int>(width_, static_cast<int>(py_float(v, sci_ ? "%.4e" : "%.4f").size()));
    }
  }

  int width() const { return width_; }

  std::string format(double v) const {
    std::string s;
    if (!floating_) {
      s = plain(v);
    } else if (sci_) {
      s = py_float(v, "%.4e");
    } else if (int_mode_) {
      s = py_float(v, "%.0f");
      if (std::isfinite(v)) s += ".";
    } else {
      s = py_float(v, "%.4f");
    }
    if (static_cast<int>(s.size()) < width_) s = std::string(width_ - s.size(), ' ') + s;
    return s;
  }

 private:
  std::string plain(double v) const {
    if (dtype_ == kBool) return v != 0.0 ? "True" : "False";
    return std::to_string(static_cast<long long>(v));
  }
  bool floating_;
  DType dtype_;
  bool int_mode_ = true;
  bool sci_ = false;
  int width_ = 1;
};

// Row-major values of a contiguous copy, addressed by the printer through (shape, offset).
struct Printer {
  const std::vector<double>& values;
  const Shape& shape;
  const Formatter& fmt;
  bool summarize;

  int64_t stride_of(std::size_t d) const {
    int64_t s = 1;
    for (std::size_t k = d + 1; k < shape.size(); ++k) s *= shape[k];
    return s;
  }

  std::vector<int64_t> shown(int64_t n) const {
    std::vector<int64_t> idx;
    if (summarize && n > 2 * kEdgeitems) {
      for (int64_t i = 0; i < kEdgeitems; ++i) idx.push_back(i);
      idx.push_back(-1);  // the "..." marker
      for (int64_t i = n - kEdgeitems; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }

  std::string vector_str(std::size_t d, int64_t base, int indent) const {
    const int element_length = fmt.width() + 2;
    const int per_line = std::max(1, (kLinewidth - indent) / element_length);
    std::vector<std::string> data;
    for (int64_t i : shown(shape[d])) data.push_back(i < 0 ? " ..." : fmt.format(values[base + i]));
    std::string out = "[";
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (i > 0) out += (i % per_line == 0) ? ",\n" + std::string(indent + 1, ' ') : ", ";
      out += data[i];
    }
    return out + "]";
  }

  std::string str(std::size_t d, int64_t base, int indent) const {
    const std::size_t rank = shape.size();
    if (rank == 0) return fmt.format(values[0]);
    if (d == rank - 1) return vector_str(d, base, indent);
    const int64_t step = stride_of(d);
    std::vector<std::string> slices;
    for (int64_t i : shown(shape[d]))
      slices.push_back(i < 0 ? "..." : str(d + 1, base + i * step, indent + 1));
    const std::string sep = "," + std::string(rank - d - 1, '\n') + std::string(indent + 1, ' ');
    std::string out = "[";
    for (std::size_t i = 0; i < slices.size(); ++i) out += (i ? sep : "") + slices[i];
    return out + "]";
  }
};

// The values the formatter looks at: only the printed edges when summarising.
std::vector<double> summarized_values(const std::vector<double>& values, const Shape& shape) {
  std::vector<double> out;
  std::function<void(std::size_t, int64_t)> walk = [&](std::size_t d, int64_t base) {
    if (d == shape.size()) {
      out.push_back(values[base]);
      return;
    }
    int64_t step = 1;
    for (std::size_t k = d + 1; k < shape.size(); ++k) step *= shape[k];
    const int64_t n = shape[d];
    for (int64_t i = 0; i < n; ++i) {
      if (n > 2 * kEdgeitems && i == kEdgeitems) i = n - kEdgeitems;
      walk(d + 1, base + i * step);
    }
  };
  walk(0, 0);
  return out;
}

std::string add_suffixes(std::string body, const std::vector<std::string>& suffixes, int indent) {
  std::size_t nl = body.rfind('\n');
  std::size_t last_line_len = nl == std::string::npos ? body.size() + 1 : body.size() - nl;
  for (const std::string& s : suffixes) {
    if (last_line_len + s.size() + 2 > static_cast<std::size_t>(kLinewidth)) {
      body += ",\n" + std::string(indent, ' ') + s;
      last_line_len = indent + s.size();
    } else {
      body += ", " + s;
      last_line_len += s.size() + 2;
    }
  }
  return body + ")";
}
}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<std::string> suffixes;
  std::string body;
  if (t.numel() == 0) {
    if (t.dim() != 1) {
      std::string s = "size=(";
      for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.shape()[d]);
      suffixes.push_back(s + ")");
    }
    if (t.dtype() != kFloat32) suffixes.push_back(std::string("dtype=torch.") + dtype_name(t.dtype()));
    body = "[]";
  } else {
    // the dtypes torch names (int64 and bool follow from the values)
    if (t.dtype() == kFloat64 || t.dtype() == kBFloat16)
      suffixes.push_back(std::string("dtype=torch.") + dtype_name(t.dtype()));
    const std::vector<double> values = t.to_vector<double>();
    const bool summarize = t.numel() > kThreshold;
    Formatter fmt(summarize ? summarized_values(values, t.shape()) : values, t.dtype());
    Printer p{values, t.shape(), fmt, summarize};
    body = p.str(0, 0, indent);
  }
  if (t.grad_fn()) {
    suffixes.push_back("grad_fn=<" + t.grad_fn_name() + ">");
  } else if (t.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace xgrad
