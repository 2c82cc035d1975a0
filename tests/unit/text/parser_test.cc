// Unit tests of the HLO text parser: module and computation forms, shapes,
// constants, every typed attribute, verbatim extras, name resolution and
// XLA-style renaming.
#include <gtest/gtest.h>

#include <cmath>

#include "support/float16.h"
#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit {
namespace {

std::unique_ptr<Module> Parse(const std::string& text) {
  auto m = ParseModuleText(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  return std::move(m).value();
}

// Parses a one-computation module and returns its instruction `name`.
const Instruction* Find(const Module& m, const std::string& name) {
  for (const auto& c : m.computations())
    if (Instruction* i = c->Find(name)) return i;
  return nullptr;
}

TEST(ParserTest, HeaderKeepsUnknownAttributesAndInterpretsCounts) {
  auto m = Parse(
      "HloModule m, is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, "
      "num_partitions=8, replica_count=2\n"
      "ENTRY e { ROOT p = f32[2] parameter(0) }\n");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->name(), "m");
  EXPECT_EQ(m->num_partitions(), 8);
  EXPECT_EQ(m->replica_count(), 2);
  ASSERT_EQ(m->header_attrs().size(), 2u);
  EXPECT_EQ(m->header_attrs()[0].first, "is_scheduled");
  EXPECT_EQ(m->header_attrs()[0].second, "true");
  EXPECT_EQ(m->header_attrs()[1].first, "entry_computation_layout");
  EXPECT_EQ(m->header_attrs()[1].second, "{(f32[2]{0})->f32[2]{0}}");
  std::string printed = PrintModule(*m);
  EXPECT_EQ(printed.substr(0, printed.find('\n')),
            "HloModule m, is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, "
            "replica_count=2, num_partitions=8");
}

TEST(ParserTest, ComputationHeaderForms) {
  auto m = Parse(R"(HloModule m
%add.1 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %x, f32[] %y)
}
helper {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}, execution_thread="host"
ENTRY %main.3 (p: f32[4]) -> f32[] {
  %p = f32[4]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add.1
}
)");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->computations().size(), 3u);
  EXPECT_EQ(m->entry()->name(), "main.3");
  EXPECT_EQ(m->computations()[1]->execution_thread(), "host");
  const Instruction* r = m->entry()->root();
  EXPECT_EQ(r->name(), "r");
  ASSERT_EQ(r->called_computations().size(), 1u);
  EXPECT_EQ(r->to_apply()->name(), "add.1");
  EXPECT_EQ(r->attrs().dimensions, std::vector<int64_t>{0});
}

TEST(ParserTest, LastComputationIsEntryWithoutMarkerAndLastInstructionIsRoot) {
  auto m = Parse("HloModule m\nc1 { a = f32[] parameter(0) }\nc2 { b = s32[] parameter(0)\n c = s32[] negate(b) }\n");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->entry()->name(), "c2");
  EXPECT_EQ(m->entry()->root()->name(), "c");
}

TEST(ParserTest, ByteOrderMarkAndCrLfLineEndings) {
  auto m = Parse("\xEF\xBB\xBFHloModule m\r\nENTRY e {\r\n  ROOT p = f32[2] parameter(0)\r\n}\r\n");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->entry()->root()->loc().line, 3);
}

