// core/src/storage.cpp: Storage, the buffer tensors view, and the allocator behind it: a
// cache of freed blocks by size class, and the live / peak byte counters (xgrad/tensor.h).
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "xgrad/profiler.h"
#include "xgrad/tensor.h"

namespace xgrad {

namespace {
std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};

// Size classes: multiples of 64 bytes up to 4 KiB, then 4 steps per power of two (at most 25%
// slack), so tensors whose sizes differ a little (generation with a growing context) share
// blocks.
std::size_t block_capacity(std::size_t n) {
  if (n <= 4096) return std::max<std::size_t>(64, (n + 63) / 64 * 64);
  std::size_t pow2 = 4096;
  while (pow2 * 2 < n) pow2 *= 2;
  const std::size_t step = pow2 / 4;
  return (n + step - 1) / step * step;
}

// Freed blocks by capacity. A training step allocates the same shapes as the last one, so after
// the first step almost every allocation is a reuse: no malloc, and above all no fresh pages to
// fault in and zero. Off under AddressSanitizer, which must see every free to catch
// use-after-free.
class BlockCache {
 public:
  void* take(std::size_t capacity) {
#ifndef XGRAD_ADDRESS_SANITIZER
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(capacity);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= capacity;
      return p;
    }
#endif
    (void)capacity;
    return nullptr;
  }
  void give(void* p, std::size_t capacity) {
    (void)capacity;  // unused under ASan
#ifndef XGRAD_ADDRESS_SANITIZER
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + capacity <= kLimit) {
      free_[capacity].push_back(p);
      cached_ += capacity;
      return;
    }
#endif
    std::free(p);
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [cap, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
  }
  int64_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(cached_);
  }

 private:
  [[maybe_unused]] static constexpr std::size_t kLimit = std::size_t{2} << 30;  // unused under ASan
  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_ = 0;
};

BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache();  // never destroyed: storages may outlive statics
  return *cache;
}
}  // namespace

MemoryStats memory_stats() { return {live_bytes.load(), peak_bytes.load()}; }
void reset_peak_memory_stats() { peak_bytes.store(live_bytes.load()); }
void empty_cache() { block_cache().clear(); }
int64_t cached_bytes() { return block_cache().cached(); }

Storage::Storage(std::size_t n) : nbytes(n) {
  // 64-byte aligned for SIMD (aligned_alloc wants a multiple of the alignment)
  const std::size_t capacity = block_capacity(n);
  data = block_cache().take(capacity);
  if (data == nullptr) data = std::aligned_alloc(64, capacity);
  if (data == nullptr) throw OutOfMemory("alloc: out of memory allocating " + std::to_string(n) + " bytes");
  profiler::detail::on_alloc(n);
  const int64_t now = live_bytes.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
  int64_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
}
Storage::Storage(void* d, std::size_t n, std::shared_ptr<void> keep_alive)
    : data(d), nbytes(n), external(true), owner(std::move(keep_alive)) {}
Storage::~Storage() {
  if (external) return;  // not ours: `owner` lets go of it by itself
  live_bytes.fetch_sub(static_cast<int64_t>(nbytes));
  block_cache().give(data, block_capacity(nbytes));
}

}  // namespace xgrad
