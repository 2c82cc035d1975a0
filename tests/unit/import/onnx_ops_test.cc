// ONNX importer op lowerings on small ModelProtos built in the test: naming,
// diagnostics, shape folding, numpy broadcasting, gathers and scatters. The
// expected values are computed here by plain loops.
#include <gtest/gtest.h>

#ifdef MESHSPLIT_HAVE_ONNX
#include <algorithm>
#include <cmath>
#include <tuple>

#include "import/onnx_importer.h"
#include "ir/verifier.h"
#include "onnx/onnx_pb.h"
#include "runtime/run_module.h"

namespace meshsplit {
namespace {

class Graph {
 public:
  explicit Graph(int64_t opset = 13) { model_.add_opset_import()->set_version(opset); }
  void Input(const std::string& name, std::vector<int64_t> dims,
             int type = onnx::TensorProto::FLOAT) {
    auto* in = model_.mutable_graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void Output(const std::string& name) { model_.mutable_graph()->add_output()->set_name(name); }
  onnx::NodeProto* Node(const std::string& op, std::vector<std::string> ins,
                        std::vector<std::string> outs, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(model_.graph().node_size()) : name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  void Ints(const std::string& name, std::vector<int64_t> values, std::vector<int64_t> dims) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
  }
  StatusOr<std::unique_ptr<Module>> Import(const std::string& name = "test") {
    return ImportOnnxBytes(model_.SerializeAsString(), name);
  }

 private:
  onnx::ModelProto model_;
};

void AddIntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void AddIntsAttr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

Literal Iota(Shape shape) {
  Literal l(shape);
  for (int64_t i = 0; i < l.element_count(); ++i) l.SetDouble(i, i * 0.5 - 3);
  return l;
}

std::vector<Literal> RunModel(const Module& m, std::vector<Literal> args) {
  auto r = RunEntry(m, std::move(args));
  EXPECT_TRUE(r.ok()) << r.status().message();
  std::vector<Literal> outs;
  if (!r.ok()) return outs;
  for (const Literal* l : OutputArrays(*r)) {
    Literal copy(l->shape());
    std::memcpy(copy.raw(), l->raw(), l->size_bytes());
    outs.push_back(std::move(copy));
  }
  return outs;
}

TEST(OnnxOps, UnsupportedOpNamesNodeAndOp) {
  Graph g;
  g.Input("x", {2});
  g.Node("Foo", {"x"}, {"y"}, "Foo_12");
  g.Output("y");
  auto m = g.Import("gpt2");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "gpt2.onnx: node 'Foo_12' (op Foo): unsupported ONNX op");
}

TEST(OnnxOps, SymbolicDimIsAnError) {
  onnx::ModelProto model;
  model.add_opset_import()->set_version(13);
  auto* in = model.mutable_graph()->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("batch");
  auto m = ImportOnnxBytes(model.SerializeAsString(), "sym");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("symbolic dimension 'batch'"), std::string::npos);
}

TEST(OnnxOps, ParameterNamesAreSanitized) {
  EXPECT_EQ(SanitizeOnnxName("h.0.attn.c_attn.weight"), "h.0.attn.c_attn.weight");
  EXPECT_EQ(SanitizeOnnxName("onnx::Gemm/3"), "onnx__Gemm_3");
  EXPECT_EQ(SanitizeOnnxName("0.weight"), "_0.weight");
  Graph g;
  g.Input("onnx::x/1", {2});
  g.Node("Relu", {"onnx::x/1"}, {"y"});
  g.Output("y");
  auto m = g.Import();
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->entry()->parameter(0)->name(), "onnx__x_1");
}

