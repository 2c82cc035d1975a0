// Kernels of send / recv and their -done ops, collective-broadcast,
// ragged-all-to-all, set-dimension-size and dynamic-reshape.
//
// The transfers and the two group collectives are built on the one
// collective the backends already provide, all-reduce: a device "gathers"
// its group's values by placing its bytes at its position in a zeroed
// buffer and or-reducing the buffers bytewise (exact for every element
// type). send does its exchange when it runs (a collective-permute over the
// pairs of its _xla_send_recv_source_target_pairs frontend attribute, or a
// loopback to the same device when the attribute is absent) and leaves the
// received value in the interpreter's mailbox under its channel id, where
// the recv-done of that channel picks it up. Host transfers
// (is_host_transfer=true) are refused with an error at the instruction.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/shape_inference_p2p.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {

namespace {

Literal U32Zero() { return Literal(Shape(PrimitiveType::U32, {})); }

// A two-parameter scalar reducer `op`, as ClassifyReduction reads it.
std::unique_ptr<Computation> Reducer(Opcode op, PrimitiveType t) {
  auto c = std::make_unique<Computation>(std::string(OpcodeName(op)) + "_reducer");
  auto p0 = std::make_unique<Instruction>(Opcode::kParameter, "a", Shape(t, {}));
  auto p1 = std::make_unique<Instruction>(Opcode::kParameter, "b", Shape(t, {}));
  p1->mutable_attrs().parameter_number = 1;
  Instruction* a = c->AddInstruction(std::move(p0));
  Instruction* b = c->AddInstruction(std::move(p1));
  auto r = std::make_unique<Instruction>(op, "r", Shape(t, {}));
  r->AppendOperand(a);
  r->AppendOperand(b);
  c->set_root(c->AddInstruction(std::move(r)));
  return c;
}

// An all-reduce over `instr`'s groups and channel (so a backend reads the
// same devices it would for `instr`) of `x` with `reducer`.
StatusOr<Literal> GroupAllReduce(const Instruction& instr, const Literal& x,
                                 Computation* reducer, const EvalContext& ctx) {
  Instruction ar(Opcode::kAllReduce, instr.name(), x.shape());
  Attributes& a = ar.mutable_attrs();
  a.replica_groups = instr.attrs().replica_groups;
  a.channel_id = instr.attrs().channel_id;
  a.use_global_device_ids = instr.attrs().use_global_device_ids;
  ar.set_called_computations({reducer});
  ar.set_loc(instr.loc());
  StatusOr<Literal> r = ctx.collectives->AllReduce(ar, {&x}, ctx);
  if (!r.ok() && !r.status().loc().known()) return InstrError(instr, r.status().message());
  return r;
}

// The values of `x` on every member of this device's group, in group order
// (just `x` on a single device or where the collective reaches only this
// device), and this device's position among them.
struct GroupValues {
  std::vector<Literal> values;
  int64_t position = 0;
};

StatusOr<GroupValues> GatherGroup(const Instruction& instr, const Literal& x,
                                  const EvalContext& ctx) {
  GroupValues out;
  if (ctx.collectives == nullptr) {
    out.values.push_back(x);
    return out;
  }
  // The group size as the backend sees it (1 where it runs each device alone).
  std::unique_ptr<Computation> add = Reducer(Opcode::kAdd, PrimitiveType::S64);
  Literal one(Shape(PrimitiveType::S64, {}));
  one.data<int64_t>()[0] = 1;
  MS_ASSIGN_OR_RETURN(Literal count, GroupAllReduce(instr, one, add.get(), ctx));
  const int64_t g = count.data<int64_t>()[0];
  if (g > 1) {
    const std::optional<ReplicaGroups>& rg = instr.attrs().replica_groups;
    if (rg.has_value() && !rg->empty()) {
      out.position = -1;
      for (const std::vector<int64_t>& group : rg->Expand())
        for (size_t i = 0; i < group.size(); ++i)
          if (group[i] == ctx.partition_id) out.position = static_cast<int64_t>(i);
      if (out.position < 0)
        return InstrError(instr, "device " + std::to_string(ctx.partition_id) +
                                     " is in none of the replica groups");
    } else {
      out.position = ctx.partition_id;
    }
  }
  if (out.position >= g) return InstrError(instr, "inconsistent replica groups");
  const int64_t bytes = x.size_bytes();
  Literal buf(Shape(PrimitiveType::U8, {g * bytes}));
  if (bytes > 0) std::memcpy(buf.raw() + out.position * bytes, x.raw(), bytes);
  std::unique_ptr<Computation> bit_or = Reducer(Opcode::kOr, PrimitiveType::U8);
  MS_ASSIGN_OR_RETURN(Literal all, GroupAllReduce(instr, buf, bit_or.get(), ctx));
  for (int64_t i = 0; i < g; ++i) {
    Literal v(x.shape());
    if (bytes > 0) std::memcpy(v.raw(), all.raw() + i * bytes, bytes);
    out.values.push_back(std::move(v));
  }
  return out;
}

StatusOr<Literal> EvalCollectiveBroadcast(KernelArgs& k) {
  std::vector<Literal> results;
  for (size_t i = 0; i < k.ops.size(); ++i) {
    if (!k.op(i).shape().IsArray())
      return InstrError(k.instr, "collective-broadcast operand is not an array");
    MS_ASSIGN_OR_RETURN(GroupValues g, GatherGroup(k.instr, k.op(i), k.interp.ctx()));
    results.push_back(std::move(g.values[0]));  // the group's first member sends
  }
  if (!k.shape().IsTuple()) return std::move(results[0]);
  return Literal::MakeTuple(std::move(results));
}

StatusOr<Literal> EvalRaggedAllToAll(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const EvalContext& ctx = k.interp.ctx();
  const Literal& input = k.op(0);
  Literal out = k.op(1);  // rows nobody writes keep the output operand's values
  const int64_t row_bytes =
      input.shape().rank() == 0 ? 0 : input.size_bytes() / std::max<int64_t>(1, input.shape().dimensions(0));
  const int64_t in_rows = input.shape().dimensions(0);
  const int64_t out_rows = out.shape().dimensions(0);
  MS_ASSIGN_OR_RETURN(GroupValues inputs, GatherGroup(instr, input, ctx));
  MS_ASSIGN_OR_RETURN(GroupValues in_offsets, GatherGroup(instr, k.op(2), ctx));
  MS_ASSIGN_OR_RETURN(GroupValues send_sizes, GatherGroup(instr, k.op(3), ctx));
  MS_ASSIGN_OR_RETURN(GroupValues out_offsets, GatherGroup(instr, k.op(4), ctx));
  const int64_t g = static_cast<int64_t>(inputs.values.size());
  const int64_t r = inputs.position;
  const int64_t updates = k.op(2).element_count();
  if (updates % g != 0)
    return InstrError(instr, "ragged-all-to-all has " + std::to_string(updates) +
                                 " updates, not a multiple of the group size " + std::to_string(g));
  const int64_t per_peer = updates / g;
  // Sender j's updates for the member at position r are its entries
  // r*per_peer .. r*per_peer+per_peer-1; their output offsets are positions
  // in the receiver's output.
  for (int64_t j = 0; j < g; ++j) {
    for (int64_t u = 0; u < per_peer; ++u) {
      const int64_t idx = r * per_peer + u;
      const int64_t src = in_offsets.values[j].GetInt(idx);
      const int64_t n = send_sizes.values[j].GetInt(idx);
      const int64_t dst = out_offsets.values[j].GetInt(idx);
      if (n < 0 || src < 0 || dst < 0 || src + n > in_rows || dst + n > out_rows)
        return InstrError(instr, "update " + std::to_string(idx) + " from group member " +
                                     std::to_string(j) + " (offset " + std::to_string(src) +
                                     ", size " + std::to_string(n) + ", output offset " +
                                     std::to_string(dst) + ") is out of bounds (input rows " +
                                     std::to_string(in_rows) + ", output rows " +
                                     std::to_string(out_rows) + ")");
      if (n > 0)
        std::memcpy(out.raw() + dst * row_bytes, inputs.values[j].raw() + src * row_bytes,
                    n * row_bytes);
    }
  }
  return out;
}

int64_t ChannelOf(const Instruction& instr) {
  if (instr.attrs().channel_id) return *instr.attrs().channel_id;
  if (instr.operand_count() > 0 && instr.operand(0)->attrs().channel_id)
    return *instr.operand(0)->attrs().channel_id;
  return 0;
}

StatusOr<Literal> EvalSend(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const EvalContext& ctx = k.interp.ctx();
  if (IsHostTransfer(instr))
    return InstrError(instr, "host transfers (is_host_transfer=true) are not supported by the interpreter");
  const Literal& data = k.op(0);
  StatusOr<std::optional<std::vector<std::pair<int64_t, int64_t>>>> pairs =
      SendRecvSourceTargetPairs(instr);
  if (!pairs.ok()) return InstrError(instr, pairs.status().message());
  Literal received;
  if (!pairs->has_value()) {
    received = data;  // no pairs: each device receives its own data
  } else if (!data.shape().IsArray()) {
    return InstrError(instr, "send with source-target pairs needs array data");
  } else if (ctx.collectives != nullptr) {
    Instruction cp(Opcode::kCollectivePermute, instr.name(), data.shape());
    cp.mutable_attrs().source_target_pairs = **pairs;
    cp.mutable_attrs().channel_id = ChannelOf(instr);
    cp.set_loc(instr.loc());
    StatusOr<Literal> r = ctx.collectives->CollectivePermute(cp, {&data}, ctx);
    if (!r.ok()) return r.status().loc().known() ? r.status() : InstrError(instr, r.status().message());
    received = std::move(r).value();
  } else {
    received = Literal(data.shape());  // no pair targets this device: zeros
    for (const auto& [src, dst] : **pairs) {
      if (dst != ctx.partition_id) continue;
      if (src != ctx.partition_id)
        return InstrError(instr, "receives from device " + std::to_string(src) +
                                     ", but the interpreter runs a single device");
      received = data;
    }
  }
  k.interp.mailbox()[ChannelOf(instr)] = std::move(received);
  std::vector<Literal> parts;
  parts.push_back(data);
  parts.push_back(U32Zero());
  parts.push_back(Literal(Shape::Token()));
  return Literal::MakeTuple(std::move(parts));
}

StatusOr<Literal> EvalRecvDone(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const int64_t channel = ChannelOf(instr);
  auto& box = k.interp.mailbox();
  auto it = box.find(channel);
  if (it == box.end())
    return InstrError(instr, "no send on channel " + std::to_string(channel) +
                                 " has run before this recv-done");
  Literal data = std::move(it->second);
  box.erase(it);
  if (!k.shape().IsTuple() || k.shape().tuple_size() != 2 ||
      !data.shape().Compatible(k.shape().tuple_shapes(0)))
    return InstrError(instr, "the send on channel " + std::to_string(channel) + " sent " +
                                 data.shape().ToString(false) + ", not the received shape " +
                                 k.shape().ToString(false));
  std::vector<Literal> parts;
  parts.push_back(std::move(data));
  parts.push_back(Literal(Shape::Token()));
  return Literal::MakeTuple(std::move(parts));
}

}  // namespace

