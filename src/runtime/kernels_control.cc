// Kernels of the remaining ops: rng and rng-bit-generator (deterministic,
// seeded generators), the sharding custom-calls (identity on one device) and
// collectives, which go to EvalContext::collectives or, with none, follow the
// single-device semantics (every group has one participant).
#include <cmath>
#include <cstring>
#include <random>

#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Literal CopyOf(KernelArgs& k, int i) {
  if (k.donatable[i]) return std::move(*k.ops[i]);
  return *k.ops[i];
}

// The single-device result of a collective whose group is just this device:
// its operand(s) unchanged. Shapes must agree, else the module was
// partitioned for more devices than it is being run on.
StatusOr<Literal> IdentityCollective(KernelArgs& k) {
  std::vector<Literal> outs;
  for (size_t i = 0; i < k.ops.size(); ++i) outs.push_back(CopyOf(k, static_cast<int>(i)));
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

StatusOr<Literal> EvalRng(KernelArgs& k) {
  const Instruction& instr = k.instr;
  PrimitiveType t = instr.shape().element_type();
  if (k.op(0).element_count() != 1 || k.op(1).element_count() != 1)
    return InstrError(instr, "rng bounds must be scalars");
  double a = k.op(0).GetDouble(0), b = k.op(1).GetDouble(0);
  Literal out(instr.shape());
  int64_t n = out.element_count();
  auto& gen = k.interp.rng();
  const std::string& dist = instr.attrs().rng_distribution;
  if (dist == "rng_normal") {
    if (!IsFloatingPoint(t)) return InstrError(instr, "rng_normal needs a floating-point type");
    std::normal_distribution<double> nd(a, b);
    for (int64_t i = 0; i < n; ++i) out.SetDouble(i, nd(gen));
  } else if (dist == "rng_uniform" || dist.empty()) {
    if (IsFloatingPoint(t)) {
      if (!(a < b)) return InstrError(instr, "rng_uniform needs a < b");
      std::uniform_real_distribution<double> ud(a, b);
      for (int64_t i = 0; i < n; ++i) {
        double v = ud(gen);
        out.SetDouble(i, v);
        // Rounding to a narrow type can land on b; keep the interval open.
        if (out.GetDouble(i) >= b) out.SetDouble(i, a);
      }
    } else if (IsInteger(t)) {
      int64_t lo = k.op(0).GetInt(0), hi = k.op(1).GetInt(0);
      if (!(lo < hi)) return InstrError(instr, "rng_uniform needs a < b");
      std::uniform_int_distribution<int64_t> ud(lo, hi - 1);
      for (int64_t i = 0; i < n; ++i) out.SetInt(i, ud(gen));
    } else if (t == PrimitiveType::PRED) {
      for (int64_t i = 0; i < n; ++i) out.data<uint8_t>()[i] = gen() & 1;
    } else {
      return InstrError(instr, "rng does not support this element type");
    }
  } else {
    return InstrError(instr, "unknown rng distribution '" + dist + "'");
  }
  return out;
}

StatusOr<Literal> EvalRngBitGenerator(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const Literal& state = k.op(0);
  if (!instr.shape().IsTuple() || instr.shape().tuple_size() != 2 ||
      state.element_type() != PrimitiveType::U64 || state.element_count() < 1)
    return InstrError(instr, "rng-bit-generator takes a u64 state and returns (state, bits)");
  // A counter-based generator: word i = SplitMix64(key ^ SplitMix64(counter
  // + i)). Deterministic for a given state, but not XLA's Philox/ThreeFry
  // bit stream.
  uint64_t key = state.data<uint64_t>()[0];
  uint64_t counter = state.element_count() > 1 ? state.data<uint64_t>()[1] : 0;
  Literal bits(instr.shape().tuple_shapes(1));
  int64_t bytes = bits.size_bytes();
  int64_t words = (bytes + 7) / 8;
  for (int64_t w = 0; w < words; ++w) {
    uint64_t v = SplitMix64(key ^ SplitMix64(counter + static_cast<uint64_t>(w)));
    int64_t m = std::min<int64_t>(8, bytes - w * 8);
    std::memcpy(bits.raw() + w * 8, &v, m);
  }
  if (bits.element_type() == PrimitiveType::PRED)
    for (int64_t i = 0; i < bits.element_count(); ++i) bits.data<uint8_t>()[i] &= 1;
  Literal new_state = state;
  if (new_state.element_count() > 1) new_state.data<uint64_t>()[1] = counter + words;
  else new_state.data<uint64_t>()[0] = SplitMix64(key + words);
  std::vector<Literal> outs;
  outs.push_back(std::move(new_state));
  outs.push_back(std::move(bits));
  return Literal::MakeTuple(std::move(outs));
}

StatusOr<Literal> EvalCustomCall(KernelArgs& k) {
  const std::string& target = k.instr.attrs().custom_call_target;
  if (target == "Sharding" || target == "SPMDFullToShardShape" || target == "SPMDShardToFullShape") {
    if (k.ops.size() != 1) return InstrError(k.instr, "custom-call " + target + " takes one operand");
    if (!k.op(0).shape().Compatible(k.shape()))
      return InstrError(k.instr, "custom-call " + target + " changes the shape from " +
                                     k.op(0).shape().ToString(false) + " to " + k.shape().ToString(false) +
                                     ", which needs the SPMD partitioner");
    return CopyOf(k, 0);
  }
  return InstrError(k.instr, "custom-call target \"" + target + "\" is not supported by the interpreter");
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
