// core/src/anomaly.cpp: anomaly mode (autograd::DetectAnomalyGuard). While it is on, every new
// node records the module whose forward was running (nn::Module's call pushes a ModuleScope
// while anomaly mode is on), and every gradient a backward node hands on is checked for NaN:
// the first one throws, naming the node, its input, the forward op and the module.
#include <cmath>
#include <sstream>

#include "xgrad/autograd.h"

namespace xgrad {

namespace autograd::detail {
namespace {
thread_local std::vector<const ModuleFrame*> module_stack;
}

ModuleScope::ModuleScope(ModuleFrame frame) : frame_(std::move(frame)) { module_stack.push_back(&frame_); }
ModuleScope::~ModuleScope() { module_stack.pop_back(); }
const ModuleFrame* current_module() { return module_stack.empty() ? nullptr : module_stack.back(); }
}  // namespace autograd::detail

namespace detail {
namespace {
// The forward op of a node named like torch's: "NativeLayerNormBackward0" -> "native_layer_norm".
// Nodes named otherwise ("CopySlices") are returned as they are.
std::string forward_op_of(const std::string& node) {
  const std::size_t at = node.rfind("Backward");
  if (at == std::string::npos || at == 0) return node;
  const std::string tail = node.substr(at + 8);
  if (!(tail == "s" || (!tail.empty() && tail.find_first_not_of("0123456789") == std::string::npos)))
    return node;
  std::string op;
  for (std::size_t i = 0; i < at; ++i) {
    const char c = node[i];
    if (c >= 'A' && c <= 'Z') {
      if (i > 0) op += '_';
      op += static_cast<char>(c - 'A' + 'a');
    } else {
      op += c;
    }
  }
  return op;
}

template <class T>
bool any_nan(const Tensor& t) {
  const Tensor c = t.contiguous();
  const T* p = c.data_ptr<T>();
  for (int64_t i = 0; i < c.numel(); ++i)
    if (std::isnan(p[i])) return true;
  return false;
}
}  // namespace

void record_anomaly_metadata(Node& node) {
  auto meta = std::make_unique<AnomalyMetadata>();
  if (const autograd::detail::ModuleFrame* frame = autograd::detail::current_module()) {
    meta->in_module = true;
    meta->module_path = frame->path;
    meta->module_type = frame->type;
  }
  node.anomaly = std::move(meta);
}

void check_anomaly(const Node& node, std::size_t input, const Tensor& grad) {
  const bool nan =
      grad.dtype() == kFloat32 ? any_nan<float>(grad) : grad.dtype() == kFloat64 && any_nan<double>(grad);
  if (!nan) return;
  std::ostringstream os;
  os << node.name << " returned nan in its " << input << "th output (the gradient for its input " << input
     << ", shape " << shape_str(grad.shape()) << "). It was recorded by the forward op "
     << forward_op_of(node.name) << " (inputs of shape";
  for (std::size_t i = 0; i < node.next.size(); ++i) os << (i ? ", " : " ") << shape_str(node.next[i].shape);
  os << ")";
  if (!node.anomaly) {
    os << "; no forward information was recorded: run the forward under DetectAnomalyGuard too";
  } else if (!node.anomaly->in_module) {
    os << " outside any module's forward";
  } else if (node.anomaly->module_path.empty()) {
    os << " in the forward of the outermost module called (" << node.anomaly->module_type << ")";
  } else {
    os << " in module " << node.anomaly->module_path << " (" << node.anomaly->module_type << ")";
  }
  throw Error("backward: " + os.str());
}
}  // namespace detail

}  // namespace xgrad
