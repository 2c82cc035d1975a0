// Parse + print of a real model (maxtext train step, ~590 KB of HLO text).
// Target: under 50 ms for parse and print together in a Release build.
#include <benchmark/benchmark.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit {
namespace {

std::shared_ptr<const SourceFile> LoadModel() {
  auto file = std::make_shared<SourceFile>();
  file->name = std::string(MESHSPLIT_SHARED_DIR) + "/models/hlo/maxtext_train_step_dp8.hlo";
  std::ifstream in(file->name, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  file->text = ss.str();
  return file;
}

void BM_Parse(benchmark::State& state) {
  auto file = LoadModel();
  if (file->text.empty()) {
    state.SkipWithError("model file not found (../shared absent)");
    return;
  }
  for (auto _ : state) {
    auto module = ParseModule(file);
    if (!module.ok()) {
      state.SkipWithError(module.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(module->get());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(file->text.size()));
}
BENCHMARK(BM_Parse)->Unit(benchmark::kMillisecond);

void BM_Print(benchmark::State& state) {
  auto file = LoadModel();
  auto module = ParseModule(file);
  if (!module.ok()) {
    state.SkipWithError("model file not found or does not parse");
    return;
  }
  for (auto _ : state) {
    std::string text = PrintModule(**module);
    benchmark::DoNotOptimize(text.data());
  }
}
BENCHMARK(BM_Print)->Unit(benchmark::kMillisecond);

void BM_ParseAndPrint(benchmark::State& state) {
  auto file = LoadModel();
  if (file->text.empty()) {
    state.SkipWithError("model file not found (../shared absent)");
    return;
  }
  for (auto _ : state) {
    auto module = ParseModule(file);
    if (!module.ok()) {
      state.SkipWithError(module.status().ToString().c_str());
      return;
    }
    std::string text = PrintModule(**module);
    benchmark::DoNotOptimize(text.data());
  }
}
BENCHMARK(BM_ParseAndPrint)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace meshsplit

BENCHMARK_MAIN();
