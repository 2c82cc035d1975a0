// Benchmarks of the threads collectives backend against references measured
// in the same run: a 16 MiB f32 all-reduce over 2 devices against memcpy of
// the same bytes (one thread, and two threads at once), and the latency of an
// 8-byte all-reduce against the same exchange built on pthread_barrier_wait.
// Every multi-threaded case times a batch of operations inside the threads
// (thread start-up excluded) and keeps the fastest batch, which is the least
// disturbed by other processes on a shared machine. Ratios print at the end.
#include <benchmark/benchmark.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/threads_backend.h"

namespace meshsplit {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kBigBytes = 16 << 20;
constexpr int64_t kBigCount = kBigBytes / 4;

// Fastest observed seconds per operation, by benchmark label.
std::map<std::string, double>& Best() {
  static std::map<std::string, double> best;
  return best;
}

void Record(benchmark::State& state, const std::string& label, double seconds,
            int64_t ops) {
  double per_op = seconds / ops;
  state.SetIterationTime(per_op);
  auto [it, inserted] = Best().emplace(label, per_op);
  if (!inserted) it->second = std::min(it->second, per_op);
}

std::vector<float> Filled(int64_t count, float seed) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = seed + static_cast<float>(i % 1000);
  return v;
}

void BM_Memcpy16MiB(benchmark::State& state) {
  std::vector<float> src = Filled(kBigCount, 1), dst(kBigCount);
  const int ops = 10;
  for (auto _ : state) {
    auto start = Clock::now();
    for (int i = 0; i < ops; ++i) {
      std::memcpy(dst.data(), src.data(), kBigBytes);
      benchmark::DoNotOptimize(dst.data());
      benchmark::ClobberMemory();
    }
    Record(state, "memcpy_1thread",
           std::chrono::duration<double>(Clock::now() - start).count(), ops);
  }
  state.SetBytesProcessed(state.iterations() * kBigBytes);
}

// Two threads each copy their own 16 MiB at the same time: the memory
// traffic of two devices each producing a 16 MiB result.
void BM_Memcpy16MiB2Threads(benchmark::State& state) {
  std::vector<std::vector<float>> src = {Filled(kBigCount, 1), Filled(kBigCount, 2)};
  std::vector<std::vector<float>> dst(2, std::vector<float>(kBigCount));
  const int ops = 10;
  for (auto _ : state) {
    double seconds = 0;
    Status s = RunOnThreads(2, [&](int d, Communicator& c) {
      MS_RETURN_IF_ERROR(c.Barrier());
      auto start = Clock::now();
      for (int i = 0; i < ops; ++i) {
        std::memcpy(dst[d].data(), src[d].data(), kBigBytes);
        benchmark::ClobberMemory();
      }
      MS_RETURN_IF_ERROR(c.Barrier());
      if (d == 0) seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return Status::Ok();
    });
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    Record(state, "memcpy_2threads", seconds, ops);
  }
  state.SetBytesProcessed(state.iterations() * kBigBytes);
}

void BM_AllReduce16MiB2Devices(benchmark::State& state) {
  const bool in_place = state.range(0) != 0;
  std::vector<std::vector<float>> in = {Filled(kBigCount, 1), Filled(kBigCount, 2)};
  std::vector<std::vector<float>> out(2, std::vector<float>(kBigCount));
  const int ops = 10;
  ThreadsWorld world(2);
  for (auto _ : state) {
    double seconds = 0;
    Status s = RunOnThreads(world, [&](int d, Communicator& c) {
      MS_RETURN_IF_ERROR(c.Barrier());
      auto start = Clock::now();
      for (int i = 0; i < ops; ++i) {
        float* dst = in_place ? in[d].data() : out[d].data();
        MS_RETURN_IF_ERROR(c.AllReduce(in[d].data(), dst, PrimitiveType::F32,
                                       kBigCount, ReductionKind::kAdd, {}));
      }
      MS_RETURN_IF_ERROR(c.Barrier());
      if (d == 0) seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return Status::Ok();
    });
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    Record(state, in_place ? "allreduce_16MiB_inplace" : "allreduce_16MiB", seconds,
           ops);
  }
  state.SetBytesProcessed(state.iterations() * kBigBytes);
}

// ---- 8-byte latency ---------------------------------------------------------

constexpr int kSmallOps = 20000;

