// Differential verification: random inputs, reference run, SPMD run,
// tolerance-aware comparison and divergence localisation.
//
// Divergence localisation relies on one naming convention of the
// partitioner: an instruction of the partitioned entry that has the same
// name as an instruction X of the original entry holds X's value laid out by
// X's sharding (in the original module after propagation), i.e. its
// per-device shape is the tile shape of X. Instructions with other names
// (partial sums, resharding steps) are ignored, and so are same-named values
// that feed an all-reduce / reduce-scatter (partial sums the partitioner left
// under the original name). Values that cannot be compared that way (tuples,
// manual shardings, shape mismatches) are skipped.
#include "verify/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include "ir/computation.h"
#include "ir/verifier.h"
#include "runtime/interpreter.h"
#include "runtime/device_layout.h"
#include "runtime/executor.h"
#include "runtime/reference.h"

#include "collectives/threads_backend.h"
#include "compiler/compile.h"

namespace meshsplit {
namespace {

// The interpreter context of a one-device run under `options`.
EvalContext OneDeviceContext(const VerifyOptions& options) {
  EvalContext ctx;
  ctx.stub_opaque_custom_calls = options.stub_opaque_custom_calls;
  ctx.max_while_iterations = options.max_while_iterations;
  return ctx;
}

// `run` with the interpreter settings of `options` (stubs, loop limit), so
// that both programs run under the same rules.
SpmdRunOptions WithVerifyRunOptions(SpmdRunOptions run, const VerifyOptions& options) {
  run.stub_opaque_custom_calls = options.stub_opaque_custom_calls;
  run.max_while_iterations = options.max_while_iterations;
  return run;
}

void FillRandom(Literal& lit, std::mt19937_64& rng) { FillRandomValues(lit, rng); }

double Epsilon(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::F16: return 9.765625e-4;
    case PrimitiveType::BF16: return 7.8125e-3;
    case PrimitiveType::F64: return 2.220446049250313e-16;
    default: return 1.1920928955078125e-7;
  }
}

std::string IndexString(const std::vector<int64_t>& dims, int64_t linear) {
  std::vector<int64_t> idx(dims.size());
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    if (dims[i] > 0) {
      idx[i] = linear % dims[i];
      linear /= dims[i];
    }
  }
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? "," : "") + std::to_string(idx[i]);
  return s + "]";
}

std::string FormatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void CompareArrays(const Literal& ref, const Literal& got, const std::string& what,
                   const CompareOptions& options, Comparison& out) {
  if (!ref.shape().IsArray()) return;
  if (!got.shape().IsArray() || !ref.shape().Compatible(got.shape())) {
    out.ok = false;
    out.mismatches++;
    if (out.first_mismatch.empty())
      out.first_mismatch = what + ": shape " + got.shape().ToString(false) + ", expected " +
                           ref.shape().ToString(false);
    return;
  }
  PrimitiveType t = ref.element_type();
  int64_t n = ref.element_count();
  const std::vector<int64_t>& dims = ref.shape().dimensions();
  auto record = [&](int64_t i, const std::string& g, const std::string& e) {
    out.ok = false;
    out.mismatches++;
    if (out.first_mismatch.empty())
      out.first_mismatch = what + IndexString(dims, i) + ": got " + g + ", expected " + e;
  };
  if (IsComplex(t)) {
    // Real and imaginary parts compare as floats of the component type (a
    // trailing index 0/1 in messages), so partial sums added in another
    // order stay within tolerance as they do for real values.
    const PrimitiveType part = t == PrimitiveType::C64 ? PrimitiveType::F32 : PrimitiveType::F64;
    std::vector<int64_t> part_dims = dims;
    part_dims.push_back(2);
    Literal ref_parts(Shape(part, part_dims)), got_parts(Shape(part, part_dims));
    std::memcpy(ref_parts.raw(), ref.raw(), ref.size_bytes());
    std::memcpy(got_parts.raw(), got.raw(), got.size_bytes());
    CompareArrays(ref_parts, got_parts, what, options, out);
    return;
  }
  bool is_float = t == PrimitiveType::F16 || t == PrimitiveType::BF16 ||
                  t == PrimitiveType::F32 || t == PrimitiveType::F64;
  if (!is_float) {
    int64_t w = ByteWidth(t);
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(ref.raw() + i * w, got.raw() + i * w, w) == 0) continue;
      if (IsUnsignedInteger(t))
        record(i, std::to_string(got.GetUint(i)), std::to_string(ref.GetUint(i)));
      else if (IsInteger(t) || t == PrimitiveType::PRED)
        record(i, std::to_string(got.GetInt(i)), std::to_string(ref.GetInt(i)));
      else
        record(i, "(bits differ)", "(reference bits)");
    }
    return;
  }
  double max_ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    double r = ref.GetDouble(i);
    if (std::isfinite(r)) max_ref = std::max(max_ref, std::fabs(r));
  }
  double tol = options.factor * Epsilon(t) *
               std::sqrt(static_cast<double>(std::max<int64_t>(1, options.reduction_length)));
  double atol = tol * std::max(1.0, max_ref);
  for (int64_t i = 0; i < n; ++i) {
    double r = ref.GetDouble(i), g = got.GetDouble(i);
    if (std::isnan(r) || std::isnan(g)) {
      if (std::isnan(r) != std::isnan(g)) record(i, FormatDouble(g), FormatDouble(r));
      continue;
    }
    if (std::isinf(r) || std::isinf(g)) {
      if (r != g) record(i, FormatDouble(g), FormatDouble(r));
      continue;
    }
    double err = std::fabs(g - r);
    out.max_abs_error = std::max(out.max_abs_error, err);
    out.max_rel_error = std::max(out.max_rel_error, err / std::max(std::fabs(r), 1e-30));
    if (err > tol * std::fabs(r) + atol) record(i, FormatDouble(g), FormatDouble(r));
  }
}

