// examples/common/flag_range.cpp: see flag_range.h.
#include "flag_range.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>

namespace xgrad_examples {
namespace {

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

std::string describe_range(const FlagRange& r) {
  if (r.uint64) return "[0, 18446744073709551615]";
  return std::string(r.lo_open ? "(" : "[") + num(r.lo) + ", " + num(r.hi) + (r.hi_open ? ")" : "]");
}

bool in_range(const FlagRange& r, double v) {
  if (r.uint64) return v >= 0;
  return std::isfinite(v) && (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
}

std::string check_flag_text(const std::string& flag, const FlagRange& r, const std::string& text) {
  const std::string name = "--" + flag, range = describe_range(r);
  if (r.integer) {
    auto parse = [&](auto v) -> std::string {  // v: int64_t, or uint64_t
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec == std::errc::result_out_of_range) return name + " " + text + " is out of range " + range;
      if (ec != std::errc() || p != text.data() + text.size() || text.empty())
        return name + " must be an integer in " + range + ", got '" + text + "'";
      if (!in_range(r, static_cast<double>(v))) return name + " " + text + " is out of range " + range;
      return "";
    };
    return r.uint64 ? parse(uint64_t{0}) : parse(int64_t{0});
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    return name + " must be a number in " + range + ", got '" + text + "'";
  if (!std::isfinite(v) || (errno == ERANGE && std::fabs(v) > 1))
    return name + " " + text + " is not a finite number (range " + range + ")";
  if (!in_range(r, v)) return name + " " + text + " is out of range " + range;
  return "";
}

void add_range_check(CLI::Option* opt, const std::string& flag, const FlagRange& r) {
  opt->description(opt->get_description() + " (range " + describe_range(r) + ")");
  opt->check(
      CLI::Validator([flag, r](std::string& text) { return check_flag_text(flag, r, text); }, "", "range"));
}

std::string flag_name(std::string_view field) {
  std::string s(field);
  for (char& ch : s)
    if (ch == '_') ch = '-';
  return s;
}

template <class T>
void add_flag(CLI::App& app, const Flag& flag, T& field) {
  const std::string name = (flag.attrs & kNegated ? "!--" : "--") + flag.name;
  if constexpr (std::is_same_v<T, bool>) {
    app.add_flag(name, field, flag.help);
  } else {
    CLI::Option* opt = app.add_option(name, field, flag.help);
    if (flag.attrs & kShowDefault) opt->capture_default_str();
    if (flag.range) add_range_check(opt, flag.name, *flag.range);
  }
}
template void add_flag(CLI::App&, const Flag&, bool&);
template void add_flag(CLI::App&, const Flag&, int&);
template void add_flag(CLI::App&, const Flag&, int64_t&);
template void add_flag(CLI::App&, const Flag&, uint64_t&);
template void add_flag(CLI::App&, const Flag&, double&);
template void add_flag(CLI::App&, const Flag&, std::string&);

}  // namespace xgrad_examples
