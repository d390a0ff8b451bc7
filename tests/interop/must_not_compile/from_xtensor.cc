// tests/interop/must_not_compile/from_xtensor.cc: uses of <xgrad/xtensor.h> that must be
// refused at compile time, with a message saying what to write instead. ctest compiles this
// file once per case (-DCASE=<name>) and passes when the compiler prints the expected message
// (tests/CMakeLists.txt); a case that compiles, or fails for another reason, fails the test.
#include <xtensor/xarray.hpp>
#include <xtensor/xmanipulation.hpp>

#include "xgrad/xtensor.h"

int main() {
  xt::xarray<float> a = {1.f, 2.f};
#if CASE == 1  // a named array: share, hand over, borrow or copy?
  xgrad::from_xtensor(a);
#elif CASE == 2  // a view without xgrad::borrow
  xgrad::from_xtensor(xt::transpose(a));
#elif CASE == 3  // a lazy expression has no memory to borrow
  xgrad::from_xtensor(a + 1.f, xgrad::borrow);
#elif CASE == 4  // borrowing a temporary container would dangle
  xgrad::from_xtensor(xt::xarray<float>{1.f}, xgrad::borrow);
#endif
  return 0;
}