// Shape -> Gather -> Unsqueeze -> Concat -> Reshape folds to one reshape.
TEST(OnnxOps, ShapeArithmeticFolds) {
  Graph g;
  g.Input("x", {2, 3, 4});
  g.Ints("zero", {0}, {});
  g.Ints("axes", {0}, {1});
  g.Ints("minus1", {-1}, {1});
  g.Node("Shape", {"x"}, {"s"});
  g.Node("Gather", {"s", "zero"}, {"b"});
  g.Node("Unsqueeze", {"b", "axes"}, {"bu"});
  AddIntAttr(g.Node("Concat", {"bu", "minus1"}, {"shape"}), "axis", 0);
  g.Node("Reshape", {"x", "shape"}, {"y"});
  g.Output("y");
  auto m = g.Import();
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(VerifyModule(**m).ok());
  for (const auto& i : (*m)->entry()->instructions())
    EXPECT_TRUE(i->opcode() == Opcode::kParameter || i->opcode() == Opcode::kReshape ||
                i->opcode() == Opcode::kTuple)
        << "left over: " << i->name();
  auto outs = RunModel(**m, {Iota(Shape(PrimitiveType::F32, {2, 3, 4}))});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].shape().dimensions(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(outs[0].GetDouble(13), 13 * 0.5 - 3);
}

// onnx.proto keeps f16 and bf16 values as bit patterns in int32_data; read
// as integers they became 15360 for 1.0.
TEST(OnnxOps, HalfFloatInitializersAreBitPatterns) {
  onnx::ModelProto model;
  model.add_opset_import()->set_version(13);
  auto* graph = model.mutable_graph();
  for (auto [name, type, one, minus_two] :
       {std::tuple{"h", onnx::TensorProto::FLOAT16, 0x3C00, 0xC000},
        std::tuple{"b", onnx::TensorProto::BFLOAT16, 0x3F80, 0xC000}}) {
    auto* t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    t->add_dims(2);
    t->add_int32_data(one);
    t->add_int32_data(minus_two);
    graph->add_output()->set_name(name);
  }
  auto m = ImportOnnxBytes(model.SerializeAsString(), "half");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto outs = RunModel(**m, {});
  ASSERT_EQ(outs.size(), 2u);
  for (const Literal& out : outs) {
    EXPECT_EQ(out.GetDouble(0), 1.0);
    EXPECT_EQ(out.GetDouble(1), -2.0);
  }
}

TEST(OnnxOps, ValuesInAFieldTheTypeDoesNotNameAreAnError) {
  onnx::ModelProto model;
  model.add_opset_import()->set_version(13);
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1);
  t->add_int64_data(7);
  model.mutable_graph()->add_output()->set_name("w");
  auto m = ImportOnnxBytes(model.SerializeAsString(), "field");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(
                "tensor 'w' of type f32 has values in int64_data; its type keeps them in float_data"),
            std::string::npos)
      << m.status().message();
}

// The accessors read one payload field; an attribute of another kind read as
// its default (axis=1.0 as a FLOAT was axis 0).
TEST(OnnxOps, AttributeOfTheWrongKindIsAnError) {
  Graph g;
  g.Input("x", {2, 3});
  auto* n = g.Node("Softmax", {"x"}, {"y"}, "sm");
  auto* a = n->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(1);
  g.Output("y");
  auto m = g.Import("kind");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "kind.onnx: node 'sm' (op Softmax): attribute 'axis' must be INT, got FLOAT");

  Graph twice;
  twice.Input("x", {2, 3});
  auto* t = twice.Node("Softmax", {"x"}, {"y"}, "sm");
  AddIntAttr(t, "axis", 0);
  AddIntAttr(t, "axis", 1);
  twice.Output("y");
  m = twice.Import("kind");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "kind.onnx: node 'sm' (op Softmax): attribute 'axis' is given twice");
}

