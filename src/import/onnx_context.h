// Internal to the ONNX importer: the state shared by the op lowerings (value
// map, instruction builder with shape inference, reducer computations) and
// the per-family registration functions. Not a public header.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/module.h"
#include "onnx/onnx_pb.h"
#include "support/status.h"

namespace meshsplit::onnx_import {

class Context {
 public:
  Context(Module* module, Computation* comp) : module_(module), comp_(comp) {}

  Module* module() const { return module_; }
  Computation* comp() const { return comp_; }

  // The model's ai.onnx opset: a few ops changed meaning over the versions
  // the importer accepts (Softmax's axis before 13).
  void set_opset(int64_t opset) { opset_ = opset; }
  int64_t opset() const { return opset_; }

  // The node being lowered (for messages).
  void set_node(const onnx::NodeProto* node) { node_ = node; }
  const onnx::NodeProto& node() const { return *node_; }
  Status Error(const std::string& message) const;

  // Values by ONNX tensor name.
  std::unordered_map<std::string, Instruction*>& values() { return values_; }
  // Input i of the current node; an error if missing.
  StatusOr<Instruction*> Input(int i) const;
  bool HasInput(int i) const;
  int InputCount() const { return node_->input_size(); }
  void SetOutput(int i, Instruction* value);

  // Adds an instruction and checks/infers its shape. `declared` is the result
  // shape for ops whose shape is not determined by the operands (broadcast,
  // reshape, convert, iota, constant...); otherwise it may be left empty.
  StatusOr<Instruction*> Emit(Opcode opcode, Shape declared,
                              std::vector<Instruction*> operands,
                              Attributes attrs = {},
                              std::vector<Computation*> called = {});
  Instruction* Constant(Literal literal);
  Instruction* ScalarConstant(PrimitiveType type, double value);
  // `a op b` on a scalar computation of `type` (add, maximum, ...), cached.
  Computation* Reducer(Opcode op, PrimitiveType type);

  // Helpers used by many ops.
  StatusOr<Instruction*> Reshape(Instruction* x, std::vector<int64_t> dims);
  StatusOr<Instruction*> Convert(Instruction* x, PrimitiveType type);
  // Numpy-style broadcast of x to `dims` (x's rank <= dims.size()).
  StatusOr<Instruction*> BroadcastTo(Instruction* x, const std::vector<int64_t>& dims);
  // Broadcasts both operands to their common numpy shape.
  Status BroadcastPair(Instruction*& a, Instruction*& b);
  StatusOr<Instruction*> Binary(Opcode op, Instruction* a, Instruction* b);
  StatusOr<Instruction*> Compare(ComparisonDirection dir, Instruction* a, Instruction* b);
  // Reduce over `dims` with `op` starting from `init` (no keepdims).
  StatusOr<Instruction*> Reduce(Instruction* x, std::vector<int64_t> dims,
                                Opcode op, double init);

  // Constant input i as int64 values (shape operands: Reshape, Slice, ...).
  StatusOr<std::vector<int64_t>> ConstInts(int i) const;
  static std::vector<int64_t> LiteralInts(const Literal& l);

 private:
  Module* module_;
  Computation* comp_;
  const onnx::NodeProto* node_ = nullptr;
  int64_t opset_ = 13;
  std::unordered_map<std::string, Instruction*> values_;
  std::map<std::pair<Opcode, PrimitiveType>, Computation*> reducers_;
};

// Attribute access on a node. The accessors read the payload field of the
// kind they name: CheckAttributes runs on every node before it is lowered.
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, const std::string& name);
int64_t AttrInt(const onnx::NodeProto& node, const std::string& name, int64_t def);
float AttrFloat(const onnx::NodeProto& node, const std::string& name, float def);
std::vector<int64_t> AttrInts(const onnx::NodeProto& node, const std::string& name);

// ONNX tensor -> Literal; ONNX element type -> ours.
StatusOr<PrimitiveType> OnnxType(int32_t onnx_type);
StatusOr<Literal> TensorToLiteral(const onnx::TensorProto& t);

// Normalises a possibly negative axis for `rank`.
StatusOr<int64_t> NormAxis(const Context& ctx, int64_t axis, int64_t rank);

using LowerFn = std::function<Status(Context&)>;
// An op's lowering, how many input slots the ONNX schema gives it (an omitted
// optional input is an empty name and still takes its slot) and the names of
// its schema's attributes. Inputs past the last and attributes outside the
// schema are refused rather than ignored.
struct OpRule {
  static constexpr int kVariadic = 1 << 30;
  LowerFn lower;
  int min_inputs;
  int max_inputs;
  std::vector<std::string> attributes;
};
using OpTable = std::unordered_map<std::string, OpRule>;

// The node's attributes are its op's and of the kind the schema gives them
// (axis as a FLOAT would read as 0), each given once.
Status CheckAttributes(const Context& ctx, const onnx::NodeProto& node, const OpRule& rule);
void RegisterElementwiseOps(OpTable& table);
void RegisterTensorOps(OpTable& table);
void RegisterNnOps(OpTable& table);
void RegisterConvOps(OpTable& table);

}  // namespace meshsplit::onnx_import
