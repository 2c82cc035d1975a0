// The planner's time per candidate on the GPT-2 training step of
// examples/gpt2 over mesh data=2,model=4: one Evaluator::Evaluate (copy the
// module, apply the spec, propagate, partition, cost) of the search's first
// candidate, and, measured in the same run, the two ways of making the
// per-candidate copy: Module::Clone (what the evaluator does) and printing
// then re-parsing the text (what it did before). The evaluation's time with
// the old copy is estimated as evaluate - clone + print/parse. Also the
// exact planner (--solver ilp): building the strategy graph and solving its
// ILP, against the same candidate evaluation.
#include <benchmark/benchmark.h>

#include "bench_clock.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <vector>

#include "autoshard/decision_space.h"
#include "autoshard/ilp.h"
#include "autoshard/strategy_graph.h"
#include "autoshard/objective.h"
#include "compiler/compile.h"
#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit {
namespace {

std::unique_ptr<Module> LoadGpt2() {
  CompileOptions options;
  options.until = CompileStage::kPrepared;
  options.expand_batch_norm = true;
  std::unique_ptr<Module> module;
  auto loaded =
      CompileFile(MESHSPLIT_SOURCE_DIR "/examples/gpt2/gpt2_train_step.onnx", options, &module);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    std::exit(1);
  }
  return module;
}

struct Setup {
  std::unique_ptr<Module> module = LoadGpt2();
  Mesh mesh = *Mesh::Parse("data=2,model=4");
  autoshard::DecisionSpace space =
      *autoshard::BuildDecisionSpace(*module, mesh, autoshard::DecisionSpaceOptions{});
  autoshard::Evaluator evaluator{*module, space, autoshard::MachineModel{}};
  autoshard::Choice choice = autoshard::InitialChoice(space);
};

Setup& TheSetup() {
  static Setup setup;
  return setup;
}

void BM_EvaluateCandidate(benchmark::State& state) {
  Setup& s = TheSetup();
  for (auto _ : state) benchmark::DoNotOptimize(s.evaluator.Evaluate(s.choice));
}
BENCHMARK(BM_EvaluateCandidate)->Unit(benchmark::kMillisecond);

void BM_CopyByClone(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(TheSetup().module->Clone());
}
BENCHMARK(BM_CopyByClone)->Unit(benchmark::kMillisecond);

void BM_CopyByPrintParse(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ParseModuleText(PrintModule(*TheSetup().module)));
}
BENCHMARK(BM_CopyByPrintParse)->Unit(benchmark::kMillisecond);

// Graph + ILP; false when the solve found no plan.
bool SolveExact(const Setup& s) {
  auto g = autoshard::BuildStrategyGraph(*s.module, s.space, autoshard::MachineModel{});
  if (!g.ok()) return false;
  return !autoshard::SolveStrategyGraph(*g, autoshard::MachineModel{}, {}).choice.empty();
}

void BM_ExactSolve(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(SolveExact(TheSetup()));
}
BENCHMARK(BM_ExactSolve)->Unit(benchmark::kMillisecond);

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace meshsplit

int main(int argc, char** argv) {
  using namespace meshsplit;
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  // Interleaved repetitions, so machine load hits the three alike.
  Setup& s = TheSetup();
  std::vector<double> eval, clone, reparse, exact;
  auto time = [](const std::function<void()>& f) {
    double start = ThreadSeconds();
    f();
    return ThreadSeconds() - start;
  };
  bool ok = true;
  for (int rep = 0; rep < 7; ++rep) {
    eval.push_back(time([&] { ok &= s.evaluator.Evaluate(s.choice).ok; }));
    clone.push_back(time([&] { benchmark::DoNotOptimize(s.module->Clone()); }));
    reparse.push_back(
        time([&] { benchmark::DoNotOptimize(ParseModuleText(PrintModule(*s.module))); }));
    exact.push_back(time([&] { ok &= SolveExact(s); }));
  }
  if (!ok) {
    std::fprintf(stderr, "bench_autoshard: the candidate did not evaluate\n");
    return 1;
  }
  const double e = Median(eval), c = Median(clone), r = Median(reparse), x = Median(exact);
  const double before = e - c + r;
  int64_t instructions = 0;
  for (const auto& comp : s.module->computations()) instructions += comp->instruction_count();
  std::printf("gpt2 train step (%lld instructions), mesh data=2,model=4, %zu decision groups\n",
              static_cast<long long>(instructions), s.space.groups.size());
  std::printf("per candidate: evaluate %.2f ms (copy by Clone %.2f ms); with print+parse copy "
              "%.2f ms would be %.2f ms: %.2fx candidates per second\n",
              e * 1e3, c * 1e3, r * 1e3, before * 1e3, before / e);
  std::printf("exact planner (strategy graph + ILP, CPU time): %.2f ms = %.1f candidate "
              "evaluations\n",
              x * 1e3, x / e);
  return 0;
}
