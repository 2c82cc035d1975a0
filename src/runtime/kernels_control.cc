// Kernels of the remaining ops: the sharding custom-calls (identity on one device) and
// collectives, which go to EvalContext::collectives or, with none, follow the
// single-device semantics (every group has one participant).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "ir/partitioned_rng.h"
#include "ir/shape_inference.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

// The single-device result of a collective whose group is just this device:
// its operand(s) unchanged. Shapes must agree, else the module was
// partitioned for more devices than it is being run on.
StatusOr<Literal> IdentityCollective(KernelArgs& k) {
  std::vector<Literal> outs;
  for (size_t i = 0; i < k.ops.size(); ++i) outs.push_back(TakeOrCopy(k, static_cast<int>(i)));
  Literal result = outs.size() == 1 && !k.shape().IsTuple() ? std::move(outs[0])
                                                           : Literal::MakeTuple(std::move(outs));
  if (!result.shape().Compatible(k.shape()))
    return InstrError(k.instr, "result " + k.shape().ToString(false) +
                                   " needs more than one participant (operand " +
                                   result.shape().ToString(false) +
                                   "); run the module with its number of partitions");
  return result;
}

}  // namespace

// XLA's "TopK" custom-call: the k largest (comparator `compare(p0, p1),
// direction=GT`) or smallest (LT) elements along the last dim and their
// indices, ties in index order. Other comparators are refused.
static StatusOr<Literal> EvalTopK(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const Computation* cmp = instr.to_apply();
  const Instruction* root = cmp ? cmp->root() : nullptr;
  if (k.ops.size() != 1 || !instr.shape().IsTuple() || instr.shape().tuple_size() != 2)
    return InstrError(instr, "TopK takes one operand and returns (values, indices)");
  // Without a comparator TopK means the largest (XLA's partitioner assumes
  // so too); other comparators than a plain GT/LT go to the general path.
  if (cmp != nullptr &&
      (root == nullptr || root->opcode() != Opcode::kCompare || root->operand_count() != 2 ||
       root->operand(0)->opcode() != Opcode::kParameter ||
       root->operand(1)->opcode() != Opcode::kParameter ||
       root->operand(0)->attrs().parameter_number != 0 ||
       root->operand(1)->attrs().parameter_number != 1 ||
       !root->attrs().comparison_direction.has_value() ||
       (*root->attrs().comparison_direction != ComparisonDirection::kGt &&
        *root->attrs().comparison_direction != ComparisonDirection::kLt)))
    return EvalTopKWithComparator(k);
  // The topk opcode says which in its largest= attribute.
  const bool largest = instr.opcode() == Opcode::kTopK
                           ? TopKLargest(instr).value_or(true)
                           : cmp == nullptr ||
                                 *root->attrs().comparison_direction == ComparisonDirection::kGt;
  const Literal& in = k.op(0);
  const Shape& vs = instr.shape().tuple_shapes(0);
  const Shape& is = instr.shape().tuple_shapes(1);
  if (in.shape().rank() < 1 || vs.rank() != in.shape().rank() || !vs.Compatible(Shape(in.element_type(), vs.dimensions())) ||
      is.dimensions() != vs.dimensions() || is.element_type() != PrimitiveType::S32)
    return InstrError(instr, "TopK result shapes do not match the operand");
  const int64_t n = in.shape().dimensions().back(), top = vs.dimensions().back();
  if (top > n) return InstrError(instr, "TopK takes more elements than the operand has");
  const int64_t rows = n == 0 ? 0 : in.element_count() / n;
  Shape vshape = vs, ishape = is;
  vshape.clear_layout();
  ishape.clear_layout();
  Literal values(vshape), indices(ishape);
  std::vector<int64_t> order(n);
  const bool is_float = IsFloatingPoint(in.element_type());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    auto key = [&](int64_t i) { return in.GetDouble(r * n + i); };
    auto ikey = [&](int64_t i) { return in.GetInt(r * n + i); };
    auto before = [&](int64_t a, int64_t b) {
      if (is_float) {
        double x = key(a), y = key(b);
        if (x != y) return largest ? x > y : x < y;
      } else {
        int64_t x = ikey(a), y = ikey(b);
        if (x != y) return largest ? x > y : x < y;
      }
      return a < b;
    };
    std::partial_sort(order.begin(), order.begin() + top, order.end(), before);
    for (int64_t j = 0; j < top; ++j) {
      if (is_float) values.SetDouble(r * top + j, key(order[j]));
      else values.SetInt(r * top + j, ikey(order[j]));
      indices.SetInt(r * top + j, order[j]);
    }
  }
  std::vector<Literal> outs;
  outs.push_back(std::move(values));
  outs.push_back(std::move(indices));
  return Literal::MakeTuple(std::move(outs));
}

