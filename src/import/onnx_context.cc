// The ONNX importer's instruction builder and attribute/tensor helpers. Every
// instruction goes through Context::Emit, which runs shape inference so a
// lowering mistake surfaces as an error naming the ONNX node.
#include "import/onnx_context.h"

#include <algorithm>
#include <cstring>

#include "ir/shape_inference.h"

namespace meshsplit::onnx_import {
namespace {

// `text` as a quoted metadata string (backslash before '"' and '\\').
std::string QuotedMetadata(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

Status Context::Error(const std::string& message) const {
  std::string who = node_ ? "node '" + node_->name() + "' (op " + node_->op_type() + "): "
                          : std::string();
  return Status::Error(module_->name() + ".onnx: " + who + message);
}

bool Context::HasInput(int i) const {
  return i < node_->input_size() && !node_->input(i).empty();
}

StatusOr<Instruction*> Context::Input(int i) const {
  if (!HasInput(i)) return Error("missing input " + std::to_string(i));
  auto it = values_.find(node_->input(i));
  if (it == values_.end())
    return Error("input '" + node_->input(i) + "' is not defined before use");
  return it->second;
}

void Context::SetOutput(int i, Instruction* value) {
  if (i < node_->output_size() && !node_->output(i).empty())
    values_[node_->output(i)] = value;
}

StatusOr<Instruction*> Context::Emit(Opcode opcode, Shape declared,
                                     std::vector<Instruction*> operands,
                                     Attributes attrs,
                                     std::vector<Computation*> called) {
  // Constant shape operands (Reshape, Expand, ConstantOfShape) come from the
  // file, so a negative or overflowing size is the model's error; shape
  // inference assumes sizes that are valid, so they are checked first.
  if (std::string why = declared.SizeError(); !why.empty())
    return Error(std::string(OpcodeName(opcode)) + ": " + why);
  auto instr = std::make_unique<Instruction>(
      opcode, module_->UniqueInstructionName(std::string(OpcodeName(opcode))),
      std::move(declared));
  for (Instruction* op : operands) instr->AppendOperand(op);
  instr->mutable_attrs() = std::move(attrs);
  // As XLA's frontends do, each instruction names the op it came from, so a
  // spec's "match_op" rule and the reports can refer to ONNX nodes.
  if (node_ != nullptr && !node_->name().empty() && !instr->attrs().FindExtra("metadata"))
    instr->mutable_attrs().extra.emplace_back(
        "metadata", "{op_type=" + QuotedMetadata(node_->op_type()) +
                        " op_name=" + QuotedMetadata(node_->name()) + "}");
  instr->set_called_computations(std::move(called));
  auto shape = InferShape(*instr);
  if (!shape.ok()) {
    instr->DropAllOperands();
    return Error(std::string(OpcodeName(opcode)) + ": " + shape.status().message());
  }
  if (std::string why = shape->SizeError(); !why.empty()) {
    instr->DropAllOperands();
    return Error(std::string(OpcodeName(opcode)) + ": " + why);
  }
  instr->set_shape(*shape);
  return comp_->AddInstruction(std::move(instr));
}

Instruction* Context::Constant(Literal literal) {
  auto instr = std::make_unique<Instruction>(
      Opcode::kConstant, module_->UniqueInstructionName("constant"), literal.shape());
  instr->set_literal(std::move(literal));
  return comp_->AddInstruction(std::move(instr));
}

Instruction* Context::ScalarConstant(PrimitiveType type, double value) {
  return Constant(Literal::ScalarOfType(type, value));
}

Computation* Context::Reducer(Opcode op, PrimitiveType type) {
  auto key = std::make_pair(op, type);
  if (auto it = reducers_.find(key); it != reducers_.end()) return it->second;
  std::string name = module_->UniqueInstructionName(
      std::string(OpcodeName(op)) + "_" + std::string(PrimitiveTypeName(type)));
  auto comp = std::make_unique<Computation>(name);
  Shape scalar(type, {});
  Instruction* params[2];
  for (int i = 0; i < 2; ++i) {
    auto p = std::make_unique<Instruction>(
        Opcode::kParameter, module_->UniqueInstructionName(i ? "rhs" : "lhs"), scalar);
    p->mutable_attrs().parameter_number = i;
    params[i] = comp->AddInstruction(std::move(p));
  }
  auto body = std::make_unique<Instruction>(
      op, module_->UniqueInstructionName(std::string(OpcodeName(op))), scalar);
  body->AppendOperand(params[0]);
  body->AppendOperand(params[1]);
  comp->set_root(comp->AddInstruction(std::move(body)));
  Computation* raw = module_->AddComputation(std::move(comp));
  reducers_[key] = raw;
  return raw;
}

StatusOr<Instruction*> Context::Reshape(Instruction* x, std::vector<int64_t> dims) {
  if (x->shape().dimensions() == dims) return x;
  return Emit(Opcode::kReshape, Shape(x->shape().element_type(), std::move(dims)), {x});
}

StatusOr<Instruction*> Context::Convert(Instruction* x, PrimitiveType type) {
  if (x->shape().element_type() == type) return x;
  if (type == PrimitiveType::PRED) {  // x != 0, as ONNX Cast to bool
    return Compare(ComparisonDirection::kNe, x,
                   ScalarConstant(x->shape().element_type(), 0));
  }
  return Emit(Opcode::kConvert, Shape(type, x->shape().dimensions()), {x});
}

StatusOr<Instruction*> Context::BroadcastTo(Instruction* x,
                                            const std::vector<int64_t>& dims) {
  const auto& xd = x->shape().dimensions();
  if (xd == dims) return x;
  int64_t offset = static_cast<int64_t>(dims.size()) - static_cast<int64_t>(xd.size());
  if (offset < 0) return Error("cannot broadcast " + x->shape().ToString(false) + " to a lower rank");
  // Drop size-1 dims that get stretched, then broadcast the rest in place.
  std::vector<int64_t> kept_dims, kept_sizes;
  for (int64_t i = 0; i < static_cast<int64_t>(xd.size()); ++i) {
    int64_t target = dims[i + offset];
    if (xd[i] == target) {
      kept_dims.push_back(i + offset);
      kept_sizes.push_back(xd[i]);
    } else if (xd[i] != 1) {
      return Error("cannot broadcast " + x->shape().ToString(false) + " to [" +
                   std::to_string(dims.size()) + "-d shape]");
    }
  }
  MS_ASSIGN_OR_RETURN(Instruction * squeezed, Reshape(x, kept_sizes));
  Attributes a;
  a.dimensions = kept_dims;
  return Emit(Opcode::kBroadcast, Shape(x->shape().element_type(), dims), {squeezed}, a);
}

Status Context::BroadcastPair(Instruction*& a, Instruction*& b) {
  const auto& ad = a->shape().dimensions();
  const auto& bd = b->shape().dimensions();
  size_t rank = std::max(ad.size(), bd.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i + ad.size() >= rank ? ad[i + ad.size() - rank] : 1;
    int64_t y = i + bd.size() >= rank ? bd[i + bd.size() - rank] : 1;
    if (x != y && x != 1 && y != 1)
      return Error("operand shapes " + a->shape().ToString(false) + " and " +
                   b->shape().ToString(false) + " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  MS_ASSIGN_OR_RETURN(a, BroadcastTo(a, out));
  MS_ASSIGN_OR_RETURN(b, BroadcastTo(b, out));
  return Status::Ok();
}

StatusOr<Instruction*> Context::Binary(Opcode op, Instruction* a, Instruction* b) {
  MS_RETURN_IF_ERROR(BroadcastPair(a, b));
  return Emit(op, Shape(), {a, b});
}

StatusOr<Instruction*> Context::Compare(ComparisonDirection dir, Instruction* a,
                                        Instruction* b) {
  MS_RETURN_IF_ERROR(BroadcastPair(a, b));
  Attributes attrs;
  attrs.comparison_direction = dir;
  return Emit(Opcode::kCompare, Shape(), {a, b}, attrs);
}

StatusOr<Instruction*> Context::Reduce(Instruction* x, std::vector<int64_t> dims,
                                       Opcode op, double init) {
  PrimitiveType t = x->shape().element_type();
  Attributes attrs;
  attrs.dimensions = std::move(dims);
  return Emit(Opcode::kReduce, Shape(), {x, ScalarConstant(t, init)}, attrs,
              {Reducer(op, t)});
}

std::vector<int64_t> Context::LiteralInts(const Literal& l) {
  std::vector<int64_t> v(l.element_count());
  for (int64_t i = 0; i < l.element_count(); ++i)
    v[i] = IsFloatingPoint(l.element_type()) ? static_cast<int64_t>(l.GetDouble(i))
                                             : l.GetInt(i);
  return v;
}

StatusOr<std::vector<int64_t>> Context::ConstInts(int i) const {
  MS_ASSIGN_OR_RETURN(Instruction * x, Input(i));
  if (x->opcode() != Opcode::kConstant)
    return Error("input " + std::to_string(i) + " ('" + node_->input(i) +
                 "') must be a constant (dynamic shapes are not supported)");
  return LiteralInts(x->literal());
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

Status CheckAttributes(const Context& ctx, const onnx::NodeProto& node, const OpRule& rule) {
  using AP = onnx::AttributeProto;
  // The kind of every attribute name in the schemas of the ops the importer
  // lowers (opsets 7 to 17); a name means one kind across those ops.
  static const std::unordered_map<std::string, AP::AttributeType> kKinds = {
      {"allowzero", AP::INT},        {"axis", AP::INT},
      {"ceil_mode", AP::INT},        {"count_include_pad", AP::INT},
      {"end", AP::INT},              {"group", AP::INT},
      {"keepdims", AP::INT},         {"noop_with_empty_axes", AP::INT},
      {"seed", AP::INT},             {"spatial", AP::INT},
      {"start", AP::INT},            {"storage_order", AP::INT},
      {"to", AP::INT},               {"training_mode", AP::INT},
      {"transA", AP::INT},           {"transB", AP::INT},
      {"value_int", AP::INT},        {"alpha", AP::FLOAT},
      {"beta", AP::FLOAT},           {"epsilon", AP::FLOAT},
      {"momentum", AP::FLOAT},       {"ratio", AP::FLOAT},
      {"value_float", AP::FLOAT},    {"axes", AP::INTS},
      {"dilations", AP::INTS},       {"ends", AP::INTS},
      {"kernel_shape", AP::INTS},    {"pads", AP::INTS},
      {"perm", AP::INTS},            {"split", AP::INTS},
      {"starts", AP::INTS},          {"strides", AP::INTS},
      {"value_ints", AP::INTS},      {"value_floats", AP::FLOATS},
      {"auto_pad", AP::STRING},      {"reduction", AP::STRING},
      {"value_string", AP::STRING},  {"value_strings", AP::STRINGS},
      {"value", AP::TENSOR},         {"sparse_value", AP::SPARSE_TENSOR},
  };
  for (int i = 0; i < node.attribute_size(); ++i) {
    const AP& a = node.attribute(i);
    for (int j = 0; j < i; ++j)
      if (node.attribute(j).name() == a.name())
        return ctx.Error("attribute '" + a.name() + "' is given twice");
    if (std::find(rule.attributes.begin(), rule.attributes.end(), a.name()) ==
        rule.attributes.end())
      return ctx.Error("attribute '" + a.name() + "' is not in the op's schema");
    auto it = kKinds.find(a.name());
    if (it != kKinds.end() && a.type() != it->second)
      return ctx.Error("attribute '" + a.name() + "' must be " +
                       AP::AttributeType_Name(it->second) + ", got " +
                       AP::AttributeType_Name(a.type()));
  }
  return Status::Ok();
}

int64_t AttrInt(const onnx::NodeProto& node, const std::string& name, int64_t def) {
  const auto* a = FindAttr(node, name);
  return a ? a->i() : def;
}

float AttrFloat(const onnx::NodeProto& node, const std::string& name, float def) {
  const auto* a = FindAttr(node, name);
  return a ? a->f() : def;
}

std::vector<int64_t> AttrInts(const onnx::NodeProto& node, const std::string& name) {
  const auto* a = FindAttr(node, name);
  if (!a) return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

StatusOr<PrimitiveType> OnnxType(int32_t t) {
  using TP = onnx::TensorProto;
  switch (t) {
    case TP::FLOAT: return PrimitiveType::F32;
    case TP::DOUBLE: return PrimitiveType::F64;
    case TP::FLOAT16: return PrimitiveType::F16;
    case TP::BFLOAT16: return PrimitiveType::BF16;
    case TP::INT8: return PrimitiveType::S8;
    case TP::INT16: return PrimitiveType::S16;
    case TP::INT32: return PrimitiveType::S32;
    case TP::INT64: return PrimitiveType::S64;
    case TP::UINT8: return PrimitiveType::U8;
    case TP::UINT16: return PrimitiveType::U16;
    case TP::UINT32: return PrimitiveType::U32;
    case TP::UINT64: return PrimitiveType::U64;
    case TP::BOOL: return PrimitiveType::PRED;
    default: break;
  }
  return Status::Error("unsupported ONNX element type " + std::to_string(t));
}

namespace {

// onnx.proto keeps non-raw values in the one repeated field the data_type
// names; 16-bit floats travel there as their bit patterns in int32_data.
enum class DataField { kFloat, kDouble, kInt32, kInt64, kUint64 };

DataField FieldFor(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::F32: return DataField::kFloat;
    case PrimitiveType::F64: return DataField::kDouble;
    case PrimitiveType::S64: return DataField::kInt64;
    case PrimitiveType::U32:
    case PrimitiveType::U64: return DataField::kUint64;
    default: return DataField::kInt32;  // 8/16/32-bit ints, bool, f16/bf16 bits
  }
}

int64_t FieldSize(const onnx::TensorProto& t, DataField f) {
  switch (f) {
    case DataField::kFloat: return t.float_data_size();
    case DataField::kDouble: return t.double_data_size();
    case DataField::kInt32: return t.int32_data_size();
    case DataField::kInt64: return t.int64_data_size();
    case DataField::kUint64: return t.uint64_data_size();
  }
  return 0;
}

const char* FieldName(DataField f) {
  switch (f) {
    case DataField::kFloat: return "float_data";
    case DataField::kDouble: return "double_data";
    case DataField::kInt32: return "int32_data";
    case DataField::kInt64: return "int64_data";
    case DataField::kUint64: return "uint64_data";
  }
  return "";
}

}  // namespace

StatusOr<Literal> TensorToLiteral(const onnx::TensorProto& t) {
  MS_ASSIGN_OR_RETURN(PrimitiveType type, OnnxType(t.data_type()));
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return Status::Error("tensor '" + t.name() + "' uses external data (not supported)");
  Shape shape(type, std::vector<int64_t>(t.dims().begin(), t.dims().end()));
  if (std::string why = shape.SizeError(); !why.empty())
    return Status::Error("tensor '" + t.name() + "': " + why);
  // The data is checked against the shape before the literal is allocated:
  // dims are the file's word, the data is what it actually holds.
  const int64_t n = shape.ElementCount();
  const DataField field = FieldFor(type);
  for (DataField other : {DataField::kFloat, DataField::kDouble, DataField::kInt32,
                          DataField::kInt64, DataField::kUint64}) {
    if (FieldSize(t, other) == 0 || (other == field && !t.has_raw_data())) continue;
    // Reading values from a field the type does not name would convert them
    // (f16 bit patterns read as integers): refuse instead.
    return Status::Error("tensor '" + t.name() + "' of type " +
                         std::string(PrimitiveTypeName(type)) + " has values in " +
                         FieldName(other) +
                         (t.has_raw_data() ? " besides raw_data"
                                           : std::string("; its type keeps them in ") +
                                                 FieldName(field)));
  }
  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != shape.ByteSize())
      return Status::Error("tensor '" + t.name() + "' has " +
                           std::to_string(t.raw_data().size()) + " bytes of data, expected " +
                           std::to_string(shape.ByteSize()));
  } else {
    const int64_t have = FieldSize(t, field);
    if (have == 0 && n != 0) return Status::Error("tensor '" + t.name() + "' has no data");
    if (have != n)
      return Status::Error("tensor '" + t.name() + "' has " + std::to_string(have) +
                           " values, expected " + std::to_string(n));
  }
  Literal lit(shape);
  if (t.has_raw_data()) {
    // An empty tensor has no buffer: memcpy from or to null is undefined
    // even for 0 bytes (UBSan, GPT-2's empty shape tensors).
    if (lit.size_bytes() > 0) std::memcpy(lit.raw(), t.raw_data().data(), lit.size_bytes());
    return lit;
  }
  const bool float_bits = type == PrimitiveType::F16 || type == PrimitiveType::BF16;
  for (int64_t i = 0; i < n; ++i) {
    switch (field) {
      case DataField::kFloat: lit.SetDouble(i, t.float_data(i)); break;
      case DataField::kDouble: lit.SetDouble(i, t.double_data(i)); break;
      case DataField::kInt64: lit.SetInt(i, t.int64_data(i)); break;
      case DataField::kUint64: lit.SetInt(i, static_cast<int64_t>(t.uint64_data(i))); break;
      case DataField::kInt32:
        if (float_bits) {
          const uint16_t bits = static_cast<uint16_t>(t.int32_data(i));
          std::memcpy(lit.raw() + 2 * i, &bits, 2);
        } else {
          lit.SetInt(i, t.int32_data(i));
        }
        break;
    }
  }
  return lit;
}

StatusOr<int64_t> NormAxis(const Context& ctx, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  // Every caller indexes the operand's dimensions with the result, so a
  // scalar has no valid axis (ONNX: axis in [-r, r-1]).
  if (a < 0 || a >= rank)
    return ctx.Error("axis " + std::to_string(axis) + " out of range for rank " +
                     std::to_string(rank));
  return a;
}

}  // namespace meshsplit::onnx_import