TEST(ParserTest, ModuleWithoutHeaderGetsDefaultName) {
  auto m = Parse("ENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->name(), "module");
}

TEST(ParserTest, CommentsAnywhere) {
  auto m = Parse(R"(// leading comment line
// another: with = signs and (parens
HloModule m /* block */, num_partitions=2 // trailing

ENTRY e { // body
  p0 = f32[2] parameter(0) /* after */
  p1 = f32[2] /*mid*/ parameter(1)
  ROOT t = (f32[2], f32[2]) tuple(p0, /*index=1*/p1)
}
)");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->num_partitions(), 2);
  EXPECT_EQ(m->entry()->root()->operand_count(), 2);
}

TEST(ParserTest, ShapesTupleLayoutTilingAndDynamicDims) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  a = f32[8,128]{1,0:T(8,128)} parameter(0)
  b = (f32[2]{0}, (s32[], pred[3])) parameter(1)
  c = f32[<=10,4]{1,0} parameter(2)
  d = bf16[] parameter(3)
  ROOT t = token[] after-all()
}
)");
  ASSERT_NE(m, nullptr);
  const Instruction* a = Find(*m, "a");
  EXPECT_EQ(a->shape().dimensions(), (std::vector<int64_t>{8, 128}));
  ASSERT_TRUE(a->shape().layout().has_value());
  EXPECT_EQ(*a->shape().layout(), "1,0:T(8,128)");
  const Instruction* b = Find(*m, "b");
  ASSERT_TRUE(b->shape().IsTuple());
  EXPECT_EQ(b->shape().ToString(), "(f32[2]{0}, (s32[], pred[3]))");
  const Instruction* c = Find(*m, "c");
  ASSERT_EQ(c->shape().dynamic_dimensions().size(), 2u);
  EXPECT_TRUE(c->shape().dynamic_dimensions()[0]);
  EXPECT_FALSE(c->shape().dynamic_dimensions()[1]);
  EXPECT_EQ(c->shape().ToString(), "f32[<=10,4]{1,0}");
  EXPECT_TRUE(Find(*m, "t")->shape().IsToken());
}

TEST(ParserTest, ScalarConstantsOfEachType) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  t = pred[] constant(true)
  f = pred[] constant(false)
  i8 = s8[] constant(-128)
  v8 = u8[] constant(255)
  i64 = s64[] constant(-9223372036854775808)
  v64 = u64[] constant(18446744073709551615)
  f1 = f32[] constant(1e-05)
  f2 = f32[] constant(-2.38197633e+38)
  f3 = f32[] constant(nan)
  f4 = f32[] constant(-inf)
  f5 = f32[] constant(inf)
  f6 = f32[] constant(0x1p-3)
  d = f64[] constant(0.1)
  h = f16[] constant(0.5)
  b = bf16[] constant(3)
  q4 = s4[] constant(-8)
  e = f8e4m3fn[] constant(1.5)
  ROOT c = c64[] constant((1.5, -2))
}
)");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(Find(*m, "t")->literal().GetInt(0), 1);
  EXPECT_EQ(Find(*m, "f")->literal().GetInt(0), 0);
  EXPECT_EQ(Find(*m, "i8")->literal().GetInt(0), -128);
  EXPECT_EQ(Find(*m, "v8")->literal().GetInt(0), 255);
  EXPECT_EQ(Find(*m, "i64")->literal().GetInt(0), INT64_MIN);
  EXPECT_EQ(Find(*m, "v64")->literal().GetUint(0), UINT64_MAX);
  EXPECT_EQ(Find(*m, "f1")->literal().data<float>()[0], 1e-05f);
  EXPECT_EQ(Find(*m, "f2")->literal().data<float>()[0], -2.38197633e+38f);
  EXPECT_TRUE(std::isnan(Find(*m, "f3")->literal().GetDouble(0)));
  EXPECT_EQ(Find(*m, "f4")->literal().GetDouble(0), -INFINITY);
  EXPECT_EQ(Find(*m, "f5")->literal().GetDouble(0), INFINITY);
  EXPECT_EQ(Find(*m, "f6")->literal().GetDouble(0), 0.125);
  EXPECT_EQ(Find(*m, "d")->literal().data<double>()[0], 0.1);
  EXPECT_EQ(Find(*m, "h")->literal().GetDouble(0), 0.5);
  EXPECT_EQ(Find(*m, "b")->literal().GetDouble(0), 3.0);
  EXPECT_EQ(Find(*m, "q4")->literal().data<int8_t>()[0], -8);
  EXPECT_EQ(Find(*m, "e")->literal().data<uint8_t>()[0], 0x3c);  // 1.5 in e4m3fn
  const Literal& c = Find(*m, "c")->literal();
  EXPECT_EQ(c.data<float>()[0], 1.5f);
  EXPECT_EQ(c.data<float>()[1], -2.0f);
  std::string printed = PrintModule(*m);
  EXPECT_NE(printed.find("%f1 = f32[] constant(1e-05)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("constant(-inf)"), std::string::npos);
  EXPECT_NE(printed.find("%f6 = f32[] constant(0.125)"), std::string::npos);
  EXPECT_NE(printed.find("%q4 = s4[] constant(-8)"), std::string::npos);
  EXPECT_NE(printed.find("%e = f8e4m3fn[] constant(1.5)"), std::string::npos);
  EXPECT_NE(printed.find("%c = c64[] constant((1.5, -2))"), std::string::npos);
  EXPECT_NE(printed.find("%v64 = u64[] constant(18446744073709551615)"), std::string::npos);
}

TEST(ParserTest, ArrayTupleAndSplatConstants) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  a = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })
  z = f32[0,2] constant({})
  t = (f32[], s32[2]) constant((1.5, {7, 8}))
  s = f32[100,100] constant(2)
  ROOT r = pred[2] constant({true, false})
}
)");
  ASSERT_NE(m, nullptr);
  const Literal& a = Find(*m, "a")->literal();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a.GetInt(i), i + 1);
  const Literal& t = Find(*m, "t")->literal();
  ASSERT_EQ(t.elements().size(), 2u);
  EXPECT_EQ(t.elements()[0].GetDouble(0), 1.5);
  EXPECT_EQ(t.elements()[1].GetInt(1), 8);
  const Literal& s = Find(*m, "s")->literal();
  EXPECT_EQ(s.element_count(), 10000);
  EXPECT_EQ(s.GetDouble(9999), 2.0);
  std::string printed = PrintModule(*m);
  EXPECT_NE(printed.find("constant({{1, 2, 3}, {4, 5, 6}})"), std::string::npos) << printed;
  EXPECT_NE(printed.find("%t = (f32[], s32[2]) constant((1.5, {7, 8}))"), std::string::npos);
  // A large one-value array prints as a broadcast of its scalar, which XLA
  // reads (a one-value array literal it does not); it reads back as the same
  // values.
  EXPECT_NE(printed.find("%s.scalar = f32[] constant(2)\n  %s = f32[100,100] broadcast(%s.scalar), "
                         "dimensions={}"),
            std::string::npos)
      << printed;
  auto again = Parse(printed);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(Find(*again, "s")->opcode(), Opcode::kBroadcast);
  EXPECT_EQ(PrintModule(*again), printed);
}

