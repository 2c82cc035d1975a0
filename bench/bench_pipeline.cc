// Compile time of a pipelined training step against the device count. The
// scanned residual MLP training step of tests/pipeline (8 layers, batch
// 8192, width 64; forward scan, loss, reverse backward scan) is pipelined
// over `stage` ∈ {2, 4, 8} stages with 8 microbatches and a data axis of 1
// to 1024 devices, and compiled (propagate, pipeline, propagate, partition).
// The reported ratio t(largest data) / t(data = 1) per stage count is the
// number to watch: GSPMD-style pipelining should keep compile time flat in
// the number of devices (target <= 1.1).
//
// Then the time of one pipelined training step in the executor (4 virtual
// devices, stage=4, 4 microbatches, batch 2048), gpipe and circular (R = 2),
// with bubble stage-ticks skipping their layers (the default) and computing
// them: process CPU seconds, the work every device did, and wall seconds.
// 1f1b runs its unpaired table when skipping and its paired one (a forward
// and a backward slot per tick) when computing every tick.
//
// Then `maxtext` (needs ../shared/models/hlo/maxtext_train_step_dp8.hlo):
// partition time of the pipelined MaxText training step (both scans, 2
// microbatches, examples/maxtext/pipeline_dp8_pp2.json's rules) with its
// data-parallel shardings rewritten from 8 to D devices, D from 8 to 1024,
// and its batch to 2D (MaxTextOver), over 2, 4 and 8 stages (up to 8192
// devices); t(largest) / t(smallest) per stage count should stay <= 1.1.
//
// Then `bubble`: the bubble measured by the executor (verify's trace of the
// tick conditionals, one per device and tick) against the formula, for
// gpipe, circular (R = 2), 1f1b and zb-h1, S in {2, 4}, M in {4, 8, 16}: the
// share of device-ticks that ran the idle branch, and the share of the
// devices' thread CPU time spent idle when each tick lasts as long as its
// slowest device (F and B cost differently, so this one differs from the
// equal-cost formula).
//
// Then `memory`: per-device peak memory of the partitioned training step
// (batch 2048) from the cost model, 1f1b against gpipe, for S in {2, 4} and
// M in {4, 8, 16}; the activation part (peak less parameters) of 1f1b over
// gpipe's, against S / M, and the residual microbatches a stage holds;
// zb-h1's peak beside them (it also keeps what B saves for W).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "bench_clock.h"
#include "compiler/compile.h"
#include "cost/cost_model.h"
#include "runtime/executor.h"
#include "text/parser.h"
#include "verify/verify.h"