// Max and Min are variadic (the third input was ignored); an op given more
// inputs than its schema has is refused instead of reading the first ones.
TEST(OnnxOps, InputCountsFollowTheSchema) {
  Graph g;
  g.Input("a", {3});
  g.Input("b", {3});
  g.Input("c", {1});
  g.Node("Max", {"a", "b", "c"}, {"mx"});
  g.Node("Min", {"a"}, {"mn"});
  g.Output("mx");
  g.Output("mn");
  auto m = g.Import();
  ASSERT_TRUE(m.ok()) << m.status().message();
  Literal a(Shape(PrimitiveType::F32, {3})), b(a.shape()), c(Shape(PrimitiveType::F32, {1}));
  for (int i = 0; i < 3; ++i) {
    a.SetDouble(i, i);
    b.SetDouble(i, 2 - i);
  }
  c.SetDouble(0, 1.5);
  auto outs = RunModel(**m, {std::move(a), std::move(b), std::move(c)});
  ASSERT_EQ(outs.size(), 2u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(outs[0].GetDouble(i), std::max({double(i), double(2 - i), 1.5}));
    EXPECT_EQ(outs[1].GetDouble(i), i);
  }

  Graph extra;
  extra.Input("x", {2});
  extra.Node("Relu", {"x", "x"}, {"y"}, "r");
  extra.Output("y");
  auto bad = extra.Import("arity");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "arity.onnx: node 'r' (op Relu): takes 1 input, got 2");
  Graph few;
  few.Input("x", {2});
  few.Node("Gemm", {"x"}, {"y"}, "g");
  few.Output("y");
  bad = few.Import("arity");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "arity.onnx: node 'g' (op Gemm): takes 2 to 3 inputs, got 1");
}

// An attribute outside the op's schema, or a schema attribute whose meaning
// is not implemented, is refused: ignoring it gave a different program.
TEST(OnnxOps, AttributesOutsideWhatIsLoweredAreErrors) {
  Graph g;
  g.Input("x", {2});
  AddIntAttr(g.Node("Relu", {"x"}, {"y"}, "r"), "alpha", 1);
  g.Output("y");
  auto m = g.Import("attr");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "attr.onnx: node 'r' (op Relu): attribute 'alpha' is not in the op's schema");

  Graph drop;
  drop.Input("x", {2});
  drop.Input("ratio", {});
  drop.Ints("train", {1}, {});
  drop.Node("Dropout", {"x", "ratio", "train"}, {"y"}, "d");
  drop.Output("y");
  m = drop.Import("attr");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "attr.onnx: node 'd' (op Dropout): Dropout in training mode (random) is not supported");
}

TEST(OnnxOps, GatherWrapsNegativeIndices) {
  Graph g;
  g.Input("data", {4, 3});
  g.Ints("idx", {-1, 0}, {2});
  g.Node("Gather", {"data", "idx"}, {"y"});
  g.Output("y");
  auto m = g.Import();
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto outs = RunModel(**m, {Iota(Shape(PrimitiveType::F32, {4, 3}))});
  ASSERT_EQ(outs.size(), 1u);
  Literal data = Iota(Shape(PrimitiveType::F32, {4, 3}));
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(outs[0].GetDouble(j), data.GetDouble(9 + j));
    EXPECT_EQ(outs[0].GetDouble(3 + j), data.GetDouble(j));
  }
}

