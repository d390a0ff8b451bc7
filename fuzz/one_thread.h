// fuzz/one_thread.h: every fuzz target runs xgrad on the calling thread only.
//
// libFuzzer keeps an input when it reaches new edges; work done on xgrad's pool threads adds
// edges that depend on scheduling, which fills the corpus with noise and costs a thread
// hand-off per op. Included once by each target (each target is its own program, so each has
// its own LLVMFuzzerInitialize).
#pragma once

#include "xgrad/parallel.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  xgrad::set_num_threads(1);
  return 0;
}
