// Shape rules of send / recv and their -done ops, collective-broadcast,
// ragged-all-to-all, set-dimension-size and dynamic-reshape, with XLA's
// shapes (xla/service/shape_inference.cc and the HLO verifier). The result
// of a transfer start carries a u32[] context and a token besides the data,
// so the -done ops can find what they finish.
#include "ir/shape_inference_p2p.h"

#include <string>

#include "ir/shape_inference.h"
#include "ir/shape_inference_util.h"

namespace meshsplit {

using shape_inference_internal::Err;

namespace {

std::string Str(const Shape& s) { return s.ToString(/*print_layout=*/false); }

bool IsU32Scalar(const Shape& s) {
  return s.IsArray() && s.element_type() == PrimitiveType::U32 && s.rank() == 0;
}

// (data, u32[], token): what send and recv return.
bool IsTransferContext(const Shape& s) {
  return s.IsTuple() && s.tuple_size() == 3 && IsU32Scalar(s.tuple_shapes(1)) &&
         s.tuple_shapes(2).IsToken();
}

Status OperandIsToken(const Instruction& instr, int i) {
  if (!instr.operand(i)->shape().IsToken())
    return Err("operand ", i, " must be a token but has shape ", Str(instr.operand(i)->shape()));
  return Status::Ok();
}

Status IsS32Scalar(const Instruction& instr, int i, const char* what) {
  const Shape& s = instr.operand(i)->shape();
  if (!s.IsArray() || s.rank() != 0 || s.element_type() != PrimitiveType::S32)
    return Err(what, " (operand ", i, ") must be an s32 scalar but has shape ", Str(s));
  return Status::Ok();
}

StatusOr<Shape> RaggedAllToAll(const Instruction& instr) {
  const Shape& input = instr.operand(0)->shape();
  const Shape& output = instr.operand(1)->shape();
  if (!input.IsArray() || !output.IsArray())
    return Err("input and output (operands 0 and 1) must be arrays but are ", Str(input),
               " and ", Str(output));
  if (input.element_type() != output.element_type())
    return Err("input ", Str(input), " and output ", Str(output),
               " have different element types");
  // Rows move along dimension 0; the rest of a row must match.
  if (input.rank() < 1 || input.rank() != output.rank() ||
      !std::equal(input.dimensions().begin() + 1, input.dimensions().end(),
                  output.dimensions().begin() + 1))
    return Err("input ", Str(input), " and output ", Str(output),
               " must have rank >= 1 and agree on every dimension but the first");
  static const char* kNames[] = {"input_offsets", "send_sizes", "output_offsets", "recv_sizes"};
  const Shape& first = instr.operand(2)->shape();
  for (int i = 2; i < 6; ++i) {
    const Shape& s = instr.operand(i)->shape();
    if (!s.IsArray() || !IsInteger(s.element_type()) || (s.rank() != 1 && s.rank() != 2))
      return Err(kNames[i - 2], " (operand ", i,
                 ") must be an integer array of rank 1 or 2 but has shape ", Str(s));
    if (!s.Compatible(first))
      return Err(kNames[i - 2], " (operand ", i, ") has shape ", Str(s), " but input_offsets has ",
                 Str(first));
  }
  if (instr.attrs().replica_groups.has_value())
    MS_RETURN_IF_ERROR(shape_inference_internal::CheckReplicaGroupIds(*instr.attrs().replica_groups));
  return Shape(output.element_type(), output.dimensions());
}

StatusOr<Shape> SetDimensionSize(const Instruction& instr) {
  const Shape& x = instr.operand(0)->shape();
  if (!x.IsArray()) return Err("operand 0 must be an array but has shape ", Str(x));
  MS_RETURN_IF_ERROR(IsS32Scalar(instr, 1, "size"));
  const std::vector<int64_t>& d = instr.attrs().dimensions;
  if (d.size() != 1)
    return Err("expects one dimension but dimensions is ", shape_inference_internal::Dims(d));
  if (d[0] < 0 || d[0] >= x.rank())
    return Err("dimension ", d[0], " is out of range for rank ", x.rank());
  Shape r(x.element_type(), x.dimensions());
  std::vector<bool> dynamic = x.dynamic_dimensions();
  dynamic.resize(x.rank(), false);
  dynamic[d[0]] = true;
  r.set_dynamic_dimensions(std::move(dynamic));
  return r;
}

StatusOr<Shape> DynamicReshape(const Instruction& instr) {
  const Shape& x = instr.operand(0)->shape();
  const Shape& declared = instr.shape();
  if (!x.IsArray()) return Err("operand 0 must be an array but has shape ", Str(x));
  if (!declared.IsArray())
    return Err("result must be an array but is declared ", Str(declared));
  if (instr.operand_count() != declared.rank() + 1)
    return Err("expects one size operand per result dimension (", declared.rank(),
               ") but has ", instr.operand_count() - 1);
  for (int i = 1; i < instr.operand_count(); ++i)
    MS_RETURN_IF_ERROR(IsS32Scalar(instr, i, "dimension size"));
  if (declared.element_type() != x.element_type())
    return Err("result element type ", PrimitiveTypeName(declared.element_type()),
               " differs from operand element type ", PrimitiveTypeName(x.element_type()));
  if (declared.ElementCount() != x.ElementCount())
    return Err("operand ", Str(x), " has ", x.ElementCount(), " elements but the result bounds ",
               Str(declared), " hold ", declared.ElementCount());
  Shape r(declared.element_type(), declared.dimensions());
  r.set_dynamic_dimensions(declared.dynamic_dimensions());
  return r;
}

}  // namespace

bool IsP2POrDynamicSizeOpcode(Opcode op) {
  switch (op) {
    case Opcode::kSend: case Opcode::kSendDone: case Opcode::kRecv: case Opcode::kRecvDone:
    case Opcode::kCollectiveBroadcast: case Opcode::kRaggedAllToAll:
    case Opcode::kSetDimensionSize: case Opcode::kDynamicReshape:
      return true;
    default:
      return false;
  }
}

StatusOr<Shape> InferP2POrDynamicSizeShape(const Instruction& instr) {
  const int n = instr.operand_count();
  const Shape& declared = instr.shape();
  switch (instr.opcode()) {
    case Opcode::kSend:
      MS_RETURN_IF_ERROR(OperandIsToken(instr, 1));
      return Shape::Tuple({instr.operand(0)->shape(), Shape(PrimitiveType::U32, {}),
                           Shape::Token()});
    case Opcode::kRecv:
      MS_RETURN_IF_ERROR(OperandIsToken(instr, 0));
      if (!IsTransferContext(declared))
        return Err("result must be (data, u32[], token[]) but is declared ", Str(declared));
      return declared;
    case Opcode::kSendDone:
      if (!IsTransferContext(instr.operand(0)->shape()))
        return Err("operand must be a send's (data, u32[], token[]) but has shape ",
                   Str(instr.operand(0)->shape()));
      return Shape::Token();
    case Opcode::kRecvDone:
      if (!IsTransferContext(instr.operand(0)->shape()))
        return Err("operand must be a recv's (data, u32[], token[]) but has shape ",
                   Str(instr.operand(0)->shape()));
      return Shape::Tuple({instr.operand(0)->shape().tuple_shapes(0), Shape::Token()});
    case Opcode::kCollectiveBroadcast: {
      if (n < 1) return Err("expects at least one operand but has 0");
      std::vector<Shape> results;
      for (int i = 0; i < n; ++i) {
        const Shape& s = instr.operand(i)->shape();
        if (!s.IsArray()) return Err("operand ", i, " must be an array but has shape ", Str(s));
        results.push_back(Shape(s.element_type(), s.dimensions()));
      }
      if (instr.attrs().replica_groups.has_value())
        MS_RETURN_IF_ERROR(
            shape_inference_internal::CheckReplicaGroupIds(*instr.attrs().replica_groups));
      if (results.size() == 1) return results[0];
      return Shape::Tuple(std::move(results));
    }
    case Opcode::kRaggedAllToAll:
      return RaggedAllToAll(instr);
    case Opcode::kSetDimensionSize:
      return SetDimensionSize(instr);
    case Opcode::kDynamicReshape:
      return DynamicReshape(instr);
    default:
      return Err("internal: not a point-to-point or dynamic-size opcode");
  }
}

bool IsHostTransfer(const Instruction& instr) {
  const std::string* v = instr.attrs().FindExtra("is_host_transfer");
  return v != nullptr && *v == "true";
}

StatusOr<std::optional<std::vector<std::pair<int64_t, int64_t>>>> SendRecvSourceTargetPairs(
    const Instruction& instr) {
  const std::string* fa = instr.attrs().FindExtra("frontend_attributes");
  static const std::string kKey = "_xla_send_recv_source_target_pairs";
  if (fa == nullptr) return std::optional<std::vector<std::pair<int64_t, int64_t>>>();
  size_t pos = fa->find(kKey);
  if (pos == std::string::npos) return std::optional<std::vector<std::pair<int64_t, int64_t>>>();
  const std::string& s = *fa;
  size_t i = pos + kKey.size();
  auto skip = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '"' || s[i] == '\\')) ++i;
  };
  auto bad = [&]() -> Status {
    return Err("malformed ", kKey, " in frontend_attributes (expected {{source,target},...})");
  };
  auto eat = [&](char c) {
    skip();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  };
  auto number = [&](int64_t* out) {
    skip();
    size_t start = i;
    int64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 18) v = v * 10 + (s[i++] - '0');
    *out = v;
    return i > start;
  };
  if (!eat('=') || !eat('{')) return bad();
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (!eat('}')) {
    do {
      int64_t a = 0, b = 0;
      if (!eat('{') || !number(&a) || !eat(',') || !number(&b) || !eat('}')) return bad();
      pairs.emplace_back(a, b);
    } while (eat(','));
    if (!eat('}')) return bad();
  }
  return std::optional<std::vector<std::pair<int64_t, int64_t>>>(std::move(pairs));
}

}  // namespace meshsplit
