// The worker pool behind ParallelFor (see parallel.h).
#include "runtime/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace meshsplit::interp {
namespace {

int HardwareThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// MESHSPLIT_INTRA_OP_THREADS=N overrides the default (for measuring).
std::atomic<int>& ThreadsSetting() {
  static std::atomic<int> threads{[] {
    const char* v = std::getenv("MESHSPLIT_INTRA_OP_THREADS");
    const int n = v != nullptr ? std::atoi(v) : 0;
    return n > 0 ? n : HardwareThreads();
  }()};
  return threads;
}

// One ParallelFor call: parts are claimed from `next`; a worker that wakes
// after the job is done claims nothing and never touches `fn`.
struct Job {
  const std::function<void(int)>* fn = nullptr;
  int parts = 0;
  std::atomic<int> next{0};
  std::atomic<int> done{0};
};

class Pool {
 public:
  // Never destroyed: its workers are detached and wait forever.
  static Pool& Get() {
    static Pool* pool = new Pool;
    return *pool;
  }

  bool TryRun(int parts, int threads, const std::function<void(int)>& fn) {
    std::unique_lock<std::mutex> owner(owner_mu_, std::try_to_lock);
    if (!owner.owns_lock()) return false;
    auto job = std::make_shared<Job>();
    job->fn = &fn;
    job->parts = parts;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (static_cast<int>(workers_) < threads - 1) {
        std::thread([this] { WorkerLoop(); }).detach();
        ++workers_;
      }
      job_ = job;
      ++generation_;
    }
    cv_.notify_all();
    Work(*job);
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return job->done.load() == job->parts; });
    job_.reset();
    return true;
  }

 private:
  void Work(Job& job) {
    for (int p; (p = job.next.fetch_add(1)) < job.parts;) {
      (*job.fn)(p);
      if (job.done.fetch_add(1) + 1 == job.parts) {
        std::lock_guard<std::mutex> lock(mu_);
        done_cv_.notify_all();
      }
    }
  }

  void WorkerLoop() {
    uint64_t seen = 0;
    while (true) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen && job_ != nullptr; });
        seen = generation_;
        job = job_;
      }
      Work(*job);
    }
  }

  std::mutex owner_mu_;  // held by the caller whose job the pool runs
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::shared_ptr<Job> job_;
  uint64_t generation_ = 0;
  size_t workers_ = 0;
};

}  // namespace

int IntraOpThreads() { return ThreadsSetting().load(); }
void SetIntraOpThreads(int threads) { ThreadsSetting().store(std::max(1, threads)); }

void ParallelFor(int parts, const std::function<void(int)>& fn) {
  const int threads = std::min(parts, IntraOpThreads());
  if (threads <= 1 || !Pool::Get().TryRun(parts, threads, fn))
    for (int p = 0; p < parts; ++p) fn(p);
}

}  // namespace meshsplit::interp
