// roll-layers checked by execution: the rolled module, run by the
// interpreter on one device, must compute what the unrolled one does on the
// same seeded inputs (forward-only MLP and the GPT-2 training step of
// examples/gpt2); the rolled form is the layer-loop form the pipeline reads.
#include <gtest/gtest.h>

#include <string>

#include "import/load.h"
#include "pipeline/layer_loop.h"
#include "pipeline/roll_layers.h"
#include "runtime/interpreter.h"
#include "verify/verify.h"

namespace meshsplit {
namespace {

const std::string kSource = MESHSPLIT_SOURCE_DIR;

// Rolls the module at `path` and compares it with the original on `seeds`;
// returns the report (layers, loops) for the caller's checks.
RollLayersReport RollAndCompare(const std::string& path, int expected_loops) {
  auto loaded = LoadModule(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  if (!loaded.ok()) return {};
  std::unique_ptr<Module> original = std::move(*loaded);
  std::unique_ptr<Module> rolled = original->Clone();
  auto report = RollLayers(*rolled);
  EXPECT_TRUE(report.ok()) << report.status().message();
  if (!report.ok() || !report->has_value()) {
    ADD_FAILURE() << "nothing rolled in " << path;
    return {};
  }
  std::vector<LayerLoop> loops = FindLayerLoops(*rolled->entry(), nullptr);
  EXPECT_EQ(static_cast<int>(loops.size()), expected_loops);
  if (expected_loops == 2 && loops.size() == 2) {
    EXPECT_FALSE(loops[0].reversed);
    EXPECT_TRUE(loops[1].reversed);
    EXPECT_FALSE(loops[0].outputs.empty());  // the residuals
    EXPECT_FALSE(loops[1].outputs.empty());  // the weight gradients
  }
  CompareOptions compare;
  compare.reduction_length = ReductionLength(*original);
  for (uint64_t seed : {0u, 1u, 2u}) {
    std::vector<Literal> inputs = GenerateInputs(*original->entry(), seed, InputInit::kFanIn);
    auto want = EvaluateModule(*original, inputs);
    auto got = EvaluateModule(*rolled, inputs);
    EXPECT_TRUE(want.ok() && got.ok());
    if (!want.ok() || !got.ok()) continue;
    Comparison c = CompareValues(*want, *got, "out", compare);
    EXPECT_TRUE(c.ok) << path << " seed " << seed << ": " << c.first_mismatch;
  }
  return **report;
}

TEST(RollLayers, ForwardMlpComputesTheSame) {
  RollLayersReport r = RollAndCompare(kSource + "/tests/pipeline/Inputs/unrolled_mlp.hlo", 1);
  EXPECT_EQ(r.layers, 4);
  EXPECT_EQ(r.weights, 2);
  EXPECT_EQ(r.layer_instructions, 5);
  EXPECT_TRUE(r.backward_loop.empty());
}

TEST(RollLayers, Gpt2TrainingStepComputesTheSame) {
  RollLayersReport r = RollAndCompare(kSource + "/examples/gpt2/gpt2_train_step.onnx", 2);
  EXPECT_EQ(r.layers, 2);
  EXPECT_EQ(r.weights, 12);
  EXPECT_FALSE(r.backward_loop.empty());
}

// A module whose layers differ is refused and left as it was.
TEST(RollLayers, DifferingLayersAreRefusedUnchanged) {
  auto loaded = LoadModule(kSource + "/tests/pipeline/Inputs/unrolled_mlp_relu2.hlo");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const int before = (*loaded)->entry()->instruction_count();
  auto report = RollLayers(**loaded);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("layer 2 differs from layer 0"), std::string::npos)
      << report.status().message();
  EXPECT_EQ((*loaded)->entry()->instruction_count(), before);
}

// Weights named without a layer index: nothing to roll.
TEST(RollLayers, NoLayersIsNoChange) {
  auto loaded = LoadModule(kSource + "/examples/mlp.hlo");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  auto report = RollLayers(**loaded);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_FALSE(report->has_value());
}

}  // namespace
}  // namespace meshsplit