void CompareRec(const Literal& ref, const Literal& got, const std::string& what,
                const CompareOptions& options, Comparison& out) {
  if (ref.shape().IsTuple()) {
    if (!got.shape().IsTuple() || got.elements().size() != ref.elements().size()) {
      out.ok = false;
      out.mismatches++;
      if (out.first_mismatch.empty())
        out.first_mismatch = what + ": got " + got.shape().ToString(false) + ", expected " +
                             ref.shape().ToString(false);
      return;
    }
    for (size_t i = 0; i < ref.elements().size(); ++i)
      CompareRec(ref.elements()[i], got.elements()[i], what + "{" + std::to_string(i) + "}",
                 options, out);
    return;
  }
  CompareArrays(ref, got, what, options, out);
}

int64_t Product(const std::vector<int64_t>& dims, const std::vector<int64_t>& which) {
  int64_t p = 1;
  for (int64_t d : which)
    if (d >= 0 && d < static_cast<int64_t>(dims.size())) p *= dims[d];
  return p;
}

// Splits `inputs` for the partitioned entry's parameters.
StatusOr<std::vector<std::vector<Literal>>> SplitInputs(const Module& partitioned,
                                                        const std::vector<Literal>& inputs,
                                                        int64_t n) {
  const Computation* entry = partitioned.entry();
  if (static_cast<int>(inputs.size()) != entry->parameter_count())
    return Status::Error("the partitioned entry takes " +
                         std::to_string(entry->parameter_count()) +
                         " parameters but the original takes " + std::to_string(inputs.size()));
  std::vector<std::vector<Literal>> args(n);
  for (int p = 0; p < entry->parameter_count(); ++p) {
    const Instruction* param = entry->parameter(p);
    if (param == nullptr) return Status::Error("parameter " + std::to_string(p) + " is missing");
    StatusOr<std::vector<Literal>> parts = SplitByShardings(
        inputs[p], param->shape(), ShardingOrReplicated(*param), n, /*poison_padding=*/true);
    if (!parts.ok())
      return Status::Error("parameter " + std::to_string(p) + " (%" + param->name() +
                           "): " + parts.status().message());
    for (int64_t d = 0; d < n; ++d) args[d].push_back(std::move((*parts)[d]));
  }
  return args;
}

// Temporarily makes a tuple of `values` the root of `comp`.
class ProbeRoot {
 public:
  ProbeRoot(Module& module, Computation& comp, const std::vector<Instruction*>& values)
      : comp_(comp), old_root_(comp.root()) {
    std::vector<Shape> shapes;
    for (Instruction* v : values) shapes.push_back(v->shape());
    auto t = std::make_unique<Instruction>(
        Opcode::kTuple, module.UniqueInstructionName("verify.probe"), Shape::Tuple(shapes));
    for (Instruction* v : values) t->AppendOperand(v);
    probe_ = comp.AddInstruction(std::move(t));
    comp.set_root(probe_);
  }
  ~ProbeRoot() {
    comp_.set_root(old_root_);
    comp_.RemoveInstruction(probe_);
  }

 private:
  Computation& comp_;
  Instruction* old_root_;
  Instruction* probe_;
};

double MaxAbs(const Literal& v) {
  double m = 0;
  if (!v.shape().IsArray()) return m;
  PrimitiveType t = v.element_type();
  if (t != PrimitiveType::F16 && t != PrimitiveType::BF16 && t != PrimitiveType::F32 &&
      t != PrimitiveType::F64)
    return m;
  for (int64_t i = 0; i < v.element_count(); ++i) {
    double x = v.GetDouble(i);
    if (std::isfinite(x)) m = std::max(m, std::fabs(x));
  }
  return m;
}

// For a diverging compare: its operands at the first flipped element, in
// the original and in the partitioned program. A flip whose operands agree
// to rounding and lie that close to each other is a rounding effect (e.g. a
// ReLU mask at an activation within rounding of the threshold), not a
// wrong value.
std::string ComparedValues(const Instruction& compare, const Literal& ref, const Literal& got,
                           const Literal& probe_ref,
                           const std::map<const Instruction*, size_t>& index_of,
                           const std::map<size_t, Literal>& operands) {
  int64_t flipped = -1;
  for (int64_t k = 0; k < ref.element_count() && flipped < 0; ++k)
    if (ref.GetInt(k) != got.GetInt(k)) flipped = k;
  if (flipped < 0) return "";
  std::string out = "; there the operands are";
  for (int o = 0; o < compare.operand_count(); ++o) {
    const Instruction* op = compare.operand(o);
    auto it = index_of.find(op);
    if (it == index_of.end() || !operands.count(it->second)) continue;
    const Literal& r = probe_ref.elements()[it->second];
    const Literal& g = operands.at(it->second);
    if (!r.shape().IsArray() || r.element_count() != ref.element_count()) continue;
    out += std::string(o ? "," : "") + " %" + op->name() + " = " +
           FormatDouble(r.GetDouble(flipped)) + " (partitioned: " +
           FormatDouble(g.GetDouble(flipped)) + ")";
  }
  return out;
}

