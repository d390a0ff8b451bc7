// core/src/autocast.cpp: the autocast guard's thread-local state and the weight cast cache
// (xgrad/autocast.h says which ops cast what).
#include "xgrad/autocast.h"

#include <memory>
#include <unordered_map>

#include "xgrad/autograd.h"

namespace xgrad {

namespace {

// One cached cast: the source's impl (weak, so a freed source whose address is reused can be
// told apart), the storage version the cast was made at, and the cast.
struct CachedCast {
  std::weak_ptr<TensorImpl> source;
  uint64_t version = 0;
  Tensor cast;
};

struct State {
  bool enabled = false;
  DType dtype = kBFloat16;
  bool cache_enabled = true;
  int nesting = 0;  // guards alive on this thread, enabled or not
  std::unordered_map<const TensorImpl*, CachedCast> cache;
};

State& state() {
  thread_local State s;
  return s;
}

// torch's rule for a cacheable cast: a float32 leaf that requires grad and is not a view,
// i.e. a parameter, while the cache is on.
bool cacheable(const Tensor& t) {
  return state().cache_enabled && t.dtype() == kFloat32 && t.requires_grad() && t.is_leaf() &&
         !t.impl()->view_base;
}

// t converted to dtype, recorded with grad mode on: the cached cast serves later uses that need
// its gradient path, whatever the grad mode of the first use.
Tensor cached_cast(const Tensor& t, DType dtype) {
  State& s = state();
  const uint64_t version = t.impl()->storage->version;
  auto it = s.cache.find(t.unsafe_impl());
  if (it != s.cache.end() && !it->second.source.expired() && it->second.source.lock() == t.impl() &&
      it->second.version == version)
    return it->second.cast;
  Tensor cast;
  {
    struct GradOn {  // grad mode on for the cast, restored on the way out (also on a throw)
      bool prev = GradMode::is_enabled();
      GradOn() { GradMode::set_enabled(true); }
      ~GradOn() { GradMode::set_enabled(prev); }
    } grad_on;
    cast = t.to(dtype);
  }
  s.cache[t.unsafe_impl()] = CachedCast{t.impl(), version, cast};
  return cast;
}

}  // namespace

autocast::autocast(DType dtype, bool enabled, bool cache_enabled) {
  if (dtype != kBFloat16)
    fail("autocast", "the CPU autocast dtype must be bfloat16, got ", dtype_name(dtype));
  State& s = state();
  prev_enabled_ = s.enabled;
  prev_dtype_ = s.dtype;
  prev_cache_enabled_ = s.cache_enabled;
  s.enabled = enabled;
  s.dtype = dtype;
  s.cache_enabled = cache_enabled;
  ++s.nesting;
}

autocast::~autocast() {
  State& s = state();
  if (--s.nesting == 0) s.cache.clear();  // leaving the outermost region
  s.enabled = prev_enabled_;
  s.dtype = prev_dtype_;
  s.cache_enabled = prev_cache_enabled_;
}

bool autocast::is_enabled() { return state().enabled; }
DType autocast::get_dtype() { return state().dtype; }
bool autocast::is_cache_enabled() { return state().cache_enabled; }
void autocast::clear_cache() { state().cache.clear(); }
std::size_t autocast::cache_size() { return state().cache.size(); }

Tensor autocast::lower(const Tensor& t) {
  if (!is_enabled() || !lowers(t)) return t;
  return cacheable(t) ? cached_cast(t, state().dtype) : t.to(state().dtype);
}

Tensor autocast::to_fp32(const Tensor& t) {
  if (!is_enabled() || !raises(t)) return t;
  return t.to(kFloat32);
}

}  // namespace xgrad
