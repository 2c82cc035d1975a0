// Partitioning time of a generated 96-layer transformer-like module (MLP
// blocks with data x model sharding, residual adds, a row reduction per
// layer) at 8 and at 8192 partitions. Tile assignments and replica groups
// stay in iota form and offsets come from partition-id arithmetic, so the
// time should not depend on the device count: the reported ratio
// t(8192) / t(8) is the number to watch (target <= 1.1).
#include <benchmark/benchmark.h>

#include "bench_clock.h"

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <string>
#include <vector>

#include "partitioner/partitioner.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

constexpr int kLayers = 96;

std::string TransformerLike(int64_t n) {
  const int64_t m = 4, d = n / m;  // mesh data=d, model=m
  const std::string N = std::to_string(n), D = std::to_string(d), M = std::to_string(m);
  const std::string act = "{devices=[" + D + ",1," + M + "]<=[" + N + "] last_tile_dim_replicate}";
  const std::string hid = "{devices=[" + D + "," + M + "]<=[" + N + "]}";
  const std::string w1 = "{devices=[1," + M + "," + D + "]<=[" + D + "," + M +
                         "]T(1,0) last_tile_dim_replicate}";
  const std::string w2 = "{devices=[" + M + ",1," + D + "]<=[" + D + "," + M +
                         "]T(1,0) last_tile_dim_replicate}";
  std::string s = "HloModule transformer, num_partitions=" + N + "\n\n";
  s += "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n\n";
  s += "ENTRY main {\n";
  s += "  x0 = f32[8192,1024] parameter(0), sharding=" + act + "\n";
  s += "  zero = f32[] constant(0)\n";
  int param = 1;
  for (int l = 0; l < kLayers; ++l) {
    std::string L = std::to_string(l), prev = "x" + L, next = "x" + std::to_string(l + 1);
    s += "  w1_" + L + " = f32[1024,4096] parameter(" + std::to_string(param++) + "), sharding=" + w1 + "\n";
    s += "  w2_" + L + " = f32[4096,1024] parameter(" + std::to_string(param++) + "), sharding=" + w2 + "\n";
    s += "  h" + L + " = f32[8192,4096] dot(" + prev + ", w1_" + L +
         "), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding=" + hid + "\n";
    s += "  g" + L + " = f32[8192,4096] tanh(h" + L + "), sharding=" + hid + "\n";
    s += "  o" + L + " = f32[8192,1024] dot(g" + L + ", w2_" + L +
         "), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding=" + act + "\n";
    s += "  r" + L + " = f32[8192,1024] add(" + prev + ", o" + L + "), sharding=" + act + "\n";
    s += "  rs" + L + " = f32[8192] reduce(r" + L + ", zero), dimensions={1}, to_apply=add, sharding={devices=[" +
         D + "," + M + "]<=[" + N + "] last_tile_dim_replicate}\n";
    s += "  b" + L + " = f32[8192,1024] broadcast(rs" + L + "), dimensions={0}, sharding=" + act + "\n";
    s += "  " + next + " = f32[8192,1024] subtract(r" + L + ", b" + L + "), sharding=" + act + "\n";
  }
  s += "  ROOT out = f32[8192,1024] copy(x" + std::to_string(kLayers) + "), sharding=" + act + "\n}\n";
  return s;
}

std::unique_ptr<Module> Parse(int64_t n) {
  auto m = ParseModuleText(TransformerLike(n));
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
    std::abort();
  }
  return std::move(*m);
}

int64_t last_instruction_count = 0;

double PartitionSeconds(const Module& m) {
  double start = ThreadSeconds();
  auto out = PartitionModule(m, {});
  double end = ThreadSeconds();
  if (!out.ok()) {
    std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
    std::abort();
  }
  last_instruction_count = (*out)->entry()->instruction_count();
  benchmark::DoNotOptimize(out);
  return end - start;
}

void BM_Partition(benchmark::State& state) {
  auto m = Parse(state.range(0));
  for (auto _ : state) PartitionSeconds(*m);
}
BENCHMARK(BM_Partition)->Arg(8)->Arg(8192)->Unit(benchmark::kMillisecond);

double MedianSeconds(const Module& m, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(PartitionSeconds(m));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace
}  // namespace meshsplit

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  // Interleaved repetitions so that machine load hits both sizes alike.
  auto small = meshsplit::Parse(8), large = meshsplit::Parse(8192);
  std::vector<double> ts, tl;
  int64_t count_small = 0, count_large = 0;
  for (int i = 0; i < 15; ++i) {
    ts.push_back(meshsplit::MedianSeconds(*small, 1));
    count_small = meshsplit::last_instruction_count;
    tl.push_back(meshsplit::MedianSeconds(*large, 1));
    count_large = meshsplit::last_instruction_count;
  }
  std::sort(ts.begin(), ts.end());
  std::sort(tl.begin(), tl.end());
  double s = ts[ts.size() / 2], l = tl[tl.size() / 2];
  std::printf("partition %d layers (thread CPU time, median of 15): 8 partitions %.2f ms "
              "(%lld instructions), 8192 partitions %.2f ms (%lld instructions), ratio %.3f\n",
              meshsplit::kLayers, s * 1e3, static_cast<long long>(count_small), l * 1e3,
              static_cast<long long>(count_large), l / s);
  return 0;
}
