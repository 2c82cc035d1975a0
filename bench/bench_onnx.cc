// Single-device forward of any ONNX model: meshsplit (ONNX import + the
// interpreter) against onnxruntime (CPU, the npm package onnxruntime-node
// driven by tools/ort/bench_ort.js), same model, same inputs, same number of
// runs, in this one invocation. Prints both times (mean and best run), the
// ratios, and the largest difference between the two first outputs.
//
// Usage: bench_onnx [MODEL.onnx INPUT.npy... [RUNS]]
// With no model, the transformer encoder of ../shared/models/onnx. The
// inputs feed the entry parameters in order. Needs
// `cd tools/ort && npm install --ignore-scripts` (or NODE_PATH pointing at a
// node_modules with onnxruntime-node) for the reference.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "import/load.h"
#include "runtime/npy.h"
#include "runtime/run_module.h"

using namespace meshsplit;

namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

struct Timing {
  double mean_ms = -1, best_ms = -1;
};

// Runs onnxruntime through node; its first output goes to `output`.
Timing RunOnnxRuntime(const std::string& model, const std::vector<std::string>& inputs, int runs,
                      const std::string& output) {
  // MESHSPLIT_SHARED_DIR is "<source>/../shared".
  std::string source = std::filesystem::path(MESHSPLIT_SHARED_DIR).parent_path().parent_path();
  std::string cmd = "node " + source + "/tools/ort/bench_ort.js '" + model + "' " +
                    std::to_string(runs) + " '" + output + "'";
  for (const std::string& in : inputs) cmd += " '" + in + "'";
  cmd += " 2>&1";
  Timing t;
  FILE* p = popen(cmd.c_str(), "r");
  char line[512];
  while (p && std::fgets(line, sizeof line, p)) {
    std::fputs(line, stdout);
    std::sscanf(line, "ort_ms_per_run=%lf", &t.mean_ms);
    std::sscanf(line, "ort_best_ms=%lf", &t.best_ms);
  }
  if (p) pclose(p);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  std::vector<std::string> inputs;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (EndsWith(a, ".onnx") && model.empty()) {
      model = a;
    } else if (EndsWith(a, ".npy")) {
      inputs.push_back(a);
    } else if (std::atoi(a.c_str()) > 0) {
      runs = std::atoi(a.c_str());
    } else {
      std::fprintf(stderr, "usage: bench_onnx [MODEL.onnx INPUT.npy... [RUNS]]\n");
      return 2;
    }
  }
  if (model.empty()) {
    const std::string dir = std::string(MESHSPLIT_SHARED_DIR) + "/models/onnx/";
    model = dir + "transformer_encoder.onnx";
    inputs = {dir + "transformer_encoder.input.npy"};
  }
  if (!HaveOnnxImporter() || !std::filesystem::exists(model)) {
    std::printf("SKIP: %s\n", HaveOnnxImporter() ? (model + " is absent").c_str()
                                                 : "built without the ONNX importer");
    return 0;
  }
  auto module = LoadModule(model);
  if (!module.ok()) {
    std::fprintf(stderr, "error: %s: %s\n", model.c_str(), module.status().ToString().c_str());
    return 1;
  }
  std::vector<Literal> args;
  for (const std::string& in : inputs) {
    auto lit = ReadNpy(in);
    if (!lit.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", in.c_str(), lit.status().ToString().c_str());
      return 1;
    }
    args.push_back(std::move(lit).value());
  }
  auto run_once = [&]() { return RunEntry(**module, args); };
  auto warm = run_once();  // warm-up, and the result compared below
  if (!warm.ok()) {
    std::fprintf(stderr, "%s\n", warm.status().ToString().c_str());
    return 1;
  }
  double total_ms = 0, best_ms = 1e300;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!run_once().ok()) return 1;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
    total_ms += ms;
    best_ms = std::min(best_ms, ms);
  }
  const double ours_ms = total_ms / runs;
  std::printf("meshsplit_ms_per_run=%.3f meshsplit_best_ms=%.3f (%d runs)\n", ours_ms, best_ms,
              runs);

  const std::string ort_out =
      (std::filesystem::temp_directory_path() / ("bench_onnx_ort_" + std::to_string(getpid()) +
                                                 ".npy")).string();
  Timing ort = RunOnnxRuntime(model, inputs, runs, ort_out);
  if (ort.mean_ms <= 0) {
    std::printf("SKIP ratio: onnxruntime-node not available (cd tools/ort && npm install "
                "--ignore-scripts)\n");
    return 0;
  }
  auto expected = ReadNpy(ort_out);
  std::filesystem::remove(ort_out);
  const Literal& out = *OutputArrays(*warm)[0];
  if (!expected.ok() || expected->element_count() != out.element_count()) {
    std::printf("first output: onnxruntime's %s does not match ours %s\n",
                expected.ok() ? expected->shape().ToString(false).c_str() : "(unreadable)",
                out.shape().ToString(false).c_str());
  } else {
    double max_diff = 0;
    for (int64_t i = 0; i < out.element_count(); ++i)
      max_diff = std::max(max_diff, std::fabs(out.GetDouble(i) - expected->GetDouble(i)));
    std::printf("max_abs_diff vs onnxruntime (first output, %s) = %.3g\n",
                out.shape().ToString(false).c_str(), max_diff);
  }
  std::printf("ratio meshsplit/onnxruntime = %.2fx mean, %.2fx best\n", ours_ms / ort.mean_ms,
              best_ms / ort.best_ms);
  return 0;
}
