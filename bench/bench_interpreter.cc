// Interpreter benchmarks, each against a reference measured in the same run:
//  - dot f32[1024,1024] x f32[1024,1024] through the interpreter vs a direct
//    cblas_sgemm of the same size (target: interpreter throughput >= 0.95x),
//    and that sgemm on the kernels OpenBLAS was given at start-up vs its
//    generic ones;
//  - elementwise add of two 64 MiB f32 arrays vs memcpy of 64 MiB (target
//    >= 0.8x), once with a freshly allocated output and once with the first
//    operand's buffer donated (as happens for intermediate values);
//  - layout ops, each writing a fresh 64 MiB (or 49 MiB) output, vs a memcpy
//    of the output's bytes (target >= 0.7x): transpose f32[64,64,64,64] by
//    {0,3,1,2} (NHWC to NCHW), the same transpose of the activation shape
//    f32[8,56,56,512] (from a ResNet convolution), a column slice of
//    f32[8192,4096], a concatenate of two f32[4096,2048] along the columns,
//    and a copy;
//  - a chain of elementwise ops with broadcasts (bias add, scale, ReLU,
//    residual subtract) on f32[4096,4096], run as one fused loop
//    (runtime/loop_fusion.h) and unfused, vs memcpy of the 64 MiB output:
//    fused, it reads its input once and writes its output once, as memcpy.
// Fresh outputs come from the runtime's allocator as in any run (large
// blocks are reused from its cache after the first iteration); the heap is
// not tuned here, so what is measured is what a program sees.
// Run: OPENBLAS_CORETYPE=Haswell build/<dir>/bench/bench_interpreter
// The ratios are printed at the end (best repetition of each benchmark).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "runtime/blas_core.h"
#include "runtime/interpreter.h"
#include "runtime/loop_fusion.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

constexpr int64_t kN = 1024;
constexpr int64_t kAddElems = (int64_t{64} << 20) / 4;  // 64 MiB of f32

Literal Filled(const Shape& s, float seed) {
  Literal l(s);
  float* p = l.data<float>();
  for (int64_t i = 0; i < l.element_count(); ++i) p[i] = static_cast<float>((i * 7 + 3) % 13) * seed;
  return l;
}

std::unique_ptr<Module> Parse(const std::string& text) {
  auto m = ParseModuleText(text);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
    std::abort();
  }
  return std::move(m).value();
}

void BM_InterpreterDot(benchmark::State& state) {
  auto m = Parse(R"(HloModule dot
ENTRY e {
  a = f32[1024,1024] parameter(0)
  b = f32[1024,1024] parameter(1)
  ROOT d = f32[1024,1024] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  Literal a = Filled(Shape(PrimitiveType::F32, {kN, kN}), 0.01f);
  Literal b = Filled(Shape(PrimitiveType::F32, {kN, kN}), 0.02f);
  for (auto _ : state) {
    auto r = EvaluateBorrowed(*m->entry(), {&a, &b});
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r->raw());
  }
  state.SetItemsProcessed(state.iterations() * 2 * kN * kN * kN);
}

void BM_CblasSgemm(benchmark::State& state) {
  Literal a = Filled(Shape(PrimitiveType::F32, {kN, kN}), 0.01f);
  Literal b = Filled(Shape(PrimitiveType::F32, {kN, kN}), 0.02f);
  std::vector<float> c(kN * kN);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a.data<float>(), kN,
                b.data<float>(), kN, 0.0f, c.data(), kN);
    benchmark::DoNotOptimize(c.data());
  }
  state.SetItemsProcessed(state.iterations() * 2 * kN * kN * kN);
}

// The same sgemm on OpenBLAS's generic SSE3 ("Prescott") kernels, what a
// CPU model newer than the library gets unless the start-up choice
// (runtime/blas_core.h) picks by CPU features.
void BM_CblasSgemmGenericKernels(benchmark::State& state) {
  const std::string chosen = BlasCoreName();
  if (!SetBlasCore("Prescott")) {
    state.SkipWithError("this OpenBLAS cannot switch kernels");
    return;
  }
  BM_CblasSgemm(state);
  SetBlasCore(chosen);
}

const char* kAddModule = R"(HloModule add
ENTRY e {
  a = f32[16777216] parameter(0)
  b = f32[16777216] parameter(1)
  ROOT s = f32[16777216] add(a, b)
})";