StatusOr<Literal> EvalP2POrDynamicSize(KernelArgs& k) {
  const Instruction& instr = k.instr;
  switch (instr.opcode()) {
    case Opcode::kSend:
      return EvalSend(k);
    case Opcode::kRecv: {
      if (IsHostTransfer(instr))
        return InstrError(instr, "host transfers (is_host_transfer=true) are not supported by the interpreter");
      if (!k.shape().IsTuple() || k.shape().tuple_size() != 3)
        return InstrError(instr, "recv must return (data, u32[], token[])");
      std::vector<Literal> parts;
      parts.push_back(Literal(k.shape().tuple_shapes(0)));  // filled by recv-done
      parts.push_back(U32Zero());
      parts.push_back(Literal(Shape::Token()));
      return Literal::MakeTuple(std::move(parts));
    }
    case Opcode::kSendDone:
      return Literal(Shape::Token());
    case Opcode::kRecvDone:
      return EvalRecvDone(k);
    case Opcode::kCollectiveBroadcast:
      return EvalCollectiveBroadcast(k);
    case Opcode::kRaggedAllToAll:
      return EvalRaggedAllToAll(k);
    case Opcode::kSetDimensionSize: {
      // Our shapes keep the static bound: the value is unchanged (XLA's
      // evaluator copies it too; only the dynamic size changes).
      Literal out = k.op(0);
      return out;
    }
    case Opcode::kDynamicReshape: {
      // Sizes are static bounds here, so this is a reshape of all elements.
      if (!k.op(0).shape().IsArray() || k.op(0).element_count() != k.shape().ElementCount())
        return InstrError(instr, "dynamic-reshape operand and result hold different element counts");
      Literal out = Literal::Uninitialized(Shape(k.shape().element_type(), k.shape().dimensions()));
      if (out.size_bytes() > 0) std::memcpy(out.raw(), k.op(0).raw(), out.size_bytes());
      return out;
    }
    default:
      return InstrError(instr, "internal: not a point-to-point or dynamic-size op");
  }
}

}  // namespace meshsplit::interp
