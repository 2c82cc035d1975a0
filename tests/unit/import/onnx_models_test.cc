// The ONNX importer on the real models under ../shared/models/onnx: each
// imports, passes the verifier and, run on one device, matches the PyTorch
// reference outputs within 1e-4 relative; the GPT-2 training step also
// partitioned with the sharding specs in examples/gpt2/. Skips when
// ../shared is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "../shared_data.h"
#include "import/load.h"
#include "ir/verifier.h"
#include "runtime/npy.h"
#include "runtime/run_module.h"
#include "import/shard_spec.h"
#include "verify/run_spmd.h"

namespace meshsplit {
namespace {

const std::string kDir = std::string(MESHSPLIT_SHARED_DIR) + "/models/onnx";

#define SKIP_WITHOUT_MODELS()                                                   \
  if (!HaveOnnxImporter()) GTEST_SKIP() << "built without the ONNX importer";  \
  MESHSPLIT_SKIP_WITHOUT_SHARED("models/onnx")

// max|x - y| / max|y|.
double RelError(const Literal& x, const Literal& y) {
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < y.element_count(); ++i) {
    diff = std::max(diff, std::fabs(x.GetDouble(i) - y.GetDouble(i)));
    scale = std::max(scale, std::fabs(y.GetDouble(i)));
  }
  return diff / scale;
}

std::unique_ptr<Module> Import(const std::string& file) {
  auto module = LoadModule(kDir + "/" + file);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return nullptr;
  Status verified = VerifyModule(**module);
  EXPECT_TRUE(verified.ok()) << verified.message();
  return std::move(*module);
}

void CheckInference(const std::string& name) {
  auto module = Import(name + ".onnx");
  ASSERT_NE(module, nullptr);
  auto input = ReadNpy(kDir + "/" + name + ".input.npy");
  auto expected = ReadNpy(kDir + "/" + name + ".output.npy");
  ASSERT_TRUE(input.ok() && expected.ok());
  std::vector<Literal> args;
  args.push_back(std::move(*input));
  auto result = RunEntry(*module, std::move(args));
  ASSERT_TRUE(result.ok()) << result.status().message();
  auto outs = OutputArrays(*result);
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_EQ(outs[0]->shape().dimensions(), expected->shape().dimensions());
  EXPECT_LT(RelError(*outs[0], *expected), 1e-4);
}

TEST(OnnxModels, Mlp3) {
  SKIP_WITHOUT_MODELS();
  CheckInference("mlp3");
}

TEST(OnnxModels, TransformerEncoder) {
  SKIP_WITHOUT_MODELS();
  CheckInference("transformer_encoder");
}

// Runs the GPT-2 training step (on one device, or partitioned by the sharding
// spec `spec` from examples/gpt2/) and compares the loss, every updated
// parameter and every update (new - old) with the PyTorch reference.
void CheckGpt2(const std::string& spec) {
  auto module = Import("gpt2_train_step.onnx");
  ASSERT_NE(module, nullptr);
  const std::string ref = kDir + "/gpt2_train_step.ref/";
  std::ifstream manifest(ref + "MANIFEST.txt");
  ASSERT_TRUE(manifest.good());
  std::vector<Literal> inputs;
  std::map<std::string, int> input_index;
  std::vector<std::pair<std::string, std::string>> outputs;  // name, file
  std::string kind, name, file;
  int index;
  while (manifest >> kind >> index >> name >> file) {
    if (kind == "input") {
      auto lit = ReadNpy(ref + file);
      ASSERT_TRUE(lit.ok()) << lit.status().message();
      ASSERT_EQ(index, static_cast<int>(inputs.size()));
      input_index[name] = index;
      inputs.push_back(std::move(*lit));
    } else {
      outputs.emplace_back(name, file);
    }
  }
  ASSERT_EQ(inputs.size(), 54u);
  ASSERT_EQ(outputs.size(), 53u);
  ASSERT_EQ(module->entry()->parameter_count(), 54);
  std::vector<Literal> originals;
  for (const auto& in : inputs) {
    Literal copy(in.shape());
    std::memcpy(copy.raw(), in.raw(), in.size_bytes());
    originals.push_back(std::move(copy));
  }
  StatusOr<Literal> result = Status::Error("not run");
  if (spec.empty()) {
    result = RunEntry(*module, std::move(inputs));
  } else {
    StatusOr<Mesh> applied =
        ApplyShardSpec(*module, std::string(MESHSPLIT_SOURCE_DIR) + "/examples/gpt2/" + spec);
    ASSERT_TRUE(applied.ok()) << applied.status().message();
    ASSERT_GT(module->num_partitions(), 1);
    SpmdRunRequest request;
    request.num_partitions = module->num_partitions();
    result = RunModuleOnDevices(*module, std::move(inputs), request);
  }
  ASSERT_TRUE(result.ok()) << result.status().message();
  auto outs = OutputArrays(*result);
  ASSERT_EQ(outs.size(), outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto expected = ReadNpy(ref + outputs[i].second);
    ASSERT_TRUE(expected.ok());
    ASSERT_EQ(outs[i]->shape().dimensions(), expected->shape().dimensions()) << outputs[i].first;
    EXPECT_LT(RelError(*outs[i], *expected), 1e-4) << outputs[i].first;
    // The SGD step is small next to the weights, so also compare the update
    // itself (new - old): this is what catches a wrong gradient.
    if (i == 0) continue;
    std::string param = outputs[i].first.substr(4);  // "new.<name>"
    ASSERT_TRUE(input_index.count(param)) << param;
    const Literal& old = originals[input_index[param]];
    Literal mine(old.shape()), theirs(old.shape());
    for (int64_t k = 0; k < old.element_count(); ++k) {
      mine.SetDouble(k, outs[i]->GetDouble(k) - old.GetDouble(k));
      theirs.SetDouble(k, expected->GetDouble(k) - old.GetDouble(k));
    }
    // The update is read back as the difference of two f32 weights, so it
    // carries their rounding, eps * |w|, whatever the kernels did; GEMM
    // kernels that sum in another order move it by about that much. The
    // bound is 5e-4 of the update or a few ulps of the weights, whichever
    // is larger.
    double max_w = 0, max_dw = 1e-30;
    for (int64_t k = 0; k < old.element_count(); ++k) {
      max_w = std::max(max_w, std::fabs(old.GetDouble(k)));
      max_dw = std::max(max_dw, std::fabs(theirs.GetDouble(k)));
    }
    const double floor = 8 * 5.96e-8 * max_w / max_dw;
    EXPECT_LT(RelError(mine, theirs), std::max(5e-4, floor))
        << "update of " << param << " (rounding floor " << floor << ")";
  }
}

TEST(OnnxModels, Gpt2TrainStep) {
  SKIP_WITHOUT_MODELS();
  CheckGpt2("");
}

TEST(OnnxModels, Gpt2TrainStepDataParallel8) {
  SKIP_WITHOUT_MODELS();
  CheckGpt2("dp8.json");
}

TEST(OnnxModels, Gpt2TrainStepMegatron4) {
  SKIP_WITHOUT_MODELS();
  CheckGpt2("megatron4.json");
}

TEST(OnnxModels, Gpt2TrainStepMesh2x4) {
  SKIP_WITHOUT_MODELS();
  CheckGpt2("dp2_mp4.json");
}

}  // namespace
}  // namespace meshsplit