void BM_AllReduce8BytesThreads(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool sleep_only = state.range(1) != 0;
  ThreadsWorld world(n);
  // Without spinning or yielding: the futex path alone, for comparison.
  if (sleep_only) world.set_wait_policy(0, 0);
  for (auto _ : state) {
    double seconds = 0;
    Status s = RunOnThreads(world, [&](int d, Communicator& c) {
      float v[2] = {1.0f * d, 2.0f}, out[2];
      MS_RETURN_IF_ERROR(c.Barrier());
      auto start = Clock::now();
      for (int i = 0; i < kSmallOps; ++i)
        MS_RETURN_IF_ERROR(c.AllReduce(v, out, PrimitiveType::F32, 2,
                                       ReductionKind::kAdd, {}));
      if (d == 0) seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return Status::Ok();
    });
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    Record(state,
           (sleep_only ? "allreduce_8B_futexonly_n" : "allreduce_8B_threads_n") +
               std::to_string(n),
           seconds, kSmallOps);
  }
}

// The same exchange as the small all-reduce (publish a pointer, wait, sum
// every contribution in order, wait) on pthread_barrier_wait, which sleeps
// in the kernel (futex) when it has to wait.
void BM_AllReduce8BytesPthreadBarrier(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, nullptr, n);
    std::vector<const float*> published(n);
    double seconds = 0;
    Status s = RunOnThreads(n, [&](int d, Communicator&) {
      float v[2] = {1.0f * d, 2.0f}, out[2];
      pthread_barrier_wait(&barrier);
      auto start = Clock::now();
      for (int i = 0; i < kSmallOps; ++i) {
        published[d] = v;
        pthread_barrier_wait(&barrier);
        out[0] = published[0][0];
        out[1] = published[0][1];
        for (int k = 1; k < n; ++k) {
          out[0] += published[k][0];
          out[1] += published[k][1];
        }
        benchmark::DoNotOptimize(out);
        pthread_barrier_wait(&barrier);
      }
      if (d == 0) seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return Status::Ok();
    });
    pthread_barrier_destroy(&barrier);
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    Record(state, "allreduce_8B_pthread_n" + std::to_string(n), seconds, kSmallOps);
  }
}

BENCHMARK(BM_Memcpy16MiB)->UseManualTime()->Iterations(7)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Memcpy16MiB2Threads)->UseManualTime()->Iterations(7)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllReduce16MiB2Devices)->Arg(0)->Arg(1)->UseManualTime()->Iterations(7)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllReduce8BytesThreads)->Args({2, 0})->Args({8, 0})->Args({2, 1})->Args({8, 1})->UseManualTime()->Iterations(5)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AllReduce8BytesPthreadBarrier)->Arg(2)->Arg(8)->UseManualTime()->Iterations(5)
    ->Unit(benchmark::kMicrosecond);

void PrintRatios() {
  auto& b = Best();
  auto get = [&](const char* k) { return b.count(k) ? b[k] : 0.0; };
  std::printf("\nbest time per operation:\n");
  for (const auto& [k, v] : b) std::printf("  %-28s %10.3f us\n", k.c_str(), v * 1e6);
  double ar = get("allreduce_16MiB"), ar_ip = get("allreduce_16MiB_inplace");
  double m1 = get("memcpy_1thread"), m2 = get("memcpy_2threads");
  if (ar > 0 && m1 > 0) {
    std::printf("16 MiB f32 all-reduce, 2 devices: %.2f GB/s of result per device\n",
                kBigBytes / ar / 1e9);
    std::printf("  speed vs memcpy 16 MiB, 1 thread:       %.2fx (target >= 0.8x)\n", m1 / ar);
    std::printf("  speed vs memcpy 16 MiB, 2 threads each: %.2fx\n", m2 / ar);
    std::printf("  in place, vs memcpy 1 thread:           %.2fx\n", m1 / ar_ip);
  }
  for (int n : {2, 8}) {
    double t = get(("allreduce_8B_threads_n" + std::to_string(n)).c_str());
    double p = get(("allreduce_8B_pthread_n" + std::to_string(n)).c_str());
    if (t > 0 && p > 0)
      std::printf("8-byte all-reduce, %d devices: %.2f us (threads backend) vs %.2f us "
                  "(pthread_barrier): %.1fx faster\n",
                  n, t * 1e6, p * 1e6, p / t);
  }
}

}  // namespace
}  // namespace meshsplit

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  meshsplit::PrintRatios();
  return 0;
}