StatusOr<Literal> EvalTopKOp(KernelArgs& k) {
  if (k.instr.to_apply() != nullptr)
    return InstrError(k.instr, "topk takes no comparator");
  return EvalTopK(k);
}

namespace {

// Two linear summaries of every operand element (different weights per
// position), so a stub result changes when any operand element changes,
// and stays close when operands differ only by rounding.
void SummarizeOperand(const Literal& l, double& s1, double& s2, int64_t& position) {
  if (l.shape().IsTuple()) {
    for (const Literal& e : l.elements()) SummarizeOperand(e, s1, s2, position);
    return;
  }
  if (!l.shape().IsArray()) return;
  for (int64_t i = 0; i < l.element_count(); ++i, ++position) {
    const double x = l.GetDouble(i);
    s1 += x * (1.0 + static_cast<double>(position % 7) / 8.0);
    s2 += x * (1.0 + static_cast<double>(position % 5) / 4.0);
  }
}

Literal StubValue(const Shape& shape, double s1, double s2, uint64_t salt) {
  if (shape.IsTuple()) {
    std::vector<Literal> elems;
    for (size_t i = 0; i < shape.tuple_shapes().size(); ++i)
      elems.push_back(StubValue(shape.tuple_shapes()[i], s1, s2, salt * 31 + i + 1));
    return Literal::MakeTuple(std::move(elems));
  }
  Shape plain = shape;
  plain.clear_layout();
  Literal out(plain);
  if (!shape.IsArray()) return out;
  const bool floating = IsFloatingPoint(shape.element_type());
  for (int64_t j = 0; j < out.element_count(); ++j) {
    const double a = static_cast<double>((j + salt) % 11) / 10.0 - 0.5;
    const double b = static_cast<double>((j * 3 + salt) % 13) / 12.0 - 0.5;
    const double v = a * s1 + b * s2;
    if (floating) out.SetDouble(j, v / (1.0 + std::fabs(v)));
    else out.SetInt(j, static_cast<int64_t>(std::llround(v)) % 97);
  }
  return out;
}

// The stand-in value of a custom-call without interpreter meaning
// (EvalContext::stub_opaque_custom_calls): a deterministic function of
// the target name and the operand values, bounded in (-1, 1) for floats.
Literal StubCustomCall(const KernelArgs& k) {
  double s1 = 0, s2 = 0;
  int64_t position = 0;
  for (const Literal* op : k.ops) SummarizeOperand(*op, s1, s2, position);
  uint64_t salt = 0;
  for (char c : k.instr.attrs().custom_call_target) salt = (salt * 131 + static_cast<uint8_t>(c)) % 1000003;
  return StubValue(k.shape(), s1, s2, salt);
}

}  // namespace

