// Batch shrinking of a tuple parameter (a loop body, as the pipeline pass
// rebatches it): fixed elements shrink where `tuple_batch_dims` says, and
// open elements shrink only when propagation finds the batch in their uses
// (a per-example mask read beside the activation), not otherwise.
#include <gtest/gtest.h>

#include "text/parser.h"
#include "transforms/shrink_batch.h"

namespace meshsplit {
namespace {

// h' = h * mask (per example) + bias (per feature): the mask carries the
// batch, the bias does not.
constexpr char kBody[] = R"(
HloModule body
ENTRY layer {
  p = (s32[], f32[8,4], f32[8], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  h = f32[8,4] get-tuple-element(p), index=1
  mask = f32[8] get-tuple-element(p), index=2
  bias = f32[4] get-tuple-element(p), index=3
  mb = f32[8,4] broadcast(mask), dimensions={0}
  bb = f32[8,4] broadcast(bias), dimensions={1}
  hm = f32[8,4] multiply(h, mb)
  h2 = f32[8,4] add(hm, bb)
  ROOT t = (s32[], f32[8,4], f32[8], f32[4]) tuple(i, h2, mask, bias)
}
)";

std::unique_ptr<Module> Parse() {
  StatusOr<std::unique_ptr<Module>> m = ParseModuleText(kBody);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

ShrinkBatchOptions Halve() {
  ShrinkBatchOptions o;
  o.parameters = {"p"};
  o.factor = 2;
  o.tuple_batch_dims = {{1, 0}};
  return o;
}

TEST(ShrinkBatchTuple, OpenElementsTakeTheBatchTheirUsesGiveThem) {
  std::unique_ptr<Module> m = Parse();
  ASSERT_NE(m, nullptr);
  ShrinkBatchOptions o = Halve();
  o.open_tuple_elements = {2, 3};
  StatusOr<ShrinkBatchReport> r = ShrinkBatch(*m, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Computation& c = *m->entry();
  EXPECT_EQ(c.Find("mask")->shape().dimensions(), (std::vector<int64_t>{4}));
  EXPECT_EQ(c.Find("bias")->shape().dimensions(), (std::vector<int64_t>{4}));
  EXPECT_EQ(c.Find("h2")->shape().dimensions(), (std::vector<int64_t>{4, 4}));
  const Shape& p = c.parameter(0)->shape();
  EXPECT_EQ(p.tuple_shapes(1).dimensions(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(p.tuple_shapes(2).dimensions(), (std::vector<int64_t>{4}));
  EXPECT_EQ(p.tuple_shapes(3).dimensions(), (std::vector<int64_t>{4}));
  EXPECT_EQ(c.root()->shape(), p);
}

TEST(ShrinkBatchTuple, AFixedUnbatchedMaskIsRefusedWhereTheBatchMeetsIt) {
  std::unique_ptr<Module> m = Parse();
  ASSERT_NE(m, nullptr);
  StatusOr<ShrinkBatchReport> r = ShrinkBatch(*m, Halve());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("%mb"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace meshsplit