namespace meshsplit {
namespace {

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// The test's training step at bench shapes.
std::string TrainStep(const std::string& batch = "8192") {
  std::ifstream in(MESHSPLIT_SOURCE_DIR "/tests/pipeline/Inputs/scan_mlp_train.hlo");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  const std::vector<std::pair<std::string, std::string>> sizes = {
      {"[4,8,16]", "[8," + batch + ",64]"}, {"[1,8,16]", "[1," + batch + ",64]"},
      {"{1,8,16}", "{1," + batch + ",64}"},
      {"[4,16,16]", "[8,64,64]"},  {"[1,16,16]", "[1,64,64]"},  {"{1,16,16}", "{1,64,64}"},
      {"[8,16]", "[" + batch + ",64]"}, {"[16,16]", "[64,64]"}, {"[4,16]", "[8,64]"},
      {"[1,16]", "[1,64]"},        {"{1,16}", "{1,64}"},        {"f32[16]", "f32[64]"},
      {"constant(4)", "constant(8)"}, {"constant(3)", "constant(7)"}};
  for (const auto& [from, to] : sizes) s = Replace(s, from, to);
  return s;
}

double CompileSeconds(const std::string& text, int64_t data, int64_t stages) {
  std::vector<double> times;
  for (int rep = 0; rep < 3; ++rep) {
    auto module = ParseModuleText(text);
    if (!module.ok()) {
      std::fprintf(stderr, "%s\n", module.status().ToString().c_str());
      std::exit(1);
    }
    CompileOptions options;
    options.mesh = "data=" + std::to_string(data) + ",stage=" + std::to_string(stages);
    PipelineSpec p;
    p.axis = "stage";
    p.microbatches = 8;
    options.pipeline = p;
    const double start = ThreadSeconds();
    Status st = Compile(**module, options, nullptr);
    times.push_back(ThreadSeconds() - start);
    if (!st.ok()) {
      std::fprintf(stderr, "data=%lld stage=%lld: %s\n", static_cast<long long>(data),
                   static_cast<long long>(stages), st.ToString().c_str());
      std::exit(1);
    }
  }
  std::sort(times.begin(), times.end());
  return times[1];
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double ProcessCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The step pipelined as `schedule` over `stages` stages with `micro`
// microbatches, compiled and partitioned; exits on any error.
CompileResult CompileStep(Module& module, int64_t stages, int64_t micro,
                          const std::string& schedule, int64_t repeats, bool skip_idle = true) {
  CompileOptions options;
  options.mesh = "stage=" + std::to_string(stages);
  PipelineSpec p;
  p.axis = "stage";
  p.microbatches = micro;
  p.schedule = schedule;
  p.repeats = repeats;
  options.pipeline = p;
  options.pipeline_skip_idle = skip_idle;
  auto compiled = Compile(module, options);
  if (!compiled.ok() || compiled->partitioned == nullptr) {
    std::fprintf(stderr, "%s: %s\n", schedule.c_str(),
                 compiled.ok() ? "no program" : compiled.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(compiled).value();
}

struct StepTime {
  double cpu = 0, wall = 0;
};

// Median over 3 runs of one training step on `stages` virtual devices.
StepTime RunStep(const std::string& text, int64_t stages, const std::string& schedule,
                 bool skip_idle) {
  auto module = ParseModuleText(text);
  if (!module.ok()) std::exit(1);
  const std::vector<Literal> inputs = RandomInputs(*(*module)->entry(), 1);
  const Shape result = (*module)->entry()->root()->shape();
  const CompileResult compiled =
      CompileStep(**module, stages, 4, schedule, schedule == "circular" ? 2 : 1, skip_idle);
  std::vector<double> cpu, wall;
  for (int rep = 0; rep < 3; ++rep) {
    const double c0 = ProcessCpuSeconds(), w0 = WallSeconds();
    auto r = RunSpmd(*compiled.partitioned, inputs, result, stages);
    cpu.push_back(ProcessCpuSeconds() - c0);
    wall.push_back(WallSeconds() - w0);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      std::exit(1);
    }
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  return {cpu[1], wall[1]};
}

// The MaxText step with its 8-way data-parallel shardings over `data`
// devices and its batch of 16 grown to 2 * data (weak scaling: every
// device keeps one example per microbatch, so the program's shape per
// device is the same for every data >= 8, as in data-parallel training; a
// batch that does not divide would measure uneven-shard handling instead).
std::string MaxTextOver(const std::string& text, int64_t data) {
  const std::string d = std::to_string(data);
  const std::string batch = std::to_string(std::max<int64_t>(16, 2 * data));
  std::string s = Replace(text, "<=[8]", "<=[" + d + "]");
  s = Replace(s, "devices=[8,", "devices=[" + d + ",");
  // The batch leads the activations' shapes, follows the layer dim in the
  // stacked residuals, and the layer in a residual's dynamic-slice sizes.
  s = Replace(s, "[16,", "[" + batch + ",");
  s = Replace(s, "[8,16,", "[8," + batch + ",");
  s = Replace(s, "{1,16,", "{1," + batch + ",");
  s = Replace(s, "[1,16,", "[1," + batch + ",");
  s = Replace(s, "slice={[0:16],", "slice={[0:" + batch + "],");
  return Replace(s, "num_partitions=8", "num_partitions=" + d);
}

int MaxTextPartitionTimes() {
  std::ifstream in(MESHSPLIT_SOURCE_DIR "/../shared/models/hlo/maxtext_train_step_dp8.hlo");
  if (!in) {
    std::printf("skipped: needs ../shared/models/hlo/maxtext_train_step_dp8.hlo\n");
    return 0;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string original = ss.str();
  std::printf("%-8s %-8s %-8s %12s\n", "stages", "data", "devices", "partition ms");
  for (int64_t stages : {2, 4, 8}) {
    double first = 0, last = 0;
    for (int64_t data : {8, 64, 512, 1024}) {
      const std::string text = MaxTextOver(original, data);
      auto spec = ReadShardSpec(MESHSPLIT_SOURCE_DIR "/examples/maxtext/pipeline_dp8_pp2.json",
                                "data=" + std::to_string(data) + ",stage=" +
                                    std::to_string(stages));
      if (!spec.ok()) {
        std::fprintf(stderr, "spec: %s\n", spec.status().ToString().c_str());
        return 1;
      }
      auto shared = std::make_shared<const ShardSpec>(std::move(spec).value());
      std::vector<double> times;
      for (int rep = 0; rep < 3; ++rep) {
        auto module = ParseModuleText(text);
        if (!module.ok()) {
          std::fprintf(stderr, "%s\n", module.status().ToString().c_str());
          return 1;
        }
        CompileOptions options;
        options.spec = shared;
        const double start = ThreadSeconds();
        auto compiled = Compile(**module, options);
        times.push_back(ThreadSeconds() - start);
        if (!compiled.ok()) {
          std::fprintf(stderr, "data=%lld stage=%lld: %s\n", static_cast<long long>(data),
                       static_cast<long long>(stages), compiled.status().ToString().c_str());
          return 1;
        }
      }
      std::sort(times.begin(), times.end());
      if (data == 8) first = times[1];
      last = times[1];
      std::printf("%-8lld %-8lld %-8lld %12.1f\n", static_cast<long long>(stages),
                  static_cast<long long>(data), static_cast<long long>(data * stages),
                  times[1] * 1e3);
    }
    std::printf("stages=%lld: t(data=1024) / t(data=8) = %.2f\n", static_cast<long long>(stages),
                last / first);
  }
  return 0;
}

// One training step pipelined as `schedule` on `stages` devices, its tick
// conditionals traced.
PipelineTicks MeasuredTicks(const std::string& text, int64_t stages, int64_t micro,
                            const std::string& schedule, int64_t repeats) {
  auto module = ParseModuleText(text);
  if (!module.ok()) std::exit(1);
  const std::vector<Literal> inputs = RandomInputs(*(*module)->entry(), 1);
  const Shape result = (*module)->entry()->root()->shape();
  const CompileResult compiled = CompileStep(**module, stages, micro, schedule, repeats);
  std::vector<std::vector<BranchRun>> traces;
  SpmdRunOptions run;
  run.branch_traces = &traces;
  auto r = RunSpmd(*compiled.partitioned, inputs, result, stages, run);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  return MeasurePipelineTicks(traces);
}

struct StepMemory {
  int64_t peak = 0, parameters = 0, live_microbatches = 0, ticks = 0;
};

// The cost model's per-device peak of the step pipelined as `schedule`.
StepMemory PeakMemory(const std::string& text, int64_t stages, int64_t micro,
                      const std::string& schedule) {
  auto module = ParseModuleText(text);
  if (!module.ok()) std::exit(1);
  const CompileResult compiled = CompileStep(**module, stages, micro, schedule, 1);
  const ModuleCost cost = ComputeModuleCost(*compiled.partitioned);
  StepMemory m;
  m.peak = cost.peak_memory_bytes;
  m.parameters = cost.parameter_bytes;
  for (const PipelineSchedule& l : compiled.pipeline.loops) {
    m.live_microbatches = std::max(m.live_microbatches, l.live_microbatches);
    m.ticks += l.ticks;
  }
  return m;
}

}  // namespace
}  // namespace meshsplit

int main(int argc, char** argv) {
  using namespace meshsplit;
  // `bench_pipeline exec` runs the executor part only, `bench_pipeline
  // memory` the memory part only.
  const std::string part = argc > 1 ? argv[1] : "";
  if (part == "maxtext") return MaxTextPartitionTimes();
  if (part == "bubble") {
    const std::string step = TrainStep("2048");
    std::printf("%-9s %-7s %-6s %9s %9s %9s %9s\n", "schedule", "stages", "micro", "formula",
                "ticks", "|diff|", "time");
    double worst = 0;
    for (const std::string schedule : {"gpipe", "circular", "1f1b", "zb-h1"})
      for (int64_t stages : {2, 4})
        for (int64_t micro : {4, 8, 16}) {
          const int64_t repeats = schedule == "circular" ? 2 : 1;
          const PipelineTicks t = MeasuredTicks(step, stages, micro, schedule, repeats);
          // zb-h1: 3M actions (F, B, W) per stage instead of 1f1b's 2M.
          const int64_t work = schedule == "zb-h1" ? 3 * micro : micro * repeats;
          const double formula =
              static_cast<double>(stages - 1) / static_cast<double>(work + stages - 1);
          worst = std::max(worst, std::abs(t.idle_ticks - formula));
          std::printf("%-9s %-7lld %-6lld %9.4f %9.4f %9.4f %9.4f\n", schedule.c_str(),
                      static_cast<long long>(stages), static_cast<long long>(micro), formula,
                      t.idle_ticks, std::abs(t.idle_ticks - formula), t.idle_time);
        }
    std::printf("largest |measured - formula| over the device-ticks: %.4f (target <= 0.02)\n", worst);
    return 0;
  }
  if (part == "memory") {
    const std::string step = TrainStep("2048");
    std::printf("%-7s %-7s %12s %12s %12s %12s %10s %8s %10s\n", "stages", "micro",
                "gpipe peak", "1f1b peak", "zb-h1 peak", "parameters", "act ratio", "S/M",
                "live mb");
    for (int64_t stages : {2, 4})
      for (int64_t micro : {4, 8, 16}) {
        const StepMemory g = PeakMemory(step, stages, micro, "gpipe");
        const StepMemory f = PeakMemory(step, stages, micro, "1f1b");
        const StepMemory z = PeakMemory(step, stages, micro, "zb-h1");
        const double ratio = static_cast<double>(f.peak - f.parameters) /
                             static_cast<double>(g.peak - g.parameters);
        std::printf("%-7lld %-7lld %10.2fMB %10.2fMB %10.2fMB %10.2fMB %10.3f %8.3f %5lld/%-4lld\n",
                    static_cast<long long>(stages), static_cast<long long>(micro), g.peak / 1e6,
                    f.peak / 1e6, z.peak / 1e6, f.parameters / 1e6, ratio,
                    static_cast<double>(stages) / static_cast<double>(micro),
                    static_cast<long long>(f.live_microbatches),
                    static_cast<long long>(g.live_microbatches));
      }
    return 0;
  }
  const bool compile_table = part != "exec";
  const std::string text = TrainStep();
  if (compile_table) std::printf("%-8s %-8s %-8s %12s\n", "stages", "data", "devices", "compile ms");
  for (int64_t stages : {2, 4, 8}) {
    if (!compile_table) break;
    double first = 0, last = 0;
    for (int64_t data = 1; data * stages <= 8192 && data <= 1024; data *= 4) {
      const double t = CompileSeconds(text, data, stages);
      if (data == 1) first = t;
      last = t;
      std::printf("%-8lld %-8lld %-8lld %12.1f\n", static_cast<long long>(stages),
                  static_cast<long long>(data), static_cast<long long>(data * stages), t * 1e3);
    }
    std::printf("stages=%lld: t(largest) / t(data=1) = %.2f\n", static_cast<long long>(stages),
                last / first);
  }

  const std::string step = TrainStep("2048");
  std::printf("\n%-10s %-8s %10s %10s %10s %10s %8s\n", "schedule", "stages", "cpu skip",
              "cpu all", "wall skip", "wall all", "cpu saved");
  for (const std::string schedule : {"gpipe", "circular", "1f1b", "zb-h1"}) {
    const StepTime skip = RunStep(step, 4, schedule, true);
    const StepTime all = RunStep(step, 4, schedule, false);
    std::printf("%-10s %-8d %8.1fms %8.1fms %8.1fms %8.1fms %7.0f%%\n", schedule.c_str(), 4,
                skip.cpu * 1e3, all.cpu * 1e3, skip.wall * 1e3, all.wall * 1e3,
                100.0 * (1.0 - skip.cpu / all.cpu));
  }
  return 0;
}
