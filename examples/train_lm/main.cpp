// examples/train_lm/main.cpp: `train_lm train ...` / `train_lm generate ...` (see README.md).
#include <string>
#include <vector>

#include "options.h"

int main(int argc, char** argv) { return train_lm::run_cli(std::vector<std::string>(argv, argv + argc)); }