TEST(ParserTest, ControlPredecessors) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] negate(a)
  c = f32[] abs(a), control-predecessors={b}
  ROOT d = f32[] add(b, c), control-predecessors={%a, b}
}
)");
  ASSERT_NE(m, nullptr);
  const Instruction* d = Find(*m, "d");
  ASSERT_EQ(d->control_predecessors().size(), 2u);
  EXPECT_EQ(d->control_predecessors()[0]->name(), "a");
  EXPECT_NE(PrintModule(*m).find("control-predecessors={%a, %b}"), std::string::npos);
}

TEST(ParserTest, DataMovementAttributes) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  p = f32[8,6] parameter(0)
  i = s32[] parameter(1)
  z = f32[] constant(0)
  b = f32[4,8,6] broadcast(p), dimensions={1,2}
  t = f32[6,8] transpose(p), dimensions={1,0}
  s = f32[4,2] slice(p), slice={[0:8:2], [1:3]}
  ds = f32[2,6] dynamic-slice(p, i, i), dynamic_slice_sizes={2,6}
  pd = f32[11,14] pad(p, z), padding=1_2x0_0_1
  io = s32[5,3] iota(), iota_dimension=1
  rp = f32[8,6] reduce-precision(p), exponent_bits=5, mantissa_bits=10
  tu = (f32[], s32[]) tuple(z, i)
  ROOT g = s32[] get-tuple-element(tu), index=1
}
)");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(Find(*m, "b")->attrs().dimensions, (std::vector<int64_t>{1, 2}));
  const auto& slice = Find(*m, "s")->attrs().slice;
  ASSERT_EQ(slice.size(), 2u);
  EXPECT_EQ(slice[0].start, 0);
  EXPECT_EQ(slice[0].limit, 8);
  EXPECT_EQ(slice[0].stride, 2);
  EXPECT_EQ(slice[1].stride, 1);
  EXPECT_EQ(Find(*m, "ds")->attrs().dynamic_slice_sizes, (std::vector<int64_t>{2, 6}));
  const auto& pad = Find(*m, "pd")->attrs().padding;
  ASSERT_EQ(pad.size(), 2u);
  EXPECT_EQ(pad[0].low, 1);
  EXPECT_EQ(pad[0].high, 2);
  EXPECT_EQ(pad[1].interior, 1);
  EXPECT_EQ(Find(*m, "io")->attrs().iota_dimension, 1);
  EXPECT_EQ(Find(*m, "rp")->attrs().exponent_bits, 5);
  EXPECT_EQ(Find(*m, "rp")->attrs().mantissa_bits, 10);
  EXPECT_EQ(Find(*m, "g")->attrs().tuple_index, 1);
  EXPECT_EQ(Find(*m, "i")->attrs().parameter_number, 1);
  std::string printed = PrintModule(*m);
  EXPECT_NE(printed.find("slice={[0:8:2], [1:3]}"), std::string::npos) << printed;
  EXPECT_NE(printed.find("padding=1_2_0x0_0_1"), std::string::npos) << printed;
}

