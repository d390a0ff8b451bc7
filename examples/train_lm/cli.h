// examples/train_lm/cli.h: the command line (CLI11).
//
//   train_lm train [--preset tiny|small|medium] [--steps N] [--lr X] ... [--resume]
//   train_lm generate --checkpoint DIR --prompt "Call me" --max-new-tokens 200 ...
//   train_lm tokenize --tokenizer gpt2 --data FILE      (the ids, space-separated, one line)
//
// run_cli is main(): tests call it in-process with an argv and check the exit code
// (0 ok, 1 runtime error such as a bad checkpoint or a NaN loss, 2 bad usage or options).
#pragma once
#include <string>
#include <vector>

#include "config.h"

namespace train_lm {

struct CliParse {
  enum Kind { kTrain, kGenerate, kTokenize, kExit } kind = kExit;
  TrainOptions train;
  GenerateOptions generate;
  TokenizeOptions tokenize;
  int exit_code = 0;  // for kExit (--help: 0; a parse error: non-zero, already printed)
};

// Parses and validates; errors are printed to stderr and returned as kExit with code 2.
CliParse parse_cli(const std::vector<std::string>& args);  // args[0] is the program name
int run_cli(const std::vector<std::string>& args);

}  // namespace train_lm
