// CollectiveOps on a Communicator: attribute decoding and shape checks; the
// data movement itself is the Communicator's.
#include "runtime/collective_adapter.h"

#include "ir/computation.h"
#include "runtime/interpreter.h"

namespace meshsplit {
namespace {

Status InstrError(const Instruction& instr, const std::string& message) {
  return Status::Error(message + " (in %" + instr.name() + " = " +
                           std::string(OpcodeName(instr.opcode())) + ")",
                       instr.loc());
}

// Shape of result element `i` of a collective with `n` operands: variadic
// collectives return a tuple, one element per operand.
const Shape* ResultShape(const Instruction& instr, size_t i, size_t n) {
  const Shape& s = instr.shape();
  if (s.IsTuple()) {
    if (i >= static_cast<size_t>(s.tuple_size())) return nullptr;
    return &s.tuple_shapes(static_cast<int>(i));
  }
  return n == 1 ? &s : nullptr;
}

StatusOr<Literal> Package(const Instruction& instr, std::vector<Literal> results) {
  if (instr.shape().IsTuple()) return Literal::MakeTuple(std::move(results));
  return std::move(results[0]);
}

Status CheckArrayOperand(const Instruction& instr, const Literal* op, size_t i) {
  if (op == nullptr || !op->shape().IsArray())
    return InstrError(instr, "operand " + std::to_string(i) + " is not an array");
  return Status::Ok();
}

Literal FreshResult(const Shape& shape) {
  Shape s = shape;
  s.set_layout(std::nullopt);
  return Literal(s);
}

// Errors unless dim `dim` of `shape` exists and splits into `g` equal blocks
// (reduce-scatter, all-to-all).
Status CheckSplits(const Instruction& instr, const Shape& shape, int64_t dim, int64_t g) {
  if (dim < 0 || dim >= shape.rank() || shape.dimensions(dim) % g != 0)
    return InstrError(instr, std::string(OpcodeName(instr.opcode())) + " dimension " +
                                 std::to_string(dim) + " of " + shape.ToString(false) +
                                 " does not split into " + std::to_string(g) + " blocks");
  return Status::Ok();
}

// A collective applied operand by operand (variadic forms return a tuple,
// one element per operand). For operand i, `expect(in)` gives the shape its
// result must have (or an error for an operand the op cannot take), which
// must be declared result element i; `run(in, out)` fills the result
// through the communicator.
template <typename Expect, typename Run>
StatusOr<Literal> EachOperand(const Instruction& instr,
                              const std::vector<const Literal*>& operands, Expect expect,
                              Run run) {
  std::vector<Literal> results;
  for (size_t i = 0; i < operands.size(); ++i) {
    MS_RETURN_IF_ERROR(CheckArrayOperand(instr, operands[i], i));
    const Literal& in = *operands[i];
    MS_ASSIGN_OR_RETURN(const Shape want, expect(in));
    const Shape* rs = ResultShape(instr, i, operands.size());
    if (rs == nullptr || !rs->Compatible(want))
      return InstrError(instr, "operand " + std::to_string(i) + " " + in.shape().ToString(false) +
                                   " yields " + want.ToString(false) +
                                   ", not the declared result shape");
    Literal out = FreshResult(*rs);
    Status s = run(in, out);
    if (!s.ok()) return InstrError(instr, s.message());
    results.push_back(std::move(out));
  }
  return Package(instr, std::move(results));
}

}  // namespace

std::optional<ReductionKind> ClassifyReduction(const Computation* c) {
  if (c == nullptr || c->parameter_count() != 2 || c->root() == nullptr)
    return std::nullopt;
  const Instruction* root = c->root();
  if (root->operand_count() != 2) return std::nullopt;
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if (a->opcode() != Opcode::kParameter || b->opcode() != Opcode::kParameter ||
      a == b)
    return std::nullopt;
  if (!root->shape().IsArray() || root->shape().rank() != 0) return std::nullopt;
  switch (root->opcode()) {
    case Opcode::kAdd: return ReductionKind::kAdd;
    case Opcode::kMultiply: return ReductionKind::kMul;
    case Opcode::kMinimum: return ReductionKind::kMin;
    case Opcode::kMaximum: return ReductionKind::kMax;
    case Opcode::kAnd: return ReductionKind::kAnd;
    case Opcode::kOr: return ReductionKind::kOr;
    case Opcode::kXor: return ReductionKind::kXor;
    default: return std::nullopt;
  }
}

CommGroups GroupsOf(const Instruction& instr) {
  const auto& rg = instr.attrs().replica_groups;
  if (!rg.has_value() || rg->empty()) return {};
  return rg->Expand();
}

StatusOr<int64_t> CollectiveAdapter::GroupSize(const Instruction& instr,
                                               const CommGroups& groups,
                                               bool require_equal_sizes) {
  if (groups.empty()) return comm_.num_devices();
  StatusOr<GroupMembership> m =
      FindGroup(groups, comm_.num_devices(), comm_.device(),
                OpcodeName(instr.opcode()), require_equal_sizes);
  if (!m.ok()) return InstrError(instr, m.status().message());
  return static_cast<int64_t>(m->members.size());
}

std::optional<StatusOr<Literal>> CollectiveAdapter::SingleReplica(
    const Instruction& instr, const std::vector<const Literal*>& operands) {
  if (!single_replica_ || instr.attrs().channel_id.has_value() ||
      instr.attrs().use_global_device_ids)
    return std::nullopt;
  std::vector<Literal> results;
  for (size_t i = 0; i < operands.size(); ++i) {
    Status st = CheckArrayOperand(instr, operands[i], i);
    if (!st.ok()) return StatusOr<Literal>(st);
    const Shape* rs = ResultShape(instr, i, operands.size());
    if (rs == nullptr || !rs->Compatible(operands[i]->shape()))
      return StatusOr<Literal>(InstrError(
          instr, "a cross-replica collective (no channel_id) with one replica must keep its "
                 "operand's shape " + operands[i]->shape().ToString(false)));
    if (instr.opcode() == Opcode::kCollectivePermute) {
      bool self = false;
      for (const auto& [src, dst] : instr.attrs().source_target_pairs) self |= src == 0 && dst == 0;
      results.push_back(self ? *operands[i] : FreshResult(*rs));
    } else {
      results.push_back(*operands[i]);
    }
  }
  return Package(instr, std::move(results));
}

StatusOr<Literal> CollectiveAdapter::AllReduce(const Instruction& instr,
                                               const std::vector<const Literal*>& operands,
                                               const EvalContext& ctx) {
  if (auto r = SingleReplica(instr, operands)) return std::move(*r);
  std::optional<ReductionKind> kind = ClassifyReduction(instr.to_apply());
  if (!kind.has_value())
    return InstrError(instr,
                      "all-reduce computation " +
                          (instr.to_apply() ? instr.to_apply()->name() : std::string("<none>")) +
                          " is not a plain add/multiply/minimum/maximum/and/or/xor of its "
                          "parameters");
  CommGroups groups = GroupsOf(instr);
  MS_RETURN_IF_ERROR(GroupSize(instr, groups, /*require_equal_sizes=*/false).status());
  return EachOperand(
      instr, operands, [](const Literal& in) -> StatusOr<Shape> { return in.shape(); },
      [&](const Literal& in, Literal& out) {
        return comm_.AllReduce(in.raw(), out.raw(), in.element_type(), in.element_count(), *kind,
                               groups);
      });
}

StatusOr<Literal> CollectiveAdapter::AllGather(const Instruction& instr,
                                               const std::vector<const Literal*>& operands,
                                               const EvalContext& ctx) {
  if (auto r = SingleReplica(instr, operands)) return std::move(*r);
  if (instr.attrs().dimensions.size() != 1)
    return InstrError(instr, "all-gather needs exactly one dimension");
  int64_t dim = instr.attrs().dimensions[0];
  CommGroups groups = GroupsOf(instr);
  MS_ASSIGN_OR_RETURN(int64_t g, GroupSize(instr, groups, /*require_equal_sizes=*/true));
  return EachOperand(
      instr, operands,
      [&](const Literal& in) -> StatusOr<Shape> {
        if (dim < 0 || dim >= in.shape().rank())
          return InstrError(instr, "all-gather dimension " + std::to_string(dim) +
                                       " out of range for " + in.shape().ToString(false));
        Shape expect(in.element_type(), in.shape().dimensions());
        expect.mutable_dimensions()[dim] *= g;
        return expect;
      },
      [&](const Literal& in, Literal& out) {
        return comm_.AllGather(in.raw(), out.raw(), in.element_type(), in.shape().dimensions(),
                               dim, groups);
      });
}

StatusOr<Literal> CollectiveAdapter::ReduceScatter(const Instruction& instr,
                                                   const std::vector<const Literal*>& operands,
                                                   const EvalContext& ctx) {
  if (auto r = SingleReplica(instr, operands)) return std::move(*r);
  std::optional<ReductionKind> kind = ClassifyReduction(instr.to_apply());
  if (!kind.has_value())
    return InstrError(instr, "reduce-scatter computation is not a plain "
                             "add/multiply/minimum/maximum/and/or/xor of its parameters");
  if (instr.attrs().dimensions.size() != 1)
    return InstrError(instr, "reduce-scatter needs exactly one dimension");
  int64_t dim = instr.attrs().dimensions[0];
  CommGroups groups = GroupsOf(instr);
  MS_ASSIGN_OR_RETURN(int64_t g, GroupSize(instr, groups, /*require_equal_sizes=*/true));
  return EachOperand(
      instr, operands,
      [&](const Literal& in) -> StatusOr<Shape> {
        MS_RETURN_IF_ERROR(CheckSplits(instr, in.shape(), dim, g));
        Shape expect(in.element_type(), in.shape().dimensions());
        expect.mutable_dimensions()[dim] /= g;
        return expect;
      },
      [&](const Literal& in, Literal& out) {
        return comm_.ReduceScatter(in.raw(), out.raw(), in.element_type(),
                                   in.shape().dimensions(), dim, *kind, groups);
      });
}

StatusOr<Literal> CollectiveAdapter::AllToAll(const Instruction& instr,
                                              const std::vector<const Literal*>& operands,
                                              const EvalContext& ctx) {
  if (auto r = SingleReplica(instr, operands)) return std::move(*r);
  CommGroups groups = GroupsOf(instr);
  MS_ASSIGN_OR_RETURN(int64_t g, GroupSize(instr, groups, /*require_equal_sizes=*/true));
  for (size_t i = 0; i < operands.size(); ++i)
    MS_RETURN_IF_ERROR(CheckArrayOperand(instr, operands[i], i));
  if (!instr.attrs().dimensions.empty()) {
    // Array form, applied to each operand.
    int64_t dim = instr.attrs().dimensions[0];
    return EachOperand(
        instr, operands,
        [&](const Literal& in) -> StatusOr<Shape> {
          MS_RETURN_IF_ERROR(CheckSplits(instr, in.shape(), dim, g));
          return in.shape();
        },
        [&](const Literal& in, Literal& out) {
          return comm_.AllToAll(in.raw(), out.raw(), in.element_type(), in.shape().dimensions(),
                                dim, dim, groups);
        });
  }
  // Tuple form: G operands of one shape; output j is member j's input r.
  if (static_cast<int64_t>(operands.size()) != g)
    return InstrError(instr, "tuple all-to-all has " + std::to_string(operands.size()) +
                                 " operands but its groups have " + std::to_string(g) +
                                 " devices");
  const Shape& s0 = operands[0]->shape();
  std::vector<const void*> ins;
  std::vector<Literal> results;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i]->shape().Compatible(s0))
      return InstrError(instr, "tuple all-to-all operands differ in shape");
    ins.push_back(operands[i]->raw());
    const Shape* rs = ResultShape(instr, i, operands.size());
    if (rs == nullptr || !rs->Compatible(s0))
      return InstrError(instr, "tuple all-to-all result element " + std::to_string(i) +
                                   " differs from the operands' shape");
    results.push_back(FreshResult(*rs));
  }
  std::vector<void*> outs;
  for (Literal& l : results) outs.push_back(l.raw());
  Status st = comm_.AllToAllTuple(ins, outs, s0.element_type(), s0.ElementCount(), groups);
  if (!st.ok()) return InstrError(instr, st.message());
  return Package(instr, std::move(results));
}

StatusOr<Literal> CollectiveAdapter::CollectivePermute(
    const Instruction& instr, const std::vector<const Literal*>& operands,
    const EvalContext& ctx) {
  if (auto r = SingleReplica(instr, operands)) return std::move(*r);
  const SourceTargetPairs& pairs = instr.attrs().source_target_pairs;
  return EachOperand(
      instr, operands, [](const Literal& in) -> StatusOr<Shape> { return in.shape(); },
      [&](const Literal& in, Literal& out) {
        return comm_.CollectivePermute(in.raw(), out.raw(), in.element_type(),
                                       in.element_count(), pairs);
      });
}

}  // namespace meshsplit