TEST(ParserTest, ConvolutionWindowAndDimLabels) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  in = f32[1,9,9,4] parameter(0)
  k = f32[3,3,2,8] parameter(1)
  ROOT c = f32[1,5,5,8] convolution(in, k), window={size=3x3 stride=2x2 pad=1_1x-1_2 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, feature_group_count=2, batch_group_count=1, operand_precision={high,default}
}
)");
  ASSERT_NE(m, nullptr);
  const Attributes& a = m->entry()->root()->attrs();
  ASSERT_TRUE(a.window.has_value());
  ASSERT_EQ(a.window->size(), 2u);
  const WindowDimension& w1 = (*a.window)[1];
  EXPECT_EQ(w1.size, 3);
  EXPECT_EQ(w1.stride, 2);
  EXPECT_EQ(w1.padding_low, -1);
  EXPECT_EQ(w1.padding_high, 2);
  EXPECT_EQ(w1.base_dilation, 2);
  EXPECT_EQ(w1.window_dilation, 1);
  EXPECT_TRUE(w1.window_reversal);
  EXPECT_FALSE((*a.window)[0].window_reversal);
  ASSERT_TRUE(a.conv_dnums.has_value());
  EXPECT_EQ(a.conv_dnums->input_batch_dimension, 0);
  EXPECT_EQ(a.conv_dnums->input_feature_dimension, 3);
  EXPECT_EQ(a.conv_dnums->input_spatial_dimensions, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.conv_dnums->kernel_input_feature_dimension, 2);
  EXPECT_EQ(a.conv_dnums->kernel_output_feature_dimension, 3);
  EXPECT_EQ(a.conv_dnums->kernel_spatial_dimensions, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(a.feature_group_count, 2);
  ASSERT_NE(a.FindExtra("operand_precision"), nullptr);
  EXPECT_EQ(*a.FindExtra("operand_precision"), "{high,default}");
  EXPECT_NE(PrintModule(*m).find(
                "window={size=3x3 stride=2x2 pad=1_1x-1_2 lhs_dilate=1x2 rhs_dilate=2x1 "
                "rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, feature_group_count=2, "
                "operand_precision={high,default}"),
            std::string::npos)
      << PrintModule(*m);

  auto m2 = Parse(R"(HloModule m
ENTRY e {
  in = f32[2,4,9,9] parameter(0)
  k = f32[8,4,3,3] parameter(1)
  ROOT c = f32[2,8,7,7] convolution(in, k), window={size=3x3}, dim_labels=bf01_oi01->bf01
}
)");
  ASSERT_NE(m2, nullptr);
  const auto& d = *m2->entry()->root()->attrs().conv_dnums;
  EXPECT_EQ(d.input_feature_dimension, 1);
  EXPECT_EQ(d.kernel_output_feature_dimension, 0);
  EXPECT_EQ(d.kernel_input_feature_dimension, 1);
  EXPECT_NE(PrintModule(*m2).find("window={size=3x3}, dim_labels=bf01_oi01->bf01"),
            std::string::npos);
}

