// tests/error_message.h: what an xgrad::Error says, for tests of error messages.
//
//   std::string m = error_of([&] { t.view({2, 12}); });   // "<no error>" if nothing threw
//   EXPECT_MESSAGE_HAS(m, "view");
//   expect_error([&] { t.view({2, 12}); }, {"view", "[2, 12]"});  // throws, says each piece
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
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

// Expects fn to throw xgrad::Error whose message contains every piece.
template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> pieces) {
  try {
    fn();
    ADD_FAILURE() << "expected xgrad::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : pieces)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

}  // namespace xgrad::testing

#define EXPECT_MESSAGE_HAS(msg, part)            \
  EXPECT_NE((msg).find(part), std::string::npos) \
      << "message: " << (msg) << "\nexpected to contain: " << (part)
