// Compile time of a pipelined training step against the device count. The
// scanned residual MLP training step of tests/pipeline (8 layers, batch
// 8192, width 64; forward scan, loss, reverse backward scan) is pipelined
// over `stage` ∈ {2, 4, 8} stages with 8 microbatches and a data axis of 1
// to 1024 devices, and compiled (propagate, pipeline, propagate, partition).
// The reported ratio t(largest data) / t(data = 1) per stage count is the
// number to watch: GSPMD-style pipelining should keep compile time flat in
// the number of devices (target <= 1.1).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_clock.h"
#include "compiler/compile.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// The test's training step at bench shapes.
std::string TrainStep() {
  std::ifstream in(MESHSPLIT_SOURCE_DIR "/tests/pipeline/Inputs/scan_mlp_train.hlo");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  const std::vector<std::pair<std::string, std::string>> sizes = {
      {"[4,8,16]", "[8,8192,64]"}, {"[1,8,16]", "[1,8192,64]"}, {"{1,8,16}", "{1,8192,64}"},
      {"[4,16,16]", "[8,64,64]"},  {"[1,16,16]", "[1,64,64]"},  {"{1,16,16}", "{1,64,64}"},
      {"[8,16]", "[8192,64]"},     {"[16,16]", "[64,64]"},      {"[4,16]", "[8,64]"},
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

}  // namespace
}  // namespace meshsplit

int main() {
  using namespace meshsplit;
  const std::string text = TrainStep();
  std::printf("%-8s %-8s %-8s %12s\n", "stages", "data", "devices", "compile ms");
  for (int64_t stages : {2, 4, 8}) {
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
  return 0;
}