TEST(ParserTest, DotGatherScatterDimensionNumbers) {
  auto m = Parse(R"(HloModule m
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b) }
ENTRY e {
  l = f32[4,8,16] parameter(0)
  r = f32[4,16,32] parameter(1)
  d = f32[4,8,32] dot(l, r), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  idx = s32[5,2] parameter(2)
  g = f32[5,8,16] gather(l, idx), offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={0,1}, operand_batching_dims={}, index_vector_dim=1, slice_sizes={1,8,16}, indices_are_sorted=true
  u = f32[5,8,16] parameter(3)
  ROOT sc = f32[4,8,16] scatter(l, idx, u), update_window_dims={1,2}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0,1}, input_batching_dims={}, scatter_indices_batching_dims={}, index_vector_dim=1, indices_are_sorted=true, unique_indices=true, to_apply=add
}
)");
  ASSERT_NE(m, nullptr);
  const auto& dd = *Find(*m, "d")->attrs().dot_dnums;
  EXPECT_EQ(dd.lhs_batch_dimensions, std::vector<int64_t>{0});
  EXPECT_EQ(dd.lhs_contracting_dimensions, std::vector<int64_t>{2});
  EXPECT_EQ(dd.rhs_contracting_dimensions, std::vector<int64_t>{1});
  const Attributes& g = Find(*m, "g")->attrs();
  EXPECT_EQ(g.gather_dnums->offset_dims, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(g.gather_dnums->start_index_map, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(g.gather_dnums->index_vector_dim, 1);
  EXPECT_EQ(g.gather_slice_sizes, (std::vector<int64_t>{1, 8, 16}));
  EXPECT_TRUE(g.indices_are_sorted);
  const Instruction* sc = Find(*m, "sc");
  const Attributes& s = sc->attrs();
  EXPECT_EQ(s.scatter_dnums->update_window_dims, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(s.scatter_dnums->scatter_dims_to_operand_dims, (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(s.unique_indices);
  EXPECT_EQ(sc->to_apply()->name(), "add");
  std::string printed = PrintModule(*m);
  EXPECT_NE(printed.find("lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                         "rhs_contracting_dims={1}"),
            std::string::npos);
  EXPECT_NE(printed.find("offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={0,1}, "
                         "index_vector_dim=1, slice_sizes={1,8,16}, indices_are_sorted=true"),
            std::string::npos)
      << printed;
}

TEST(ParserTest, BatchNormGatherBatchingDims) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  x = f32[2,4,3] parameter(0)
  s = f32[4] parameter(1)
  o = f32[4] parameter(2)
  bn = (f32[2,4,3], f32[4], f32[4]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
  idx = s32[2,1] parameter(3)
  ROOT g = f32[2,3] gather(x, idx), offset_dims={1}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,1,3}
}
)");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(Find(*m, "bn")->attrs().epsilon, 0.001f);
  EXPECT_EQ(Find(*m, "bn")->attrs().feature_index, 1);
  const auto& g = *Find(*m, "g")->attrs().gather_dnums;
  EXPECT_EQ(g.operand_batching_dims, std::vector<int64_t>{0});
  EXPECT_EQ(g.start_indices_batching_dims, std::vector<int64_t>{0});
  EXPECT_NE(PrintModule(*m).find("epsilon=0.001, feature_index=1"), std::string::npos);
}

TEST(ParserTest, CompareCustomCallRngSortAndExtras) {
  auto m = Parse(R"(HloModule m
lt { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt_c = pred[] compare(a, b), direction=LT }
ENTRY e {
  p = f32[4] parameter(0)
  c = pred[4] compare(p, p), direction=GE, type=TOTALORDER
  cc = f32[4] custom-call(p), custom_call_target="Sharding", custom_call_has_side_effect=true, backend_config="unspecified_dims=[0]", api_version=API_VERSION_STATUS_RETURNING, metadata={op_name="a/b" source_file="x.py" source_line=3}
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[4] rng(lo, hi), distribution=rng_uniform
  k = u64[2] parameter(1)
  rb = (u64[2], u32[4]) rng-bit-generator(k), algorithm=rng_default
  ROOT s = f32[4] sort(p), dimensions={0}, is_stable=true, to_apply=lt
}
)");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(Find(*m, "c")->attrs().comparison_direction, ComparisonDirection::kGe);
  EXPECT_EQ(Find(*m, "c")->attrs().comparison_type, "TOTALORDER");
  const Attributes& cc = Find(*m, "cc")->attrs();
  EXPECT_EQ(cc.custom_call_target, "Sharding");
  ASSERT_EQ(cc.extra.size(), 4u);
  EXPECT_EQ(cc.extra[0].first, "custom_call_has_side_effect");
  EXPECT_EQ(*cc.FindExtra("backend_config"), "\"unspecified_dims=[0]\"");
  EXPECT_EQ(*cc.FindExtra("metadata"), "{op_name=\"a/b\" source_file=\"x.py\" source_line=3}");
  EXPECT_EQ(Find(*m, "r")->attrs().rng_distribution, "rng_uniform");
  EXPECT_EQ(Find(*m, "rb")->attrs().rng_algorithm, "rng_default");
  EXPECT_TRUE(Find(*m, "s")->attrs().is_stable);
  std::string printed = PrintModule(*m);
  EXPECT_NE(printed.find("custom_call_target=\"Sharding\", custom_call_has_side_effect=true, "
                         "api_version=API_VERSION_STATUS_RETURNING, metadata={op_name=\"a/b\" "
                         "source_file=\"x.py\" source_line=3}, "
                         "backend_config=\"unspecified_dims=[0]\""),
            std::string::npos)
      << printed;
  PrintOptions no_metadata;
  no_metadata.print_metadata = false;
  EXPECT_EQ(PrintModule(*m, no_metadata).find("metadata="), std::string::npos);
}

TEST(ParserTest, CollectiveAttributes) {
  auto m = Parse(R"(HloModule m, num_partitions=8
sum { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[8] parameter(0)
  ar = f32[8] all-reduce(p), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=sum
  ag = f32[32] all-gather(p), channel_id=2, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true
  rs = f32[2] reduce-scatter(p), replica_groups=[2,4]<=[2,4]T(1,0), dimensions={0}, to_apply=sum
  a2a = f32[8] all-to-all(p), replica_groups={}, dimensions={0}, constrain_layout=true
  ROOT cp = f32[8] collective-permute(p), channel_id=5, source_target_pairs={{0,1},{1,2},{2,0}}
}
)");
  ASSERT_NE(m, nullptr);
  const Attributes& ar = Find(*m, "ar")->attrs();
  ASSERT_TRUE(ar.replica_groups.has_value());
  EXPECT_FALSE(ar.replica_groups->is_iota);
  EXPECT_EQ(ar.replica_groups->groups, (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(ar.channel_id, 1);
  EXPECT_TRUE(ar.use_global_device_ids);
  const Attributes& ag = Find(*m, "ag")->attrs();
  EXPECT_TRUE(ag.replica_groups->is_iota);
  EXPECT_EQ(ag.replica_groups->group_dims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(ag.replica_groups->reshape_dims, std::vector<int64_t>{8});
  EXPECT_EQ(ag.dimensions, std::vector<int64_t>{0});
  const Attributes& rs = Find(*m, "rs")->attrs();
  EXPECT_EQ(rs.replica_groups->transpose_perm, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(rs.replica_groups->Expand(),
            (std::vector<std::vector<int64_t>>{{0, 4, 1, 5}, {2, 6, 3, 7}}));
  EXPECT_TRUE(Find(*m, "a2a")->attrs().constrain_layout);
  EXPECT_TRUE(Find(*m, "a2a")->attrs().replica_groups->empty());
  const Attributes& cp = Find(*m, "cp")->attrs();
  EXPECT_EQ(cp.source_target_pairs.size(), 3u);
  EXPECT_EQ(cp.source_target_pairs[2], (std::pair<int64_t, int64_t>{2, 0}));
  std::string printed = PrintModule(*m);
  EXPECT_NE(printed.find("replica_groups=[2,4]<=[2,4]T(1,0), dimensions={0}, to_apply=%sum"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("source_target_pairs={{0,1},{1,2},{2,0}}"), std::string::npos);
  EXPECT_NE(printed.find("replica_groups={{0,1},{2,3}}, use_global_device_ids=true"),
            std::string::npos);
}

TEST(ParserTest, ControlFlowCalledComputationsInDocumentedOrder) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  p = (s32[], f32[2]) parameter(0)
  w = (s32[], f32[2]) while(p), body=body, condition=cond
  b = pred[] parameter(1)
  c = f32[2] conditional(b, p, p), false_computation=br1, true_computation=br0
  i = s32[] parameter(2)
  ROOT c3 = f32[2] conditional(i, p, p, p), branch_computations={br0, br1, br0}
}
cond { a = (s32[], f32[2]) parameter(0)
  ROOT t = pred[] constant(false) }
body { a = (s32[], f32[2]) parameter(0)
  ROOT r = (s32[], f32[2]) copy(a) }
br0 { a = (s32[], f32[2]) parameter(0)
  ROOT g = f32[2] get-tuple-element(a), index=1 }
br1 { a = (s32[], f32[2]) parameter(0)
  g = f32[2] get-tuple-element(a), index=1
  ROOT n = f32[2] negate(g) }
)");
  ASSERT_NE(m, nullptr);
  const Instruction* w = Find(*m, "w");
  EXPECT_EQ(w->while_condition()->name(), "cond");
  EXPECT_EQ(w->while_body()->name(), "body");
  const Instruction* c = Find(*m, "c");
  ASSERT_EQ(c->called_computations().size(), 2u);
  EXPECT_EQ(c->called_computations()[0]->name(), "br0");
  EXPECT_EQ(c->called_computations()[1]->name(), "br1");
  const Instruction* c3 = Find(*m, "c3");
  ASSERT_EQ(c3->called_computations().size(), 3u);
  EXPECT_EQ(c3->called_computations()[2]->name(), "br0");
  // The first ENTRY computation stays the entry even though it comes first.
  EXPECT_EQ(m->entry()->name(), "e");
  std::string printed = PrintModule(*m);
  EXPECT_NE(printed.find("condition=%cond, body=%body"), std::string::npos);
  EXPECT_NE(printed.find("true_computation=%br0, false_computation=%br1"), std::string::npos);
  EXPECT_NE(printed.find("branch_computations={%br0, %br1, %br0}"), std::string::npos);
  // Callees print before callers.
  EXPECT_LT(printed.find("%br1 ("), printed.find("ENTRY %e"));
}

TEST(ParserTest, SelectAndScatterAndReduceWindow) {
  auto m = Parse(R"(HloModule m
ge { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE }
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b) }
ENTRY e {
  x = f32[8] parameter(0)
  s = f32[4] parameter(1)
  z = f32[] constant(0)
  rw = f32[4] reduce-window(x, z), window={size=2 stride=2}, to_apply=add
  ROOT ss = f32[8] select-and-scatter(x, s, z), window={size=2 stride=2}, select=ge, scatter=add
}
)");
  ASSERT_NE(m, nullptr);
  const Instruction* ss = Find(*m, "ss");
  ASSERT_EQ(ss->called_computations().size(), 2u);
  EXPECT_EQ(ss->called_computations()[0]->name(), "ge");
  EXPECT_EQ(ss->called_computations()[1]->name(), "add");
  EXPECT_EQ((*Find(*m, "rw")->attrs().window)[0].stride, 2);
}

TEST(ParserTest, ShardingAttribute) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  p = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}
  ROOT t = (f32[8,4], f32[8,4]) tuple(p, p), sharding={{replicated}, {maximal device=1}}
}
)");
  ASSERT_NE(m, nullptr);
  const Instruction* p = Find(*m, "p");
  ASSERT_TRUE(p->has_sharding());
  auto expected = Sharding::Parse("{devices=[2,1]0,1}");
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(*p->sharding(), *expected);
  EXPECT_TRUE(Find(*m, "t")->has_sharding());
  EXPECT_NE(PrintModule(*m).find("sharding=" + expected->ToString()), std::string::npos);
}