void BM_InterpreterAddFreshOutput(benchmark::State& state) {
  auto m = Parse(kAddModule);
  Literal a = Filled(Shape(PrimitiveType::F32, {kAddElems}), 1.0f);
  Literal b = Filled(Shape(PrimitiveType::F32, {kAddElems}), 2.0f);
  for (auto _ : state) {
    auto r = EvaluateBorrowed(*m->entry(), {&a, &b});
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r->raw());
  }
  state.SetBytesProcessed(state.iterations() * kAddElems * 4);
}

void BM_InterpreterAddDonatedInput(benchmark::State& state) {
  auto m = Parse(kAddModule);
  Literal a = Filled(Shape(PrimitiveType::F32, {kAddElems}), 1.0f);
  Literal b = Filled(Shape(PrimitiveType::F32, {kAddElems}), 2.0f);
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<Literal> args;
    args.push_back(a);  // copies made outside the timed region
    args.push_back(b);
    state.ResumeTiming();
    auto r = Evaluate(*m->entry(), std::move(args));
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r->raw());
    state.PauseTiming();
    r = Literal();  // free outside the timed region
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * kAddElems * 4);
}

// Times `module` on one operand of `dims`; bytes processed are the output's.
void RunOneOperand(benchmark::State& state, const char* module, const std::vector<int64_t>& dims) {
  auto m = Parse(module);
  Literal a = Filled(Shape(PrimitiveType::F32, dims), 1.0f);
  int64_t out_bytes = 0;
  for (auto _ : state) {
    auto r = EvaluateBorrowed(*m->entry(), {&a});
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r->raw());
    out_bytes = r->size_bytes();
  }
  state.SetBytesProcessed(state.iterations() * out_bytes);
}

void BM_InterpreterTranspose4D(benchmark::State& state) {
  RunOneOperand(state, R"(HloModule transpose
ENTRY e {
  a = f32[64,64,64,64] parameter(0)
  ROOT t = f32[64,64,64,64] transpose(a), dimensions={0,3,1,2}
})",
               {64, 64, 64, 64});
}

void BM_InterpreterTransposeConvShape(benchmark::State& state) {
  RunOneOperand(state, R"(HloModule transpose
ENTRY e {
  a = f32[8,56,56,512] parameter(0)
  ROOT t = f32[8,512,56,56] transpose(a), dimensions={0,3,1,2}
})",
               {8, 56, 56, 512});
}

void BM_InterpreterSlice(benchmark::State& state) {
  RunOneOperand(state, R"(HloModule slice
ENTRY e {
  a = f32[8192,4096] parameter(0)
  ROOT s = f32[8192,2048] slice(a), slice={[0:8192], [1024:3072]}
})",
               {8192, 4096});
}

void BM_InterpreterConcatenate(benchmark::State& state) {
  auto m = Parse(R"(HloModule concatenate
ENTRY e {
  a = f32[4096,2048] parameter(0)
  b = f32[4096,2048] parameter(1)
  ROOT c = f32[4096,4096] concatenate(a, b), dimensions={1}
})");
  Literal a = Filled(Shape(PrimitiveType::F32, {4096, 2048}), 1.0f);
  Literal b = Filled(Shape(PrimitiveType::F32, {4096, 2048}), 2.0f);
  for (auto _ : state) {
    auto r = EvaluateBorrowed(*m->entry(), {&a, &b});
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r->raw());
  }
  state.SetBytesProcessed(state.iterations() * kAddElems * 4);
}

void BM_InterpreterCopy(benchmark::State& state) {
  RunOneOperand(state, R"(HloModule copy
ENTRY e {
  a = f32[16777216] parameter(0)
  ROOT c = f32[16777216] copy(a)
})",
               {kAddElems});
}

const char* kChainModule = R"(HloModule chain
ENTRY e {
  x = f32[4096,4096] parameter(0)
  b = f32[4096] parameter(1)
  bb = f32[4096,4096] broadcast(b), dimensions={1}
  a = f32[4096,4096] add(x, bb)
  k = f32[] constant(0.5)
  kb = f32[4096,4096] broadcast(k), dimensions={}
  m = f32[4096,4096] multiply(a, kb)
  z = f32[] constant(0)
  zb = f32[4096,4096] broadcast(z), dimensions={}
  r = f32[4096,4096] maximum(m, zb)
  ROOT s = f32[4096,4096] subtract(r, x)
})";

void RunChain(benchmark::State& state, bool fused) {
  interp::SetLoopFusionEnabled(fused);  // read when each run builds its plan
  auto m = Parse(kChainModule);
  Literal x = Filled(Shape(PrimitiveType::F32, {4096, 4096}), 1.0f);
  Literal b = Filled(Shape(PrimitiveType::F32, {4096}), 2.0f);
  for (auto _ : state) {
    auto r = EvaluateBorrowed(*m->entry(), {&x, &b});
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r->raw());
  }
  interp::SetLoopFusionEnabled(true);
  state.SetBytesProcessed(state.iterations() * kAddElems * 4);
}

