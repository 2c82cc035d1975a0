// Single-device forward of ../shared/models/onnx/transformer_encoder.onnx:
// meshsplit (ONNX import + reference interpreter) against onnxruntime (CPU,
// the npm package onnxruntime-node driven by tools/ort/bench_ort.js), same
// model, same input, same number of runs, in this one invocation. Prints both
// times and the ratio. Needs `cd tools/ort && npm install --ignore-scripts`
// (or NODE_PATH pointing at a node_modules with onnxruntime-node).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "import/load.h"
#include "runtime/npy.h"
#include "runtime/run_module.h"

using namespace meshsplit;

int main(int argc, char** argv) {
  const std::string dir = std::string(MESHSPLIT_SHARED_DIR) + "/models/onnx/";
  const std::string model = dir + "transformer_encoder.onnx";
  int runs = argc > 1 ? std::atoi(argv[1]) : 5;
  if (!HaveOnnxImporter() || !std::filesystem::exists(model)) {
    std::printf("SKIP: %s\n", HaveOnnxImporter() ? (model + " is absent").c_str()
                                                 : "built without the ONNX importer");
    return 0;
  }
  auto module = LoadModule(model);
  auto input = ReadNpy(dir + "transformer_encoder.input.npy");
  auto expected = ReadNpy(dir + "transformer_encoder.output.npy");
  if (!module.ok() || !input.ok() || !expected.ok()) {
    std::fprintf(stderr, "error: cannot load the model or its data\n");
    return 1;
  }
  auto run_once = [&]() {
    std::vector<Literal> args;
    args.push_back(*input);
    return RunEntry(**module, std::move(args));
  };
  auto warm = run_once();  // warm-up, and the accuracy check
  if (!warm.ok()) {
    std::fprintf(stderr, "%s\n", warm.status().message().c_str());
    return 1;
  }
  const Literal& out = *OutputArrays(*warm)[0];
  double max_diff = 0;
  for (int64_t i = 0; i < out.element_count(); ++i)
    max_diff = std::max(max_diff, std::fabs(out.GetDouble(i) - expected->GetDouble(i)));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) {
    if (!run_once().ok()) return 1;
  }
  double ours_ms = std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - t0).count() / runs;
  std::printf("meshsplit_ms_per_run=%.3f max_abs_diff=%.3g (%d runs)\n", ours_ms, max_diff, runs);

  // MESHSPLIT_SHARED_DIR is "<source>/../shared".
  std::string source = std::filesystem::path(MESHSPLIT_SHARED_DIR).parent_path().parent_path();
  std::string cmd = "node " + source + "/tools/ort/bench_ort.js " +
                    model + " " + dir + "transformer_encoder.input.npy " +
                    std::to_string(runs) + " " + dir + "transformer_encoder.output.npy 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  double ort_ms = -1;
  char line[512];
  while (p && std::fgets(line, sizeof line, p)) {
    std::fputs(line, stdout);
    std::sscanf(line, "ort_ms_per_run=%lf", &ort_ms);
  }
  if (p) pclose(p);
  if (ort_ms <= 0) {
    std::printf("SKIP ratio: onnxruntime-node not available (cd tools/ort && npm install "
                "--ignore-scripts)\n");
    return 0;
  }
  std::printf("ratio meshsplit/onnxruntime = %.2fx\n", ours_ms / ort_ms);
  return 0;
}
