// core/src/parallel.cpp: xgrad's thread pool behind xgrad/parallel.h.
//
// One persistent pool of get_num_threads() - 1 workers plus the calling thread. A
// parallel_for publishes one job (fn, range, chunk count) and every participant, the caller
// included, claims chunks from one atomic ticket until none are left; the caller then waits
// until every chunk is done. The ticket packs the job's generation with the chunk counter, so
// a worker that wakes up late can never claim a chunk of a newer job by mistake, and a job's
// fields stay valid while anyone holds one of its chunks (the caller only returns after the
// last chunk). If the worker has not woken up yet when the caller finishes its own chunk, the
// caller takes the worker's chunk too: a slow wake-up costs at most the serial time.
//
// Idle workers spin for kSpinMicros (a training step issues ops back to back) and then sleep
// on a condition variable, so an idle pool leaves the other cores alone. The pool serves one
// job at a time: a parallel_for from a second user thread while the pool is busy runs
// serially on that thread (no waiting, no deadlock). Nested calls run serially.
//
// Big GEMMs split their tiles over this pool too (kernels/blas.cpp): one pool for every kernel.
#include "xgrad/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "xgrad/error.h"

namespace xgrad {

namespace {

constexpr int kSpinMicros = 50;    // how long an idle worker spins before it sleeps
constexpr int kMaxThreads = 1024;  // chunk counts must fit the ticket's 16 bits

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// The first positive integer of an environment variable ("4" or OpenMP's "4,2"), else 0.
int env_threads(const char* name) {
  const char* s = std::getenv(name);
  if (!s || !*s) return 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || v < 1) return 0;
  return static_cast<int>(std::min<long>(v, kMaxThreads));
}

int default_threads() {
  if (int n = env_threads("XGRAD_NUM_THREADS")) return n;
  if (int n = env_threads("OMP_NUM_THREADS")) return n;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxThreads));
}

thread_local bool t_in_parallel = false;

// Marks the current thread as inside a parallel region for its lifetime.
struct RegionGuard {
  bool outer;
  RegionGuard() : outer(!t_in_parallel) { t_in_parallel = true; }
  ~RegionGuard() {
    if (outer) t_in_parallel = false;
  }
};

class Pool {
 public:
  ~Pool() { stop_workers(); }