void BM_InterpreterChainFused(benchmark::State& state) { RunChain(state, true); }
void BM_InterpreterChainUnfused(benchmark::State& state) { RunChain(state, false); }

void BM_MemcpyConvShape(benchmark::State& state) {
  const int64_t n = int64_t{8} * 56 * 56 * 512;
  std::vector<float> src(n, 1.0f), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * 4);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 4);
}

void BM_Memcpy64MiB(benchmark::State& state) {
  std::vector<float> src(kAddElems, 1.0f), dst(kAddElems);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kAddElems * 4);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kAddElems * 4);
}

BENCHMARK(BM_InterpreterDot)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_CblasSgemm)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_CblasSgemmGenericKernels)->Unit(benchmark::kMillisecond)->Repetitions(3);
BENCHMARK(BM_InterpreterAddFreshOutput)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_InterpreterAddDonatedInput)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_InterpreterTranspose4D)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_Memcpy64MiB)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_InterpreterTransposeConvShape)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_MemcpyConvShape)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_InterpreterSlice)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_InterpreterConcatenate)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_InterpreterCopy)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_InterpreterChainFused)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_InterpreterChainUnfused)->Unit(benchmark::kMillisecond)->Repetitions(5);

// Records the best (lowest) real time per iteration of each benchmark.
class BestTimeReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.iterations == 0) continue;
      double t = r.GetAdjustedRealTime();
      std::string name = r.run_name.function_name;
      auto it = best_.find(name);
      if (it == best_.end() || t < it->second) best_[name] = t;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double Best(const std::string& name) const {
    auto it = best_.find(name);
    return it == best_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> best_;
};

}  // namespace
}  // namespace meshsplit

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  meshsplit::BestTimeReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  auto ratio = [&](const char* ref, const char* ours) {
    double r = reporter.Best(ref), o = reporter.Best(ours);
    return o > 0 ? r / o : 0.0;
  };
  std::printf("\nOpenBLAS kernels: %s\n", meshsplit::BlasCoreChoice().c_str());
  std::printf("ratio sgemm chosen kernels vs generic (generic time / chosen time): %.3f\n",
              ratio("BM_CblasSgemmGenericKernels", "BM_CblasSgemm"));
  std::printf("ratio dot (cblas_sgemm time / interpreter time, target >= 0.95): %.3f\n",
              ratio("BM_CblasSgemm", "BM_InterpreterDot"));
  std::printf("ratio add fresh output (memcpy time / interpreter time, target >= 0.8): %.3f\n",
              ratio("BM_Memcpy64MiB", "BM_InterpreterAddFreshOutput"));
  std::printf("ratio add donated input (memcpy time / interpreter time, target >= 0.8): %.3f\n",
              ratio("BM_Memcpy64MiB", "BM_InterpreterAddDonatedInput"));
  std::printf("ratio transpose f32[64,64,64,64] (memcpy time / interpreter time, target >= 0.7): "
              "%.3f\n",
              ratio("BM_Memcpy64MiB", "BM_InterpreterTranspose4D"));
  std::printf("ratio transpose f32[8,56,56,512] (memcpy time / interpreter time, target >= 0.7): "
              "%.3f\n",
              ratio("BM_MemcpyConvShape", "BM_InterpreterTransposeConvShape"));
  std::printf("ratio slice to f32[8192,2048] (memcpy time / interpreter time, target >= 0.7): "
              "%.3f\n",
              ratio("BM_Memcpy64MiB", "BM_InterpreterSlice"));
  std::printf("ratio concatenate to f32[4096,4096] (memcpy time / interpreter time, target >= 0.7): "
              "%.3f\n",
              ratio("BM_Memcpy64MiB", "BM_InterpreterConcatenate"));
  std::printf("ratio copy f32[16777216] (memcpy time / interpreter time, target >= 0.7): %.3f\n",
              ratio("BM_Memcpy64MiB", "BM_InterpreterCopy"));
  std::printf("ratio fused chain f32[4096,4096] (memcpy time / interpreter time, target >= 0.8): "
              "%.3f\n",
              ratio("BM_Memcpy64MiB", "BM_InterpreterChainFused"));
  std::printf("ratio chain fused vs unfused (unfused time / fused time): %.3f\n",
              ratio("BM_InterpreterChainUnfused", "BM_InterpreterChainFused"));
  benchmark::Shutdown();
  return 0;
}