// Finds the first diverging instruction (see the file comment).
void LocateDivergence(Module& original, Module& partitioned, const std::vector<Literal>& inputs,
                      const VerifyOptions& options, VerifyResult& result) {
  Computation* oe = original.entry();
  Computation* pe = partitioned.entry();
  std::vector<Instruction*> orig_values, part_values;
  std::vector<Sharding> shardings;
  for (Instruction* instr : oe->MakePostOrder()) {
    if (instr->opcode() == Opcode::kParameter || !instr->shape().IsArray()) continue;
    Instruction* p = pe->Find(instr->name());
    if (p == nullptr || !p->shape().IsArray() ||
        p->shape().element_type() != instr->shape().element_type())
      continue;
    // A same-named value that feeds a cross-device reduction is a partial
    // result (e.g. the local dot before its all-reduce), not X's value.
    if (std::any_of(p->users().begin(), p->users().end(), [](const Instruction* u) {
          return u->opcode() == Opcode::kAllReduce || u->opcode() == Opcode::kReduceScatter;
        }))
      continue;
    Sharding s = ShardingOrReplicated(*instr);
    if (s.IsTuple() || s.IsManual() || s.IsUnknown() || s.IsUnreduced()) continue;
    if (s.IsTiled() && (s.HasManualSubgroup() ||
                        s.Validate(instr->shape().rank(), options.num_partitions).ok() == false))
      continue;
    std::vector<int64_t> local =
        s.IsTiled() ? s.TileShape(instr->shape().dimensions()) : instr->shape().dimensions();
    if (local != p->shape().dimensions()) continue;
    orig_values.push_back(instr);
    part_values.push_back(p);
    shardings.push_back(s);
  }
  int64_t probe_bytes = 0;
  for (size_t i = 0; i < orig_values.size(); ++i)
    probe_bytes += orig_values[i]->shape().ByteSize() +
                   options.num_partitions * part_values[i]->shape().ByteSize();
  if (probe_bytes > options.max_probe_bytes) {
    result.divergence_detail = "not located: probing every value would need " +
                               std::to_string(probe_bytes >> 20) + " MiB";
    return;
  }
  if (orig_values.empty()) {
    result.divergence_detail =
        "no instruction of the original entry has a same-named counterpart with its tile "
        "shape in the partitioned module";
    return;
  }
  StatusOr<Literal> ref = Status::Error("unset");
  {
    ProbeRoot probe(original, *oe, orig_values);
    ref = EvaluateModule(original, inputs, OneDeviceContext(options));
  }
  if (!ref.ok()) {
    result.divergence_detail = "reference probe run failed: " + ref.status().message();
    return;
  }
  StatusOr<std::vector<std::vector<Literal>>> args =
      SplitInputs(partitioned, inputs, options.num_partitions);
  if (!args.ok()) return;
  StatusOr<std::vector<Literal>> per_device = Status::Error("unset");
  {
    ProbeRoot probe(partitioned, *pe, part_values);
    per_device = RunOnDevices(partitioned, std::move(args).value(), options.num_partitions,
                              WithVerifyRunOptions(SpmdRunOptions{}, options));
  }
  if (!per_device.ok()) {
    result.divergence_detail = "partitioned probe run failed: " + per_device.status().message();
    return;
  }
  // MESHSPLIT_DEBUG=verify-profile: print every probed value's error (in
  // the original's topological order) instead of stopping at the first
  // mismatch, to tell an error that grows layer by layer from one op.
  const char* debug = std::getenv("MESHSPLIT_DEBUG");
  const bool profile = debug != nullptr && std::strstr(debug, "verify-profile") != nullptr;
  // Assembled operands of compares, kept to explain a flipped comparison.
  std::map<const Instruction*, size_t> index_of;
  std::map<size_t, Literal> compare_operands;
  for (size_t i = 0; i < orig_values.size(); ++i) index_of[orig_values[i]] = i;
  for (size_t i = 0; i < orig_values.size(); ++i) {
    std::vector<Literal> parts;
    for (const Literal& l : *per_device) parts.push_back(l.elements()[i]);
    const std::string what = "%" + orig_values[i]->name();
    StatusOr<Literal> assembled = Assemble(parts, orig_values[i]->shape(), shardings[i]);
    if (!assembled.ok()) {
      result.divergent_instruction = orig_values[i]->name();
      result.divergence_detail = what + ": " + assembled.status().message();
      return;
    }
    Comparison c = CompareValues(ref->elements()[i], *assembled, what, options.compare);
    if (profile)
      std::fprintf(stderr, "verify-profile: %-40s max abs %.3g max |ref| %.3g%s\n",
                   what.c_str(), c.max_abs_error, MaxAbs(ref->elements()[i]),
                   c.ok ? "" : "  MISMATCH");
    if (!c.ok && result.divergent_instruction.empty()) {
      result.divergent_instruction = orig_values[i]->name();
      result.divergence_detail = c.first_mismatch + " (" + std::to_string(c.mismatches) +
                                 " elements differ; sharding " +
                                 shardings[i].ToString(false) + ")";
      if (orig_values[i]->opcode() == Opcode::kCompare)
        result.divergence_detail += ComparedValues(*orig_values[i], ref->elements()[i],
                                                   *assembled, *ref, index_of, compare_operands);
      if (!profile) return;
    }
    if (std::any_of(orig_values[i]->users().begin(), orig_values[i]->users().end(),
                    [](const Instruction* u) { return u->opcode() == Opcode::kCompare; }))
      compare_operands.emplace(i, std::move(assembled).value());
  }
  if (result.divergent_instruction.empty())
    result.divergence_detail = "all " + std::to_string(orig_values.size()) +
                               " same-named intermediate values agree";
}