TEST(ParserTest, ForwardReferenceToComputation) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=%later
}
%later (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}
)");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->entry()->root()->to_apply()->name(), "later");
}

TEST(ParserTest, InfersOmittedShapes) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  a = f32[2]{0} parameter(0)
  b = s32[] parameter(1)
  m = minimum(a, a)
  c = compare(a, a), direction=LT
  t = tuple(m, b)
  ROOT g = get-tuple-element(t), index=1
}
)");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(Find(*m, "m")->shape().ToString(), "f32[2]{0}");
  EXPECT_EQ(Find(*m, "c")->shape().ToString(), "pred[2]{0}");
  EXPECT_EQ(Find(*m, "t")->shape().ToString(), "(f32[2]{0}, s32[])");
  EXPECT_EQ(Find(*m, "g")->shape().ToString(), "s32[]");
}

TEST(ParserTest, SourceLocationsPointAtNames) {
  auto m = Parse("HloModule m\n\nENTRY e {\n  %p0 = f32[] parameter(0)\n    ROOT neg = f32[] negate(%p0)\n}\n");
  ASSERT_NE(m, nullptr);
  const SourceLoc& p0 = Find(*m, "p0")->loc();
  EXPECT_EQ(p0.line, 4);
  EXPECT_EQ(p0.column, 3);
  EXPECT_EQ(p0.length, 3);  // "%p0"
  const SourceLoc& neg = Find(*m, "neg")->loc();
  EXPECT_EQ(neg.line, 5);
  EXPECT_EQ(neg.column, 10);
  EXPECT_EQ(neg.length, 3);
  ASSERT_TRUE(neg.known());
  EXPECT_EQ(neg.file->name, "<string>");
}

