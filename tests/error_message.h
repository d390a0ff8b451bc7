// tests/error_message.h: what an xgrad::Error says, for tests of error messages.
//
//   std::string m = error_of([&] { t.view({2, 12}); });   // "<no error>" if nothing threw
//   EXPECT_MESSAGE_HAS(m, "view");
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "xgrad/error.h"

namespace xgrad::testing {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace xgrad::testing

#define EXPECT_MESSAGE_HAS(msg, part) \
  EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg) << "\nexpected to contain: " << (part)