bool HasArrayLeaf(const Shape& s) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple_shapes())
      if (HasArrayLeaf(e)) return true;
    return false;
  }
  return s.IsArray();
}

// Flattens the array leaves of a value (tuples depth-first).
void Leaves(const Literal& v, std::vector<const Literal*>& out) {
  if (v.shape().IsTuple()) {
    for (const Literal& e : v.elements()) Leaves(e, out);
    return;
  }
  out.push_back(&v);
}

void LeafShapes(const Shape& s, std::vector<Shape>& out) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple_shapes()) LeafShapes(e, out);
    return;
  }
  out.push_back(s);
}

// Compares one logical value: `ref[d]` is device d's reference value (whole
// per manual group), `got[d]` its partitioned local value laid out by
// `sharding`. Fills `result` on the first problem and returns false.
bool CompareLogical(const Shape& shape, const Sharding& sharding,
                    const std::vector<const Literal*>& ref, const std::vector<const Literal*>& got,
                    const std::string& what, const CompareOptions& copts, VerifyResult& result,
                    int64_t& compared) {
  const size_t n = ref.size();
  std::vector<Shape> shapes;
  LeafShapes(shape, shapes);
  std::vector<Sharding> shardings = LeafShardings(shape, sharding);
  std::vector<std::vector<const Literal*>> ref_leaves(n), got_leaves(n);
  for (size_t d = 0; d < n; ++d) {
    Leaves(*ref[d], ref_leaves[d]);
    Leaves(*got[d], got_leaves[d]);
    if (ref_leaves[d].size() != shapes.size() || got_leaves[d].size() != shapes.size()) {
      result.status = "assemble";
      result.message = what + ": device " + std::to_string(d) + " returned " +
                       got[d]->shape().ToString(false) + ", expected the structure of " +
                       shape.ToString(false);
      return false;
    }
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i].IsArray()) continue;
    ++compared;
    std::string leaf = shapes.size() > 1 ? what + "{" + std::to_string(i) + "}" : what;
    std::vector<const Literal*> parts(n);
    for (size_t d = 0; d < n; ++d) parts[d] = got_leaves[d][i];
    // The reference first: devices of one manual group must agree on the
    // original's value, else it has no logical value to compare against
    // (e.g. partition-id outside a manual region).
    StatusOr<std::vector<DevicePlace>> places =
        PlaceDevices(shardings[i], shapes[i].dimensions(), static_cast<int64_t>(n));
    if (!places.ok()) {
      result.status = "assemble";
      result.message = leaf + ": " + places.status().message();
      return false;
    }
    std::map<int64_t, size_t> first_in_group;
    for (size_t d = 0; d < n; ++d) {
      auto [it, fresh] = first_in_group.emplace((*places)[d].manual_group, d);
      if (fresh || ref_leaves[d][i]->BitwiseEqual(*ref_leaves[it->second][i])) continue;
      result.status = "reference";
      result.message = "the original's " + leaf + " differs between devices " +
                       std::to_string(it->second) + " and " + std::to_string(d) +
                       ", which share it under " + shardings[i].ToString(false);
      return false;
    }
    StatusOr<GroupValues> g = AssembleGroups(parts, shapes[i], shardings[i]);
    if (!g.ok()) {
      result.status = "assemble";
      result.message = leaf + ": " + g.status().message();
      return false;
    }
    for (size_t j = 0; j < g->values.size(); ++j) {
      const int64_t d0 = g->first_device[j];
      std::string name = g->values.size() > 1
                             ? leaf + " (manual group of device " + std::to_string(d0) + ")"
                             : leaf;
      Comparison c = CompareValues(*ref_leaves[d0][i], g->values[j], name, copts);
      result.max_abs_error = std::max(result.max_abs_error, c.max_abs_error);
      result.max_rel_error = std::max(result.max_rel_error, c.max_rel_error);
      if (!c.ok) {
        result.status = "mismatch";
        result.message = c.first_mismatch + " (" + std::to_string(c.mismatches) +
                         " elements differ)";
        return false;
      }
    }
  }
  return true;
}

