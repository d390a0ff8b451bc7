// fuzz/fuzz_cli.cpp: train_lm's command line and option handling. The first byte picks:
//   0  argv: the rest split at NUL bytes (at most 48 arguments) after "train_lm"; parse_cli
//      must return (never crash or throw), and options it accepts must pass validate() and
//      give a finite, positive memory estimate;
//   1  the "train_options" JSON of a checkpoint merged over the defaults (merge_saved_options),
//      then validate(): ConfigError or valid options;
//   2  a saved model config (gpt_config_from_json);
//   3  one flag's text against its range (check_flag_text) for every numeric flag.
// Run with -close_fd_mask=3: CLI11 prints usage errors and --help.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memory.h"
#include "one_thread.h"
#include "options.h"

using namespace train_lm;
using namespace xgrad_examples;

namespace {
void check_accepted(const TrainOptions& o) {
  validate(o);  // must not throw: parse_cli validated it already
  GPTConfig c = o.model;
  c.vocab_size = 256;
  MemoryEstimate e = estimate_training_memory(c, o.batch_size);
  if (!std::isfinite(e.total_bytes()) || !(e.total_bytes() > 0)) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      std::vector<std::string> args = {"train_lm"};
      std::string cur;
      for (char ch : rest) {
        if (ch == '\0') {
          args.push_back(cur);
          cur.clear();
          if (args.size() > 48) return 0;
        } else {
          cur += ch;
        }
      }
      args.push_back(cur);
      CliParse p = parse_cli(args);
      if (p.kind == CliParse::kTrain && !p.train.resume) check_accepted(p.train);
      if (p.kind == CliParse::kGenerate) validate(p.generate);
      if (p.kind == CliParse::kExit && p.exit_code != 0 && p.exit_code != 2) __builtin_trap();
      break;
    }
    case 1: {
      nlohmann::json j = nlohmann::json::parse(rest, nullptr, false);
      if (j.is_discarded()) return 0;
      TrainOptions o;
      apply_preset(o, "tiny");
      o.warmup = 10;
      try {
        merge_saved_options(o, j, o.model);
        validate(o);
      } catch (const ConfigError&) {
        return 0;
      }
      check_accepted(o);
      break;
    }
    case 2: {
      nlohmann::json j = nlohmann::json::parse(rest, nullptr, false);
      if (j.is_discarded()) return 0;
      try {
        GPTConfig c = gpt_config_from_json(j);  // validated
        MemoryEstimate e = estimate_training_memory(c, 1);
        if (!std::isfinite(e.total_bytes())) __builtin_trap();
      } catch (const ConfigError&) {
      }
      break;
    }
    default: {
      for (const char* flag : {"steps", "seed", "lr", "batch-size", "temperature", "top-p", "threads",
                               "drop-rate", "max-new-tokens"}) {
        std::string msg = check_flag_text(flag, rest);
        if (!msg.empty() && msg.find(std::string("--") + flag) == std::string::npos)
          __builtin_trap();  // every refusal names its flag
      }
      break;
    }
  }
  return 0;
}