TEST(OnnxOps, MatMulBroadcastsBatchDims) {
  Graph g;
  g.Input("a", {2, 1, 3, 4});
  g.Input("b", {5, 4, 2});
  g.Node("MatMul", {"a", "b"}, {"y"});
  g.Output("y");
  auto m = g.Import();
  ASSERT_TRUE(m.ok()) << m.status().message();
  Literal a = Iota(Shape(PrimitiveType::F32, {2, 1, 3, 4}));
  Literal b = Iota(Shape(PrimitiveType::F32, {5, 4, 2}));
  auto outs = RunModel(**m, {Iota(a.shape()), Iota(b.shape())});
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_EQ(outs[0].shape().dimensions(), (std::vector<int64_t>{2, 5, 3, 2}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 2; ++c) {
          double s = 0;
          for (int k = 0; k < 4; ++k)
            s += a.GetDouble(i * 12 + r * 4 + k) * b.GetDouble(j * 8 + k * 2 + c);
          EXPECT_NEAR(outs[0].GetDouble(((i * 5 + j) * 3 + r) * 2 + c), s, 1e-4);
        }
}

// y = GatherElements(x, idx, axis=1); z = ScatterElements(zeros, idx, y).
TEST(OnnxOps, GatherAndScatterElements) {
  Graph g;
  g.Input("x", {2, 3});
  g.Input("zeros", {2, 3});
  g.Ints("idx", {2, 0, 1, 1}, {2, 2});
  AddIntAttr(g.Node("GatherElements", {"x", "idx"}, {"y"}), "axis", 1);
  AddIntAttr(g.Node("ScatterElements", {"zeros", "idx", "y"}, {"z"}), "axis", 1);
  g.Output("y");
  g.Output("z");
  auto m = g.Import();
  ASSERT_TRUE(m.ok()) << m.status().message();
  Literal x = Iota(Shape(PrimitiveType::F32, {2, 3}));
  auto outs = RunModel(**m, {Iota(x.shape()), Literal(x.shape())});
  ASSERT_EQ(outs.size(), 2u);
  std::vector<double> y = {x.GetDouble(2), x.GetDouble(0), x.GetDouble(4), x.GetDouble(4)};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(outs[0].GetDouble(i), y[i]);
  std::vector<double> z = {x.GetDouble(0), 0, x.GetDouble(2), 0, x.GetDouble(4), 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(outs[1].GetDouble(i), z[i]) << i;
}

TEST(OnnxOps, SoftmaxAndWhereBroadcast) {
  Graph g;
  g.Input("x", {2, 3});
  g.Input("c", {3}, onnx::TensorProto::BOOL);
  AddIntAttr(g.Node("Softmax", {"x"}, {"s"}), "axis", -1);
  g.Node("Where", {"c", "s", "x"}, {"w"});
  g.Output("s");
  g.Output("w");
  auto m = g.Import();
  ASSERT_TRUE(m.ok()) << m.status().message();
  Literal c(Shape(PrimitiveType::PRED, {3}));
  c.SetInt(1, 1);
  Literal x = Iota(Shape(PrimitiveType::F32, {2, 3}));
  auto outs = RunModel(**m, {Iota(x.shape()), std::move(c)});
  ASSERT_EQ(outs.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    double denom = 0;
    for (int k = 0; k < 3; ++k) denom += std::exp(x.GetDouble(r * 3 + k));
    for (int k = 0; k < 3; ++k) {
      double s = std::exp(x.GetDouble(r * 3 + k)) / denom;
      EXPECT_NEAR(outs[0].GetDouble(r * 3 + k), s, 1e-6);
      EXPECT_NEAR(outs[1].GetDouble(r * 3 + k), k == 1 ? s : x.GetDouble(r * 3 + k), 1e-6);
    }
  }
}

// Softmax's default axis and its meaning changed in opset 13: before, axis 1
// splits x into a matrix and each row of [2, 12] is normalised; from 13,
// the last axis alone is.
TEST(OnnxOps, SoftmaxBeforeOpset13NormalisesTheTrailingBlock) {
  for (int64_t opset : {11, 13}) {
    Graph g(opset);
    g.Input("x", {2, 3, 4});
    g.Node("Softmax", {"x"}, {"s"});
    g.Output("s");
    auto m = g.Import();
    ASSERT_TRUE(m.ok()) << m.status().message();
    Literal x = Iota(Shape(PrimitiveType::F32, {2, 3, 4}));
    auto outs = RunModel(**m, {Iota(x.shape())});
    ASSERT_EQ(outs.size(), 1u);
    const int block = opset < 13 ? 12 : 4;
    for (int b = 0; b < 24 / block; ++b) {
      double denom = 0;
      for (int k = 0; k < block; ++k) denom += std::exp(x.GetDouble(b * block + k));
      for (int k = 0; k < block; ++k)
        EXPECT_NEAR(outs[0].GetDouble(b * block + k),
                    std::exp(x.GetDouble(b * block + k)) / denom, 1e-6)
            << "opset " << opset << " element " << b * block + k;
    }
  }
}

TEST(OnnxOps, ModelWithoutAnOpsetIsAnError) {
  onnx::ModelProto model;
  model.mutable_graph()->add_output()->set_name("y");
  auto m = ImportOnnxBytes(model.SerializeAsString(), "noopset");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "noopset.onnx: the model imports no ai.onnx opset (opset_import)");
}

// Conv (stride 2, pads 1, bias) and MaxPool/GlobalAveragePool/BatchNorm on
// NCHW tensors, against direct loops.
TEST(OnnxOps, ConvAndPools) {
  Graph g;
  g.Input("x", {1, 2, 5, 5});
  g.Input("w", {3, 2, 3, 3});
  g.Input("b", {3});
  g.Input("scale", {3});
  g.Input("shift", {3});
  g.Input("mean", {3});
  g.Input("var", {3});
  auto* conv = g.Node("Conv", {"x", "w", "b"}, {"y"});
  AddIntsAttr(conv, "strides", {2, 2});
  AddIntsAttr(conv, "pads", {1, 1, 1, 1});
  auto* pool = g.Node("MaxPool", {"x"}, {"p"});
  AddIntsAttr(pool, "kernel_shape", {2, 2});
  AddIntsAttr(pool, "strides", {2, 2});
  g.Node("GlobalAveragePool", {"y"}, {"gap"});
  g.Node("BatchNormalization", {"y", "scale", "shift", "mean", "var"}, {"bn"});
  g.Output("y");
  g.Output("p");
  g.Output("gap");
  g.Output("bn");
  auto m = g.Import();
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(VerifyModule(**m).ok());
  Literal x = Iota(Shape(PrimitiveType::F32, {1, 2, 5, 5}));
  Literal w(Shape(PrimitiveType::F32, {3, 2, 3, 3}));
  for (int64_t i = 0; i < w.element_count(); ++i) w.SetDouble(i, std::sin(0.7 * i));
  Literal b = Iota(Shape(PrimitiveType::F32, {3}));
  std::vector<Literal> args;
  args.push_back(Iota(x.shape()));
  args.push_back(w);
  for (int i = 0; i < 5; ++i) {
    Literal v(Shape(PrimitiveType::F32, {3}));
    for (int c = 0; c < 3; ++c) v.SetDouble(c, i == 0 ? b.GetDouble(c) : 0.5 + i + c);
    args.push_back(std::move(v));
  }
  auto outs = RunModel(**m, std::move(args));
  ASSERT_EQ(outs.size(), 4u);
  ASSERT_EQ(outs[0].shape().dimensions(), (std::vector<int64_t>{1, 3, 3, 3}));
  auto X = [&](int c, int h, int ww) {
    return (h < 0 || h >= 5 || ww < 0 || ww >= 5) ? 0.0 : x.GetDouble((c * 5 + h) * 5 + ww);
  };
  std::vector<double> conv_ref(27);
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double s = b.GetDouble(o);
        for (int c = 0; c < 2; ++c)
          for (int ki = 0; ki < 3; ++ki)
            for (int kj = 0; kj < 3; ++kj)
              s += X(c, 2 * i - 1 + ki, 2 * j - 1 + kj) *
                   w.GetDouble(((o * 2 + c) * 3 + ki) * 3 + kj);
        conv_ref[(o * 3 + i) * 3 + j] = s;
        EXPECT_NEAR(outs[0].GetDouble((o * 3 + i) * 3 + j), s, 1e-4);
      }
  ASSERT_EQ(outs[1].shape().dimensions(), (std::vector<int64_t>{1, 2, 2, 2}));
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        double mx = -1e30;
        for (int di = 0; di < 2; ++di)
          for (int dj = 0; dj < 2; ++dj) mx = std::max(mx, X(c, 2 * i + di, 2 * j + dj));
        EXPECT_EQ(outs[1].GetDouble((c * 2 + i) * 2 + j), mx);
      }
  ASSERT_EQ(outs[2].shape().dimensions(), (std::vector<int64_t>{1, 3, 1, 1}));
  for (int o = 0; o < 3; ++o) {
    double s = 0;
    for (int k = 0; k < 9; ++k) s += conv_ref[o * 9 + k];
    EXPECT_NEAR(outs[2].GetDouble(o), s / 9, 1e-4);
    // scale = 1.5 + o, shift = 2.5 + o, mean = 3.5 + o, var = 4.5 + o.
    for (int k = 0; k < 9; ++k) {
      double bn = (conv_ref[o * 9 + k] - (3.5 + o)) / std::sqrt(4.5 + o + 1e-5) * (1.5 + o) +
                  (2.5 + o);
      EXPECT_NEAR(outs[3].GetDouble(o * 9 + k), bn, 1e-4);
    }
  }
}

}  // namespace
}  // namespace meshsplit
#endif  // MESHSPLIT_HAVE_ONNX