// Verification against the N-device reference run (runtime/reference.h).
VerifyResult VerifyPerDevice(Module& original, Module& partitioned, const VerifyOptions& options,
                             const CompareOptions& copts, VerifyResult result) {
  const int64_t n = options.num_partitions;
  StatusOr<DeviceInputs> inputs =
      MakeDeviceInputs(*original.entry(), *partitioned.entry(), n, options.seed);
  if (!inputs.ok()) {
    result.status = "spmd";
    result.message = inputs.status().ToString();
    return result;
  }
  FeedState ref_feeds(original, n, options.seed, /*reference=*/true);
  FeedState part_feeds(original, n, options.seed, /*reference=*/false);
  StatusOr<std::vector<Literal>> ref = RunOnDevices(
      original, std::move(inputs->reference), n,
      WithVerifyRunOptions(ReferenceRunOptions(&ref_feeds, true), options));
  if (!ref.ok()) {
    result.status = "reference";
    result.message = "on " + std::to_string(n) + " devices: " + ref.status().ToString();
    return result;
  }
  StatusOr<std::vector<Literal>> got = RunOnDevices(
      partitioned, std::move(inputs->partitioned), n,
      WithVerifyRunOptions(ReferenceRunOptions(&part_feeds, false), options));
  if (!got.ok()) {
    result.status = "spmd";
    result.message = got.status().ToString();
    return result;
  }
  std::vector<const Literal*> ref_ptrs, got_ptrs;
  for (int64_t d = 0; d < n; ++d) {
    ref_ptrs.push_back(&(*ref)[d]);
    got_ptrs.push_back(&(*got)[d]);
  }
  const Instruction* proot = partitioned.entry()->root();
  int64_t compared = 0;
  if (!CompareLogical(original.entry()->root()->shape(), ShardingOrReplicated(*proot), ref_ptrs,
                      got_ptrs, "out", copts, result, compared))
    return result;
  // Outfeeds: the k-th call of each outfeed, per device, laid out by the
  // original outfeed's sharding.
  std::map<std::string, const Instruction*> outfeeds;
  for (const auto& c : original.computations())
    for (const auto& i : c->instructions())
      if (i->opcode() == Opcode::kOutfeed) outfeeds.emplace(i->name(), i.get());
  for (const auto& entry : outfeeds) {
    // Not a structured binding: clang 15 (the asan-ubsan preset) refuses
    // lambdas that capture one (a C++20 extension it lacks).
    const std::string& name = entry.first;
    const Instruction* instr = entry.second;
    auto calls = [&](const FeedState& f, int64_t d) {
      std::vector<const Literal*> v;
      for (const FeedState::Record& r : f.outfeeds()[d])
        if (r.name == name) v.push_back(&r.data);
      return v;
    };
    if (instr->operand_count() < 1) continue;
    const Shape& data_shape = instr->operand(0)->shape();
    Sharding s = ShardingOrReplicated(*instr);
    if (s.IsTuple()) {
      // An outfeed's own sharding covers (data leaves..., token).
      std::vector<Shape> ls;
      LeafShapes(data_shape, ls);
      std::vector<Sharding> data_leaves(
          s.tuple_elements().begin(),
          s.tuple_elements().begin() + std::min(ls.size(), s.tuple_elements().size()));
      s = data_shape.IsTuple() ? Sharding::Tuple(data_leaves)
                               : (data_leaves.empty() ? Sharding::Replicate() : data_leaves[0]);
    }
    std::vector<Sharding> data_leaf_shardings = LeafShardings(data_shape, s);
    size_t count = calls(ref_feeds, 0).size();
    for (size_t k = 0; k < count; ++k) {
      std::vector<const Literal*> r(n), g(n);
      Literal missing(Shape::Token());
      for (int64_t d = 0; d < n; ++d) {
        std::vector<const Literal*> rc = calls(ref_feeds, d), gc = calls(part_feeds, d);
        r[d] = k < rc.size() ? rc[k] : &missing;
        g[d] = k < gc.size() ? gc[k] : &missing;
        if (k >= rc.size()) {
          result.status = "reference";
          result.message = "device " + std::to_string(d) + " made fewer outfeeds %" + name;
          return result;
        }
      }
      // Devices that hold nothing of a maximal outfeed need not outfeed.
      bool ok = true;
      for (int64_t d = 0; d < n && ok; ++d) {
        if (g[d] != &missing) continue;
        bool needed = false;
        for (const Sharding& ls : data_leaf_shardings)
          needed |= !(ls.IsMaximal() && ls.device() != d);
        if (needed) {
          result.status = "mismatch";
          result.message = "device " + std::to_string(d) + " of the partitioned program made " +
                           std::to_string(calls(part_feeds, d).size()) + " outfeeds %" + name +
                           ", the original " + std::to_string(count);
          return result;
        }
        g[d] = r[d];  // placeholder of the right structure, never read
      }
      if (!CompareLogical(data_shape, s, r, g, "outfeed %" + name + "#" + std::to_string(k),
                          copts, result, compared))
        return result;
    }
    for (int64_t d = 0; d < n; ++d)
      if (calls(part_feeds, d).size() > count) {
        result.status = "mismatch";
        result.message = "device " + std::to_string(d) + " of the partitioned program made " +
                         std::to_string(calls(part_feeds, d).size()) + " outfeeds %" + name +
                         ", the original " + std::to_string(count);
        return result;
      }
  }
  if (compared == 0) {
    result.status = "empty";
    result.message = "the module has no array output or outfeed to compare";
  }
  return result;
}

}  // namespace