  // Runs fn over `chunks` equal pieces of [begin, end) on this thread and up to chunks - 1
  // workers. The caller holds job_mutex().
  void run(int64_t begin, int64_t end, int chunks, int threads,
           const std::function<void(int64_t, int64_t)>& fn) {
    ensure_workers(threads - 1);
    fn_ = &fn;
    begin_ = begin;
    len_ = end - begin;
    chunks_ = chunks;
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    const uint64_t gen = ((ticket_.load(std::memory_order_relaxed) >> 32) + 1) & 0xffffffffu;
    // publishes the fields above
    ticket_.store(gen << 32 | static_cast<uint64_t>(chunks) << 16, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard<std::mutex> lk(sleep_mutex_); }
      wake_.notify_all();
    }
    work(gen);
    // wait for the chunks other threads claimed: spin, then give the core away
    for (int spins = 0; done_.load(std::memory_order_acquire) < chunks; ++spins) {
      if (spins < 4000) cpu_relax();
      else std::this_thread::yield();
    }
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  // Stops and joins the workers (they are started again on the next run).
  void stop_workers() {
    {
      std::lock_guard<std::mutex> lk(sleep_mutex_);
      stop_.store(true, std::memory_order_seq_cst);
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    stop_.store(false, std::memory_order_seq_cst);
  }

  std::mutex& job_mutex() { return job_mutex_; }

 private:
  void ensure_workers(int n) {
    if (static_cast<int>(workers_.size()) == n) return;
    stop_workers();
    const uint64_t gen = ticket_.load(std::memory_order_relaxed) >> 32;
    for (int i = 0; i < n; ++i) workers_.emplace_back([this, gen] { worker_loop(gen); });
  }

  // Claims and runs chunks of job `gen` until none are left (or the job is a newer one).
  void work(uint64_t gen) {
    RegionGuard region;
    uint64_t t = ticket_.load(std::memory_order_acquire);
    while (true) {
      if ((t >> 32) != gen) return;
      const int64_t idx = static_cast<int64_t>(t & 0xffffu);
      if (idx >= static_cast<int64_t>((t >> 16) & 0xffffu)) return;  // all claimed
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire))
        continue;
      // chunk idx of job gen is ours: the caller waits for it, so the fields are stable
      if (!failed_.load(std::memory_order_relaxed)) {
        const int64_t lo = begin_ + len_ * idx / chunks_, hi = begin_ + len_ * (idx + 1) / chunks_;
        try {
          (*fn_)(lo, hi);
        } catch (...) {
          std::lock_guard<std::mutex> lk(error_mutex_);
          if (!error_) error_ = std::current_exception();
          failed_.store(true, std::memory_order_relaxed);
        }
      }
      done_.fetch_add(1, std::memory_order_release);
      t = ticket_.load(std::memory_order_acquire);
    }
  }

  void worker_loop(uint64_t seen) {
    using Clock = std::chrono::steady_clock;
    while (true) {
      // spin a little: the next op of a training step usually follows within microseconds
      const auto deadline = Clock::now() + std::chrono::microseconds(kSpinMicros);
      bool fresh = false;
      for (int i = 0;; ++i) {
        if ((ticket_.load(std::memory_order_acquire) >> 32) != seen ||
            stop_.load(std::memory_order_relaxed)) {
          fresh = true;
          break;
        }
        cpu_relax();
        if ((i & 63) == 63 && Clock::now() > deadline) break;
      }
      if (!fresh) {
        std::unique_lock<std::mutex> lk(sleep_mutex_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lk, [&] {
          return (ticket_.load(std::memory_order_seq_cst) >> 32) != seen ||
                 stop_.load(std::memory_order_seq_cst);
        });
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      if (stop_.load(std::memory_order_seq_cst)) return;
      seen = ticket_.load(std::memory_order_acquire) >> 32;
      work(seen);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex job_mutex_;    // one job at a time
  std::mutex sleep_mutex_;  // guards sleeping on wake_
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  // (generation << 32) | (chunk count << 16) | next chunk index
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> failed_{false};
  // the current job (written by the caller before the ticket is published)
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t begin_ = 0, len_ = 0, chunks_ = 0;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool p;  // destroyed at exit: the workers are woken and joined
  return p;
}

std::atomic<int>& thread_count() {
  static std::atomic<int> n{default_threads()};  // first use reads the environment
  return n;
}

}  // namespace

void set_num_threads(int n) {
  if (n < 1) fail("set_num_threads", "expected a positive number of threads, got ", n);
  if (n > kMaxThreads) fail("set_num_threads", "at most ", kMaxThreads, " threads, got ", n);
  if (t_in_parallel) fail("set_num_threads", "cannot change the thread count inside parallel_for");
  std::atomic<int>& count = thread_count();
  pool();                                              // constructed before any use, so destroyed after it
  std::lock_guard<std::mutex> lk(pool().job_mutex());  // waits for a running job
  count.store(n, std::memory_order_relaxed);
}

int get_num_threads() { return thread_count().load(std::memory_order_relaxed); }

void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (begin >= end) return;
  const int threads = get_num_threads();
  const int64_t grain = std::max<int64_t>(grain_size, 1);
  const int64_t chunks = std::min<int64_t>(threads, (end - begin) / grain);
  if (chunks < 2 || t_in_parallel) {
    RegionGuard region;
    fn(begin, end);
    return;
  }
  Pool& p = pool();
  std::unique_lock<std::mutex> lk(p.job_mutex(), std::try_to_lock);
  if (!lk.owns_lock()) {  // another user thread is using the pool: run here, serially
    RegionGuard region;
    fn(begin, end);
    return;
  }
  p.run(begin, end, static_cast<int>(chunks), threads, fn);
}

bool in_parallel_region() { return t_in_parallel; }

}  // namespace xgrad
