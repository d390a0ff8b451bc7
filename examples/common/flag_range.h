// examples/common/flag_range.h: numeric command-line flags checked against a documented range
// on their text, before any conversion: CLI11 clamps 99999999999999999999 to INT64_MAX and
// strtod accepts "inf", so without this a bad value would be silently changed. A value is
// either in range or refused with a message that names the flag.
//
//   add_range_check(app.add_option("--steps", steps, "optimizer steps"), "steps", {1, 1e9, true});
//   // --help: "optimizer steps (range [1, 1000000000])"; "--steps 0" -> "--steps 0 is out of
//   // range [1, 1000000000]"
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace xgrad_examples {

// A flag's or a saved setting's problem, worded for the command line ("--n-heads must be in
// [1, 65536], got 0"): exit code 2.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Throws ConfigError(the parts streamed in turn; doubles with all 17 digits).
template <class... Parts>
[[noreturn]] void config_error(const Parts&... parts) {
  std::ostringstream os;
  os.precision(17);
  os << std::boolalpha;
  (os << ... << parts);
  throw ConfigError(os.str());
}

struct FlagRange {
  double lo, hi;
  bool integer;  // decimal integers only (int64, or uint64 with `uint64`); else any finite number
  bool lo_open = false, hi_open = false;  // exclude the bound
  bool uint64 = false;                    // [0, 2^64 - 1], e.g. a seed
};

std::string describe_range(const FlagRange& r);  // "[1, 1000000000]", "(0, 1]"
bool in_range(const FlagRange& r, double v);
// "" when `text` parses (wholly) as the flag's kind of number and lies in the range, else the
// message, naming "--<flag>".
std::string check_flag_text(const std::string& flag, const FlagRange& r, const std::string& text);
// Adds " (range ...)" to the option's help and a validator that runs check_flag_text.
void add_range_check(CLI::Option* opt, const std::string& flag, const FlagRange& r);

// ---- a program's flags as a table: one row per flag, walked by f(flag, field) to register
// them with CLI11, check them, save them, ...
// Flag::attrs bits; those from 4 on are the program's own.
inline constexpr int kShowDefault = 1;  // --help shows the default
inline constexpr int kNegated = 2;      // a bool flag that clears its field (--no-progress)

struct Flag {
  std::string name;  // "emb-dim" for --emb-dim
  std::string help;
  int attrs = 0;
  std::optional<FlagRange> range = std::nullopt;  // every number has one
};

constexpr FlagRange ints(double lo, double hi) { return {lo, hi, true}; }
constexpr FlagRange reals(double lo, double hi) { return {lo, hi, false}; }
// "context_length" -> "context-length"
std::string flag_name(std::string_view field);

// Registers one row with CLI11 (a bool is a flag, anything else an option with its range
// check); T is bool, int, int64_t, uint64_t, double or std::string.
template <class T>
void add_flag(CLI::App& app, const Flag& flag, T& field);

// "--<flag> must be in <range>, got <v>" when a value already converted (from a checkpoint, a
// test, a struct) lies outside the row's range; "" otherwise (also for rows without one).
template <class T>
std::string value_problem(const Flag& flag, const T& v) {
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    if (!flag.range || in_range(*flag.range, static_cast<double>(v))) return "";
    std::ostringstream os;
    os.precision(17);
    os << "--" << flag.name << " must be in " << describe_range(*flag.range) << ", got " << v;
    return os.str();
  }
  return "";
}

// Sets `field` from a saved setting: "" when `v` holds a T, else what is wrong ("has the wrong
// type"). nlohmann converts a number to any arithmetic type with a plain cast, which is
// undefined for 2e118 -> int64: an integer field takes only an integer that fits.
template <class T>
std::string field_from_json(const nlohmann::json& v, T& field) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const bool fits = v.is_number_unsigned()
                          ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                          : v.is_number_integer() && std::in_range<T>(v.get<int64_t>());
    if (!fits) return "is not an integer in range: " + v.dump();
  }
  try {
    field = v.get<T>();
  } catch (const nlohmann::json::exception&) {
    return "has the wrong type";
  }
  return "";
}

}  // namespace xgrad_examples