VerifyResult VerifyModuleUnchecked(Module& module, const VerifyOptions& options);

std::vector<Literal> RandomInputs(const Computation& entry, uint64_t seed) {
  std::vector<Literal> out;
  for (int p = 0; p < entry.parameter_count(); ++p) {
    const Instruction* param = entry.parameter(p);
    Shape s = param ? param->shape() : Shape(PrimitiveType::F32, {});
    s.clear_layout();
    Literal lit(s);
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(p) + 1);
    FillRandom(lit, rng);
    out.push_back(std::move(lit));
  }
  return out;
}

namespace {

// Ops that pass a weight on unchanged in value (layout, type, order).
bool PassesWeightOn(Opcode op) {
  switch (op) {
    case Opcode::kTranspose:
    case Opcode::kReshape:
    case Opcode::kBitcast:
    case Opcode::kCopy:
    case Opcode::kConvert:
    case Opcode::kReverse:
      return true;
    default:
      return false;
  }
}

// The smallest fan-in over the convolution kernels and dot operands that
// `value` reaches through PassesWeightOn ops (0 if none).
int64_t FanInOfUses(const Instruction& value, int depth) {
  if (depth > 16) return 0;
  int64_t best = 0;
  auto take = [&](int64_t f) {
    if (f > 0) best = best == 0 ? f : std::min(best, f);
  };
  for (const Instruction* user : value.users()) {
    const auto& dims = value.shape().dimensions();
    auto size_of = [&](int64_t d) {
      return d >= 0 && d < static_cast<int64_t>(dims.size()) ? dims[d] : int64_t{1};
    };
    if (user->opcode() == Opcode::kConvolution && user->attrs().conv_dnums &&
        user->operand_count() > 1 && user->operand(1) == &value) {
      const ConvolutionDimensionNumbers& cd = *user->attrs().conv_dnums;
      int64_t f = size_of(cd.kernel_input_feature_dimension);
      for (int64_t d : cd.kernel_spatial_dimensions) f *= size_of(d);
      take(f);
    } else if (user->opcode() == Opcode::kDot && user->attrs().dot_dnums) {
      const DotDimensionNumbers& dd = *user->attrs().dot_dnums;
      for (int k = 0; k < std::min<int>(2, user->operand_count()); ++k) {
        if (user->operand(k) != &value) continue;
        int64_t f = 1;
        for (int64_t d : k == 0 ? dd.lhs_contracting_dimensions : dd.rhs_contracting_dimensions)
          f *= size_of(d);
        take(f);
      }
    } else if (PassesWeightOn(user->opcode())) {
      take(FanInOfUses(*user, depth + 1));
    }
  }
  return best;
}

}  // namespace

std::vector<int64_t> WeightFanIns(const Computation& entry) {
  std::vector<int64_t> out;
  for (int p = 0; p < entry.parameter_count(); ++p) {
    const Instruction* param = entry.parameter(p);
    PrimitiveType t = param != nullptr && param->shape().IsArray()
                          ? param->shape().element_type()
                          : PrimitiveType::PRED;
    bool is_float = t == PrimitiveType::F16 || t == PrimitiveType::BF16 ||
                    t == PrimitiveType::F32 || t == PrimitiveType::F64;
    out.push_back(is_float ? FanInOfUses(*param, 0) : 0);
  }
  return out;
}

std::vector<Literal> GenerateInputs(const Computation& entry, uint64_t seed, InputInit init) {
  std::vector<Literal> out = RandomInputs(entry, seed);
  if (init != InputInit::kFanIn) return out;
  std::vector<int64_t> fan_ins = WeightFanIns(entry);
  for (size_t p = 0; p < out.size(); ++p) {
    if (fan_ins[p] <= 0) continue;
    // The same per-parameter stream as RandomInputs, so that switching the
    // init changes only the weights.
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(p) + 1);
    std::normal_distribution<double> d(0.0, 1.0 / std::sqrt(static_cast<double>(fan_ins[p])));
    Literal& lit = out[p];
    for (int64_t i = 0; i < lit.element_count(); ++i) lit.SetDouble(i, d(rng));
  }
  return out;
}

StatusOr<std::vector<Literal>> VerifyInputs(const Computation& entry,
                                            const VerifyOptions& options) {
  std::vector<Literal> out = GenerateInputs(entry, options.seed, options.init);
  if (!options.given_inputs) return out;
  for (const auto& [index, value] : *options.given_inputs) {
    if (index < 0 || index >= static_cast<int64_t>(out.size()))
      return Status::Error("given input for parameter " + std::to_string(index) +
                           ", but the entry takes " + std::to_string(out.size()));
    const Shape& want = out[index].shape();
    if (!value.shape().IsArray() || value.element_type() != want.element_type() ||
        value.shape().dimensions() != want.dimensions())
      return Status::Error("given input for parameter " + std::to_string(index) + " (%" +
                           entry.parameter(static_cast<int>(index))->name() + ") is " +
                           value.shape().ToString(false) + ", expected " +
                           want.ToString(false));
    out[index] = value;
  }
  return out;
}

