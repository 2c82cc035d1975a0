// The dot kernels (real, complex, ragged; block-scaled goes through the real
// one) share one check of dimension numbers against operand shapes
// (CheckDotDimensions in runtime/kernels.h): bad dimension numbers give the
// same error from each of them, and never reach the loops.
#include <gtest/gtest.h>

#include <string>

#include "runtime_test_util.h"

namespace meshsplit::rttest {
namespace {

// The error of running `root` (an instruction over parameters a, b[, c])
// on zeros, or "ok".
std::string ErrorOf(const std::string& params, const std::string& root) {
  const std::string hlo = "HloModule m\nENTRY e {\n" + params + "  ROOT d = " + root + "\n}\n";
  auto module = ParseModuleText(hlo);
  if (!module.ok()) return "parse: " + module.status().message();
  std::vector<Literal> args;
  for (const auto& p : (*module)->entry()->parameters()) args.emplace_back(p->shape());
  auto r = EvaluateModule(**module, std::move(args));
  return r.ok() ? "ok" : r.status().message();
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

constexpr char kReal[] = "  a = f32[2,3] parameter(0)\n  b = f32[3,4] parameter(1)\n";
constexpr char kComplex[] = "  a = c64[2,3] parameter(0)\n  b = c64[3,4] parameter(1)\n";

TEST(DotDims, GoodDimensionNumbersRun) {
  EXPECT_EQ(ErrorOf(kReal, "f32[2,4] dot(a, b), lhs_contracting_dims={1}, "
                           "rhs_contracting_dims={0}"),
            "ok");
  EXPECT_EQ(ErrorOf(kComplex, "c64[2,4] dot(a, b), lhs_contracting_dims={1}, "
                              "rhs_contracting_dims={0}"),
            "ok");
}

TEST(DotDims, DimensionListedTwice) {
  for (const char* t : {"f32", "c64"}) {
    const std::string params = t == std::string("f32") ? kReal : kComplex;
    std::string e = ErrorOf(params, std::string(t) +
                                        "[2,4] dot(a, b), lhs_contracting_dims={1,1}, "
                                        "rhs_contracting_dims={0,0}");
    EXPECT_TRUE(Has(e, "dot contracting dimensions {1,1} / {0,0} do not match")) << t << ": " << e;
  }
}

TEST(DotDims, ContractingSizesDiffer) {
  for (const char* t : {"f32", "c64"}) {
    const std::string params = std::string("  a = ") + t + "[2,3] parameter(0)\n  b = " + t +
                               "[4,4] parameter(1)\n";
    std::string e = ErrorOf(params, std::string(t) +
                                        "[2,4] dot(a, b), lhs_contracting_dims={1}, "
                                        "rhs_contracting_dims={0}");
    EXPECT_TRUE(Has(e, "dot contracting dimensions {1} / {0} do not match (" + std::string(t) +
                           "[2,3] x " + t + "[4,4])"))
        << t << ": " << e;
  }
}

TEST(DotDims, CountsDifferAndOutOfRange) {
  EXPECT_TRUE(Has(ErrorOf(kComplex, "c64[2,4] dot(a, b), lhs_contracting_dims={1}, "
                                    "rhs_contracting_dims={0}, lhs_batch_dims={0}"),
                  "dot batch/contracting dimension counts differ between lhs and rhs"));
  EXPECT_TRUE(Has(ErrorOf(kReal, "f32[2,4] dot(a, b), lhs_contracting_dims={5}, "
                                 "rhs_contracting_dims={0}"),
                  "dot contracting dimensions {5} / {0} do not match"));
}

TEST(DotDims, WrongResultShape) {
  EXPECT_TRUE(Has(ErrorOf(kReal, "f32[2,5] dot(a, b), lhs_contracting_dims={1}, "
                                 "rhs_contracting_dims={0}"),
                  "dot result should have dimensions {2,4}, not f32[2,5]"));
  EXPECT_TRUE(Has(ErrorOf(kComplex, "c64[2,5] dot(a, b), lhs_contracting_dims={1}, "
                                    "rhs_contracting_dims={0}"),
                  "dot result should have dimensions {2,4}, not c64[2,5]"));
}

constexpr char kRagged[] =
    "  a = f32[3,4,6] parameter(0)\n  b = f32[2,6,8] parameter(1)\n  c = s32[3,1] "
    "parameter(2)\n";

// ragged-dot is checked before it runs by the verifier's rule
// (InferRaggedDotShape, which starts from the dot's), so its errors are the
// shape-inference ones.
TEST(DotDims, RaggedDotIsCheckedAsADot) {
  // Batch dims of different sizes (3 and 2).
  std::string e = ErrorOf(kRagged,
                          "f32[3,4,8] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={0}, "
                          "lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={1}");
  EXPECT_TRUE(Has(e, "lhs batch dimension 0 has size 3 but rhs batch dimension 0 has size 2"))
      << e;
  // A contracting dim listed twice.
  e = ErrorOf("  a = f32[4,6] parameter(0)\n  b = f32[2,6,8] parameter(1)\n  c = s32[2] "
              "parameter(2)\n",
              "f32[4,8] ragged-dot(a, b, c), lhs_contracting_dims={1,1}, "
              "rhs_contracting_dims={1,1}, lhs_ragged_dims={0}, rhs_group_dims={0}");
  EXPECT_TRUE(Has(e, "lhs_contracting_dims [1,1] repeats dimension 1")) << e;
  // The rhs group dim must be a dim a dot would leave free.
  e = ErrorOf("  a = f32[4,6] parameter(0)\n  b = f32[2,6,8] parameter(1)\n  c = s32[2] "
              "parameter(2)\n",
              "f32[4,8] ragged-dot(a, b, c), lhs_contracting_dims={1}, "
              "rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={1}");
  EXPECT_TRUE(Has(e, "rhs_group_dims 1 is not a free dimension of rhs f32[2,6,8]")) << e;
  // Nor a batch dim (found by fuzz_partition: the partitioner sliced the
  // group sizes past their end).
  e = ErrorOf("  a = f32[3,4,6] parameter(0)\n  b = f32[2,3,6,8] parameter(1)\n  c = s32[3,2] "
              "parameter(2)\n",
              "f32[3,4,8] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={1}, "
              "lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, "
              "rhs_group_dims={1}");
  EXPECT_TRUE(Has(e, "rhs_group_dims 1 is not a free dimension of rhs f32[2,3,6,8]")) << e;
  // The same module with the group dim 0 runs.
  EXPECT_EQ(ErrorOf("  a = f32[4,6] parameter(0)\n  b = f32[2,6,8] parameter(1)\n  c = s32[2] "
                    "parameter(2)\n",
                    "f32[4,8] ragged-dot(a, b, c), lhs_contracting_dims={1}, "
                    "rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}"),
            "ok");
}

}  // namespace
}  // namespace meshsplit::rttest
