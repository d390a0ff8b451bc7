// xgrad/error.h: the exceptions xgrad throws, and helpers that build their messages.
//
// Every bad input throws xgrad::Error whose message starts with the op's name and names the
// shapes involved, e.g. "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)".
// Every allocation that fails throws xgrad::OutOfMemory, an Error, so one
// `catch (const xgrad::OutOfMemory&)` tells "lower the batch size" from a bug.
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace xgrad {

using Shape = std::vector<int64_t>;

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An allocation failed: a tensor's storage (the message names the op, the shape, the dtype and
// the bytes) or a kernel's scratch buffer.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// "[2, 3, 4]"
std::string shape_str(const Shape& shape);

namespace detail {
inline void append(std::ostringstream& os, const Shape& s) { os << shape_str(s); }
template <class T>
void append(std::ostringstream& os, const T& v) {
  os << v;
}

// "<op>: <parts...>", with Shape arguments printed as [a, b, c].
template <class... Parts>
std::string message(const char* op, const Parts&... parts) {
  std::ostringstream os;
  os << op << ": ";
  (detail::append(os, parts), ...);
  return os.str();
}
}  // namespace detail

// Throws Error("<op>: <parts...>"); Shape arguments print as [a, b, c].
template <class... Parts>
[[noreturn]] void fail(const char* op, const Parts&... parts) {
  throw Error(detail::message(op, parts...));
}

}  // namespace xgrad