int64_t ReductionLength(const Module& module) {
  int64_t total = 0;
  for (const auto& comp : module.computations()) {
    for (const auto& up : comp->instructions()) {
      const Instruction& instr = *up;
      switch (instr.opcode()) {
        case Opcode::kDot:
          if (instr.attrs().dot_dnums && instr.operand_count() > 0 &&
              instr.operand(0)->shape().IsArray())
            total += Product(instr.operand(0)->shape().dimensions(),
                             instr.attrs().dot_dnums->lhs_contracting_dimensions);
          break;
        case Opcode::kReduce:
          if (instr.operand_count() > 0 && instr.operand(0)->shape().IsArray())
            total += Product(instr.operand(0)->shape().dimensions(), instr.attrs().dimensions);
          break;
        case Opcode::kReduceWindow:
        case Opcode::kConvolution: {
          int64_t w = 1;
          if (instr.attrs().window)
            for (const WindowDimension& d : *instr.attrs().window) w *= d.size;
          if (instr.opcode() == Opcode::kConvolution && instr.attrs().conv_dnums &&
              instr.operand_count() > 1 && instr.operand(1)->shape().IsArray()) {
            const auto& kd = instr.operand(1)->shape().dimensions();
            int64_t f = instr.attrs().conv_dnums->kernel_input_feature_dimension;
            if (f >= 0 && f < static_cast<int64_t>(kd.size())) w *= kd[f];
          }
          total += w;
          break;
        }
        default:
          break;
      }
    }
  }
  return std::max<int64_t>(1, total);
}

Comparison CompareValues(const Literal& ref, const Literal& got, const std::string& what,
                         const CompareOptions& options) {
  Comparison out;
  CompareRec(ref, got, what, options, out);
  return out;
}

StatusOr<std::unique_ptr<Module>> PropagateAndPartition(
    Module& module, int64_t num_partitions, bool propagate, bool strict, std::string* failed_stage,
    const PartitionOptions& partition, const std::optional<PipelineRequest>& pipeline,
    std::unique_ptr<Module>* unpipelined) {
  CompileOptions options;
  if (pipeline) {
    options.pipeline = pipeline->spec;
    options.pipeline_mesh = pipeline->mesh;
    options.pipeline_fill_nan = pipeline->fill_nan;
  }
  options.propagate = propagate;
  options.propagation.strict = strict;
  options.partition = partition;
  options.partition.num_partitions = num_partitions;
  options.partition.strict = strict;
  options.partition.warn_on_fallback = false;
  options.verify_output = true;
  options.check_collectives = true;
  CompileResult result;
  Status status = Compile(module, options, &result);
  if (!status.ok()) {
    if (failed_stage) *failed_stage = result.failed_pass;
    return status;
  }
  if (unpipelined != nullptr) *unpipelined = std::move(result.unpipelined);
  return std::move(result.partitioned);
}

PipelineTicks MeasurePipelineTicks(const std::vector<std::vector<BranchRun>>& traces) {
  PipelineTicks out;
  auto starts = [](const std::string& name, const char* prefix) {
    return name.rfind(prefix, 0) == 0;
  };
  std::vector<std::vector<const BranchRun*>> ticks(traces.size());
  for (size_t d = 0; d < traces.size(); ++d)
    for (const BranchRun& r : traces[d]) {
      const std::string& name = r.branch->name();
      if (starts(name, "stage_idle") || starts(name, "stage_busy") ||
          starts(name, "stage_forward") || starts(name, "stage_backward") ||
          starts(name, "stage_weight"))
        ticks[d].push_back(&r);
    }
  if (ticks.empty() || ticks[0].empty()) return out;
  const size_t per_device = ticks[0].size();
  for (const auto& t : ticks)
    if (t.size() != per_device) return out;  // not lockstep ticks: not measured
  double idle_count = 0, idle_time = 0, total_time = 0;
  for (size_t t = 0; t < per_device; ++t) {
    double longest = 0;
    for (const auto& d : ticks) longest = std::max(longest, d[t]->cpu_seconds);
    for (const auto& d : ticks) {
      const bool idle = starts(d[t]->branch->name(), "stage_idle");
      idle_count += idle ? 1 : 0;
      idle_time += longest - (idle ? 0 : d[t]->cpu_seconds);
      total_time += longest;
    }
  }
  const double slots = static_cast<double>(per_device * ticks.size());
  out.ticks = static_cast<int64_t>(per_device);
  out.idle_ticks = idle_count / slots;
  out.idle_time = total_time > 0 ? idle_time / total_time : 0;
  return out;
}