// XLA's NameUniquer: names stay unique across the module, the first
// occurrence keeps its name, later duplicates take the next free suffix.
TEST(ParserTest, RenamesDuplicateNamesLikeXla) {
  auto m = Parse(R"(HloModule m
c1 {
  x = f32[] parameter(0)
  y.1 = f32[] negate(x)
  ROOT add = f32[] add(x, y.1)
}
ENTRY c2 {
  x = f32[] parameter(0)
  y = f32[] negate(x)
  y.1 = f32[] abs(y)
  add = f32[] add(y, y.1)
  ROOT c = f32[] call(add), to_apply=c1
}
)");
  ASSERT_NE(m, nullptr);
  const Computation* c1 = m->computations()[0].get();
  const Computation* c2 = m->computations()[1].get();
  EXPECT_EQ(c1->instructions()[0]->name(), "x");
  EXPECT_EQ(c1->instructions()[1]->name(), "y.1");
  EXPECT_EQ(c1->instructions()[2]->name(), "add");
  EXPECT_EQ(c2->instructions()[0]->name(), "x.1");
  EXPECT_EQ(c2->instructions()[1]->name(), "y");
  EXPECT_EQ(c2->instructions()[2]->name(), "y.2");
  EXPECT_EQ(c2->instructions()[3]->name(), "add.1");
  EXPECT_EQ(c2->instructions()[3]->operand(1)->name(), "y.2");
  for (const char* n : {"x", "x.1", "y", "y.1", "y.2", "add", "add.1", "c"})
    EXPECT_TRUE(m->IsNameUsed(n)) << n;
  // Renamed text parses again to the same names.
  std::string printed = PrintModule(*m);
  auto again = ParseModuleText(printed);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(PrintModule(**again), printed);
  // New names do not collide with parsed ones.
  std::string fresh = m->UniqueInstructionName("add");
  EXPECT_NE(fresh, "add");
  EXPECT_NE(fresh, "add.1");
}

}  // namespace
}  // namespace meshsplit

