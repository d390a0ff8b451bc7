// examples/common/flag_range.h: numeric command-line flags checked against a documented range
// on their text, before any conversion: CLI11 clamps 99999999999999999999 to INT64_MAX and
// strtod accepts "inf", so without this a bad value would be silently changed. A value is
// either in range or refused with a message that names the flag.
//
//   add_range_check(app.add_option("--steps", steps, "optimizer steps"), "steps", {1, 1e9, true});
//   // --help: "optimizer steps (range [1, 1000000000])"; "--steps 0" -> "--steps 0 is out of
//   // range [1, 1000000000]"
#pragma once
#include <string>

namespace CLI {
class Option;
}

namespace xgrad_examples {

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

}  // namespace xgrad_examples