VerifyResult VerifyPartitioned(Module& original, Module& partitioned,
                               const VerifyOptions& options) {
  VerifyResult result;
  const int64_t n = options.num_partitions;
  CompareOptions copts = options.compare;
  copts.reduction_length = ReductionLength(original);
  result.reduction_length = copts.reduction_length;
  if (original.entry() == nullptr || partitioned.entry() == nullptr) {
    result.status = "reference";
    result.message = "module has no entry computation";
    return result;
  }
  // Refused before any per-device argument is built: a mesh of 2^40 devices
  // would otherwise try to allocate 2^40 argument lists.
  if (Status s = CheckThreadsBackendDevices(n); !s.ok()) {
    result.status = "too-large";
    result.message = s.message();
    return result;
  }
  result.reference_reason = DeviceReferenceReason(original);
  if (!result.reference_reason.empty()) {
    if (options.given_inputs || options.init != InputInit::kUniform) {
      // The N-device reference run makes its own per-device arguments.
      result.status = "reference";
      result.message = "error: given inputs and --init are not supported for a module that "
                       "needs the per-device reference run (" + result.reference_reason + ")";
      return result;
    }
    return VerifyPerDevice(original, partitioned, options, copts, result);
  }
  if (original.entry()->root() == nullptr || !HasArrayLeaf(original.entry()->root()->shape())) {
    result.status = "empty";
    result.message = "the module has no array output to compare";
    return result;
  }
  StatusOr<std::vector<Literal>> generated = VerifyInputs(*original.entry(), options);
  if (!generated.ok()) {
    result.status = "reference";
    result.message = generated.status().ToString();
    return result;
  }
  std::vector<Literal> inputs = std::move(generated).value();
  StatusOr<Literal> ref = EvaluateModule(original, inputs, OneDeviceContext(options));
  if (!ref.ok()) {
    result.status = "reference";
    result.message = ref.status().ToString();
    return result;
  }
  StatusOr<std::vector<std::vector<Literal>>> args = SplitInputs(partitioned, inputs, n);
  if (!args.ok()) {
    result.status = "spmd";
    result.message = args.status().ToString();
    return result;
  }
  SpmdRunOptions run_options;
  run_options.single_replica_collectives = true;
  run_options = WithVerifyRunOptions(std::move(run_options), options);
  std::vector<std::vector<BranchRun>> traces;
  run_options.branch_traces = &traces;
  StatusOr<std::vector<Literal>> per_device =
      RunOnDevices(partitioned, std::move(args).value(), n, run_options);
  if (!per_device.ok()) {
    result.status = "spmd";
    result.message = per_device.status().ToString();
    return result;
  }
  const PipelineTicks measured = MeasurePipelineTicks(traces);
  result.pipeline_ticks = measured.ticks;
  result.pipeline_idle_ticks = measured.idle_ticks;
  result.pipeline_idle_time = measured.idle_time;
  const Instruction* proot = partitioned.entry()->root();
  StatusOr<Literal> got =
      Assemble(*per_device, original.entry()->root()->shape(), ShardingOrReplicated(*proot));
  Comparison c;
  if (!got.ok()) {
    result.status = "assemble";
    result.message = "result (%" + proot->name() + "): " + got.status().message();
  } else {
    c = CompareValues(*ref, *got, "out", copts);
    result.max_abs_error = c.max_abs_error;
    result.max_rel_error = c.max_rel_error;
    if (c.ok) return result;
    result.status = "mismatch";
    result.message = c.first_mismatch + " (" + std::to_string(c.mismatches) +
                     " elements differ)";
  }
  if (options.locate_divergence) {
    VerifyOptions o = options;
    o.compare = copts;
    LocateDivergence(original, partitioned, inputs, o, result);
  }
  return result;
}

VerifyResult VerifyModule(Module& module, const VerifyOptions& options) {
  if (module.entry() != nullptr) {
    for (const auto& instr : module.entry()->instructions()) {
      const Shape& s = instr->shape();
      if (s.IsArray() && s.ByteSize() > options.max_value_bytes) {
        VerifyResult r;
        r.status = "too-large";
        r.message = "%" + instr->name() + " (" + s.ToString(false) + ") needs " +
                    std::to_string(s.ByteSize() >> 20) + " MiB, over the " +
                    std::to_string(options.max_value_bytes >> 20) + " MiB limit";
        return r;
      }
    }
  }
  try {
    return VerifyModuleUnchecked(module, options);
  } catch (const std::bad_alloc&) {
    VerifyResult r;
    r.status = "too-large";
    r.message = "out of memory";
    return r;
  }
}

VerifyResult VerifyModuleUnchecked(Module& module, const VerifyOptions& options) {
  std::string stage;
  std::unique_ptr<Module> unpipelined;
  StatusOr<std::unique_ptr<Module>> partitioned =
      PropagateAndPartition(module, options.num_partitions, options.propagate, options.strict,
                            &stage, options.partition, options.pipeline, &unpipelined);
  if (!partitioned.ok()) {
    VerifyResult r;
    r.status = stage.empty() ? "partition" : stage;
    r.message = partitioned.status().ToString();
    return r;
  }
  return VerifyPartitioned(unpipelined != nullptr ? *unpipelined : module, **partitioned, options);
}

}  // namespace meshsplit