namespace meshsplit {
namespace {

// Small float formats: every finite code prints and parses back to itself.
TEST(ParserTest, MiniFloatConstantsRoundTripEveryCode) {
  const char* kTypes[] = {"f8e5m2", "f8e4m3fn", "f8e4m3", "f8e3m4", "f8e4m3fnuz",
                          "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu", "f4e2m1fn"};
  for (const char* type : kTypes) {
    SCOPED_TRACE(type);
    auto m = ParseModuleText(std::string("HloModule m\nENTRY e {\n  ROOT c = ") + type +
                             "[3] constant({1.5, -0.25, 448})\n}\n");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::string printed = PrintModule(**m);
    auto again = ParseModuleText(printed);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(PrintModule(**again), printed);
    EXPECT_TRUE((*m)->entry()->root()->literal().BitwiseEqual(
        (*again)->entry()->root()->literal()));
  }
  auto m = ParseModuleText("HloModule m\nENTRY e {\n  ROOT c = f8e4m3fn[4] constant({1.5, -0.25, 448, 450})\n}\n");
  ASSERT_TRUE(m.ok());
  EXPECT_NE(PrintModule(**m).find("constant({1.5, -0.25, 448, 448})"), std::string::npos)
      << PrintModule(**m);
}

}  // namespace
}  // namespace meshsplit