StatusOr<Literal> EvalCustomCall(KernelArgs& k) {
  const std::string& target = k.instr.attrs().custom_call_target;
  if (target == kPartitionInvariantRngTarget) return EvalPartitionInvariantRng(k);
  if (target == kPartitionInvariantRngBitGeneratorTarget)
    return EvalPartitionInvariantRngBitGenerator(k);
  if (DeviceHooks* hooks = k.interp.ctx().hooks) {
    std::vector<const Literal*> ops(k.ops.begin(), k.ops.end());
    std::optional<StatusOr<Literal>> r = hooks->CustomCall(k.instr, ops, k.interp.ctx());
    if (r.has_value()) {
      if (!r->ok() && !r->status().loc().known()) return InstrError(k.instr, r->status().message());
      return std::move(*r);
    }
  }
  if (target == "Sharding" || target == "SPMDFullToShardShape" || target == "SPMDShardToFullShape") {
    if (k.ops.size() != 1) return InstrError(k.instr, "custom-call " + target + " takes one operand");
    if (!k.op(0).shape().Compatible(k.shape()))
      return InstrError(k.instr, "custom-call " + target + " changes the shape from " +
                                     k.op(0).shape().ToString(false) + " to " + k.shape().ToString(false) +
                                     ", which needs the SPMD partitioner");
    return TakeOrCopy(k, 0);
  }
  // Host offloading moves data between memories; its value is unchanged.
  if ((target == "MoveToHost" || target == "MoveToDevice") && k.ops.size() == 1 &&
      k.op(0).shape().Compatible(k.shape()))
    return TakeOrCopy(k, 0);
  if (target == "TopK") return EvalTopK(k);
  if (k.interp.ctx().stub_opaque_custom_calls) return StubCustomCall(k);
  return InstrError(k.instr, "custom-call target \"" + target + "\" is not supported by the interpreter");
}

StatusOr<Literal> EvalInfeed(KernelArgs& k) {
  DeviceHooks* hooks = k.interp.ctx().hooks;
  if (hooks == nullptr)
    return InstrError(k.instr, "infeed is not supported by the interpreter without a data source");
  StatusOr<Literal> r = hooks->Infeed(k.instr, k.interp.ctx());
  if (!r.ok() && !r.status().loc().known()) return InstrError(k.instr, r.status().message());
  if (r.ok() && !r->shape().Compatible(k.shape()))
    return InstrError(k.instr, "infeed data source returned " + r->shape().ToString(false) +
                                   ", expected " + k.shape().ToString(false));
  return r;
}

StatusOr<Literal> EvalOutfeed(KernelArgs& k) {
  DeviceHooks* hooks = k.interp.ctx().hooks;
  if (hooks == nullptr || k.ops.empty())
    return InstrError(k.instr, "outfeed is not supported by the interpreter without a data sink");
  Status st = hooks->Outfeed(k.instr, k.op(0), k.interp.ctx());
  if (!st.ok()) return st.loc().known() ? st : InstrError(k.instr, st.message());
  return Literal(Shape::Token());
}

StatusOr<Literal> EvalCollective(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const EvalContext& ctx = k.interp.ctx();
  if (ctx.collectives != nullptr) {
    std::vector<const Literal*> ops(k.ops.begin(), k.ops.end());
    CollectiveOps& c = *ctx.collectives;
    StatusOr<Literal> r = Status::Error("unreachable");
    switch (instr.opcode()) {
      case Opcode::kAllReduce: r = c.AllReduce(instr, ops, ctx); break;
      case Opcode::kAllGather: r = c.AllGather(instr, ops, ctx); break;
      case Opcode::kReduceScatter: r = c.ReduceScatter(instr, ops, ctx); break;
      case Opcode::kAllToAll: r = c.AllToAll(instr, ops, ctx); break;
      case Opcode::kCollectivePermute: r = c.CollectivePermute(instr, ops, ctx); break;
      default: return InstrError(instr, "not a collective");
    }
    if (!r.ok() && !r.status().loc().known()) return InstrError(instr, r.status().message());
    return r;
  }
  if (instr.opcode() == Opcode::kCollectivePermute) {
    // Cross-partition when the op has a channel id, else across replicas.
    int64_t me = instr.attrs().channel_id ? ctx.partition_id : ctx.replica_id;
    for (const auto& [src, dst] : instr.attrs().source_target_pairs) {
      if (dst != me) continue;
      if (src != me)
        return InstrError(instr, "receives from device " + std::to_string(src) +
                                     ", but the interpreter runs a single device");
      return IdentityCollective(k);
    }
    return Literal(instr.shape());  // no source: zeros
  }
  return IdentityCollective(k);
}

}  // namespace meshsplit::interp
