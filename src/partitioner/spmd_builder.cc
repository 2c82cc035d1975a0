// SpmdBuilder implementation: every instruction the partitioner creates goes
// through Add(), which names it uniquely and appends it to the computation.
#include "partitioner/spmd_builder.h"

#include "partitioner/sharding_helpers.h"
#include "support/check.h"

namespace meshsplit {

ReplicaGroups ToReplicaGroups(const DeviceGroups& groups) {
  ReplicaGroups rg;
  const TileAssignment& ta = groups.devices;
  if (ta.is_iota()) {
    rg.is_iota = true;
    rg.group_dims = ta.dims();
    rg.reshape_dims = ta.reshape_dims();
    if (!ta.HasIdentityPerm()) rg.transpose_perm = ta.transpose_perm();
  } else {
    rg.groups = groups.Expand();
  }
  return rg;
}

SpmdBuilder::ScopedCause::ScopedCause(SpmdBuilder& b, const Instruction& input)
    : causes_(&b.state_->causes) {
  CauseFrame f;
  f.kind = CauseFrame::Kind::kInstruction;
  f.instr = &input;
  causes_->push_back(f);
}

SpmdBuilder::ScopedCause::ScopedCause(SpmdBuilder& b, const Instruction& op,
                                      const char* rule)
    : causes_(&b.state_->causes) {
  CauseFrame f;
  f.kind = CauseFrame::Kind::kRule;
  f.instr = &op;
  f.rule = rule;
  causes_->push_back(f);
}

SpmdBuilder::ScopedCause::ScopedCause(SpmdBuilder& b, const Instruction* value,
                                      const Sharding& from, const Sharding& to)
    : causes_(&b.state_->causes) {
  CauseFrame f;
  f.kind = CauseFrame::Kind::kReshard;
  f.value = value;
  f.from = &from;
  f.to = &to;
  causes_->push_back(f);
}

namespace {

// A frontend-attribute value: quoted, with quotes and backslashes escaped.
void AppendQuoted(std::string& out, const std::string& text) {
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

void SpmdBuilder::RecordCause(Instruction* collective) const {
  const std::vector<CauseFrame>& frames = state_->causes;
  if (frames.empty()) return;
  // The innermost frame of each kind; a rule or reshard opened outside the
  // innermost instruction belongs to a caller (e.g. the while whose body
  // this is), not to this instruction.
  const CauseFrame* instr = nullptr;
  const CauseFrame* rule = nullptr;
  const CauseFrame* reshard = nullptr;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (it->kind == CauseFrame::Kind::kInstruction) {
      instr = &*it;
      break;
    }
    if (it->kind == CauseFrame::Kind::kRule && rule == nullptr) rule = &*it;
    if (it->kind == CauseFrame::Kind::kReshard && reshard == nullptr) reshard = &*it;
  }
  std::string text = "{";
  auto field = [&](const char* key, const std::string& value) {
    if (text.size() > 1) text += ',';
    text += key;
    text += '=';
    AppendQuoted(text, value);
  };
  if (instr != nullptr) {
    field(kCauseInstrAttr, instr->instr->name());
    field(kCauseOpAttr, std::string(OpcodeName(instr->instr->opcode())));
  }
  if (rule != nullptr)
    field(kCauseRuleAttr, std::string(OpcodeName(rule->instr->opcode())) + ": " + rule->rule);
  if (reshard != nullptr) {
    std::string from = reshard->from->ToString(false), to = reshard->to->ToString(false);
    // Shardings that differ only in what partitioning ignores (maximal vs
    // replicated, a tuple-wide sharding on one leaf) print alike; say what
    // the reshard actually moved between instead.
    if (from == to) {
      from = spmd::NormalizeForPartitioning(*reshard->from).ToString(false);
      to = spmd::NormalizeForPartitioning(*reshard->to).ToString(false);
    }
    field(kCauseReshardAttr, from + " -> " + to);
    if (reshard->value != nullptr) field(kCauseValueAttr, reshard->value->name());
  }
  text += '}';
  if (text.size() <= 2) return;
  for (auto& kv : collective->mutable_attrs().extra) {
    if (kv.first == "frontend_attributes") {
      kv.second = std::move(text);
      return;
    }
  }
  collective->mutable_attrs().extra.emplace_back("frontend_attributes", std::move(text));
}

Instruction* SpmdBuilder::Add(Opcode op, Shape shape,
                              std::vector<Instruction*> operands,
                              const std::string& name) {
  std::string base = name.empty() ? std::string(OpcodeName(op)) : name;
  auto instr = std::make_unique<Instruction>(
      op, state_->module->UniqueInstructionName(base), std::move(shape));
  for (Instruction* o : operands) instr->AppendOperand(o);
  return comp_->AddInstruction(std::move(instr));
}

Instruction* SpmdBuilder::AddInstruction(std::unique_ptr<Instruction> instr) {
  return comp_->AddInstruction(std::move(instr));
}

Instruction* SpmdBuilder::ScalarS32(int64_t value) {
  Instruction*& c = s32_constants_[value];
  if (c == nullptr) c = ScalarConstant(PrimitiveType::S32, static_cast<double>(value));
  return c;
}

Instruction* SpmdBuilder::ConstantLiteral(Literal literal, const std::string& name) {
  Shape shape = literal.shape();
  Instruction* c = Add(Opcode::kConstant, shape, {}, name);
  c->set_literal(std::move(literal));
  return c;
}

Instruction* SpmdBuilder::ScalarConstant(PrimitiveType type, double value) {
  Literal l(Shape(type, {}));
  l.SetDouble(0, value);
  return ConstantLiteral(std::move(l));
}

Instruction* SpmdBuilder::PartitionIdS32() {
  if (partition_id_ == nullptr) {
    Instruction* pid = Add(Opcode::kPartitionId, Shape(PrimitiveType::U32, {}), {});
    partition_id_ = Convert(pid, PrimitiveType::S32);
  }
  return partition_id_;
}

Instruction* SpmdBuilder::Binary(Opcode op, Instruction* a, Instruction* b) {
  return Add(op, Shape(a->shape().element_type(), a->shape().dimensions()), {a, b});
}

Instruction* SpmdBuilder::Compare(Instruction* a, Instruction* b,
                                  ComparisonDirection dir) {
  Instruction* c =
      Add(Opcode::kCompare, Shape(PrimitiveType::PRED, a->shape().dimensions()), {a, b});
  c->mutable_attrs().comparison_direction = dir;
  return c;
}

Instruction* SpmdBuilder::Select(Instruction* pred, Instruction* on_true,
                                 Instruction* on_false) {
  return Add(Opcode::kSelect, on_true->shape(), {pred, on_true, on_false});
}

Instruction* SpmdBuilder::Convert(Instruction* x, PrimitiveType type) {
  if (x->shape().element_type() == type) return x;
  return Add(Opcode::kConvert, Shape(type, x->shape().dimensions()), {x});
}

Instruction* SpmdBuilder::Broadcast(Instruction* x, const std::vector<int64_t>& dims,
                                    const std::vector<int64_t>& broadcast_dims) {
  Instruction* b =
      Add(Opcode::kBroadcast, Shape(x->shape().element_type(), dims), {x});
  b->mutable_attrs().dimensions = broadcast_dims;
  return b;
}

Instruction* SpmdBuilder::Reshape(Instruction* x, const std::vector<int64_t>& dims) {
  if (x->shape().dimensions() == dims) return x;
  return Add(Opcode::kReshape, Shape(x->shape().element_type(), dims), {x});
}

Instruction* SpmdBuilder::Transpose(Instruction* x, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  std::vector<int64_t> dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) dims[i] = x->shape().dimensions(perm[i]);
  Instruction* t = Add(Opcode::kTranspose, Shape(x->shape().element_type(), dims), {x});
  t->mutable_attrs().dimensions = perm;
  return t;
}

Instruction* SpmdBuilder::Slice(Instruction* x, const std::vector<int64_t>& starts,
                                const std::vector<int64_t>& limits) {
  bool whole = true;
  std::vector<int64_t> dims(starts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    dims[i] = limits[i] - starts[i];
    whole &= starts[i] == 0 && limits[i] == x->shape().dimensions(i);
  }
  if (whole) return x;
  Instruction* s = Add(Opcode::kSlice, Shape(x->shape().element_type(), dims), {x});
  for (size_t i = 0; i < starts.size(); ++i)
    s->mutable_attrs().slice.push_back({starts[i], limits[i], 1});
  return s;
}

Instruction* SpmdBuilder::PadHigh(Instruction* x, const std::vector<int64_t>& high) {
  bool none = true;
  for (int64_t h : high) none &= h == 0;
  if (none) return x;
  std::vector<int64_t> dims = x->shape().dimensions();
  for (size_t i = 0; i < dims.size(); ++i) dims[i] += high[i];
  Instruction* zero = Zero(x->shape().element_type());
  Instruction* p = Add(Opcode::kPad, Shape(x->shape().element_type(), dims), {x, zero});
  for (int64_t h : high) p->mutable_attrs().padding.push_back({0, h, 0});
  return p;
}

Instruction* SpmdBuilder::DynamicSlice(Instruction* x,
                                       const std::vector<Instruction*>& starts,
                                       const std::vector<int64_t>& sizes) {
  std::vector<Instruction*> operands = {x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  Instruction* d = Add(Opcode::kDynamicSlice,
                       Shape(x->shape().element_type(), sizes), operands);
  d->mutable_attrs().dynamic_slice_sizes = sizes;
  return d;
}

Instruction* SpmdBuilder::Iota(PrimitiveType type, const std::vector<int64_t>& dims,
                               int64_t dim) {
  Instruction* i = Add(Opcode::kIota, Shape(type, dims), {});
  i->mutable_attrs().iota_dimension = dim;
  return i;
}

Instruction* SpmdBuilder::AllReduce(Instruction* x, const DeviceGroups& groups,
                                    Computation* reducer) {
  if (groups.group_size() == 1) return x;
  Instruction* ar = Add(Opcode::kAllReduce, x->shape(), {x});
  ar->set_called_computations({reducer});
  ar->mutable_attrs().replica_groups = ToReplicaGroups(groups);
  ar->mutable_attrs().channel_id = state_->next_channel_id++;
  ar->mutable_attrs().use_global_device_ids = true;
  RecordCause(ar);
  return ar;
}

Instruction* SpmdBuilder::AllGather(Instruction* x, int64_t dim,
                                    const DeviceGroups& groups) {
  if (groups.group_size() == 1) return x;
  std::vector<int64_t> dims = x->shape().dimensions();
  dims[dim] *= groups.group_size();
  Instruction* ag = Add(Opcode::kAllGather, Shape(x->shape().element_type(), dims), {x});
  ag->mutable_attrs().dimensions = {dim};
  ag->mutable_attrs().replica_groups = ToReplicaGroups(groups);
  ag->mutable_attrs().channel_id = state_->next_channel_id++;
  ag->mutable_attrs().use_global_device_ids = true;
  RecordCause(ag);
  return ag;
}

Instruction* SpmdBuilder::AllToAll(Instruction* x, int64_t dim,
                                   const DeviceGroups& groups) {
  if (groups.group_size() == 1) return x;
  Instruction* a = Add(Opcode::kAllToAll, x->shape(), {x});
  a->mutable_attrs().dimensions = {dim};
  a->mutable_attrs().replica_groups = ToReplicaGroups(groups);
  a->mutable_attrs().channel_id = state_->next_channel_id++;
  RecordCause(a);
  return a;
}

Instruction* SpmdBuilder::ReduceScatter(Instruction* x, int64_t dim,
                                        const DeviceGroups& groups,
                                        Computation* reducer) {
  if (groups.group_size() == 1) return x;
  std::vector<int64_t> dims = x->shape().dimensions();
  MS_CHECK(dims[dim] % groups.group_size() == 0);
  dims[dim] /= groups.group_size();
  Instruction* rs =
      Add(Opcode::kReduceScatter, Shape(x->shape().element_type(), dims), {x});
  rs->set_called_computations({reducer});
  rs->mutable_attrs().dimensions = {dim};
  rs->mutable_attrs().replica_groups = ToReplicaGroups(groups);
  rs->mutable_attrs().channel_id = state_->next_channel_id++;
  rs->mutable_attrs().use_global_device_ids = true;
  RecordCause(rs);
  return rs;
}

Instruction* SpmdBuilder::CollectivePermute(
    Instruction* x, std::vector<std::pair<int64_t, int64_t>> pairs) {
  Instruction* cp = Add(Opcode::kCollectivePermute, x->shape(), {x});
  cp->mutable_attrs().source_target_pairs = std::move(pairs);
  cp->mutable_attrs().channel_id = state_->next_channel_id++;
  RecordCause(cp);
  return cp;
}

Computation* SpmdBuilder::Reducer(Opcode op, PrimitiveType type) {
  std::string key = std::string(OpcodeName(op)) + "." +
                    std::string(PrimitiveTypeName(type));
  auto it = state_->reducers.find(key);
  if (it != state_->reducers.end()) return it->second;
  Module* m = state_->module;
  std::string name = std::string(OpcodeName(op)) + "_" +
                     std::string(PrimitiveTypeName(type)) + "_reducer";
  // Draw computation names from the module's name pool too, so they never
  // clash with an existing computation or instruction.
  name = m->UniqueInstructionName(name);
  auto comp = std::make_unique<Computation>(name);
  Shape scalar(type, {});
  auto a = std::make_unique<Instruction>(Opcode::kParameter,
                                         m->UniqueInstructionName("lhs"), scalar);
  a->mutable_attrs().parameter_number = 0;
  auto b = std::make_unique<Instruction>(Opcode::kParameter,
                                         m->UniqueInstructionName("rhs"), scalar);
  b->mutable_attrs().parameter_number = 1;
  Instruction* pa = comp->AddInstruction(std::move(a));
  Instruction* pb = comp->AddInstruction(std::move(b));
  auto r = std::make_unique<Instruction>(op, m->UniqueInstructionName(name + ".root"),
                                         scalar);
  r->AppendOperand(pa);
  r->AppendOperand(pb);
  comp->set_root(comp->AddInstruction(std::move(r)));
  Computation* raw = comp.get();
  state_->new_computations.push_back(std::move(comp));
  state_->reducers[key] = raw;
  return raw;
}

}  // namespace meshsplit

namespace meshsplit {

const std::vector<Instruction*>& SpmdBuilder::TileIndices(const TileAssignment& ta) {
  std::string key = ta.ToString();
  auto it = tile_index_cache_.find(key);
  if (it != tile_index_cache_.end()) return it->second;
  std::vector<Instruction*> out(ta.num_dimensions(), nullptr);
  Instruction* pid = PartitionIdS32();
  const std::vector<int64_t> strides = RowMajorStrides(ta.dims());
  auto digit = [&](Instruction* flat, int64_t stride, int64_t size, bool leading) {
    Instruction* v = flat;
    if (stride != 1) v = Binary(Opcode::kDivide, v, ScalarS32(stride));
    if (!leading) v = Binary(Opcode::kRemainder, v, ScalarS32(size));
    return v;
  };
  if (ta.is_iota()) {
    // Position of this device in the transposed iota array, read row-major:
    // digits of pid in the reshape dims, reassembled in transposed order.
    Instruction* flat = pid;
    if (!ta.HasIdentityPerm()) {
      const std::vector<int64_t>& r = ta.reshape_dims();
      const std::vector<int64_t>& p = ta.transpose_perm();
      std::vector<int64_t> r_strides = RowMajorStrides(r);
      std::vector<int64_t> t_dims;
      for (int64_t j : p) t_dims.push_back(r[j]);
      std::vector<int64_t> t_strides = RowMajorStrides(t_dims);
      flat = nullptr;
      for (size_t i = 0; i < p.size(); ++i) {
        Instruction* d = digit(pid, r_strides[p[i]], r[p[i]], p[i] == 0);
        if (t_strides[i] != 1) d = Binary(Opcode::kMultiply, d, ScalarS32(t_strides[i]));
        flat = flat == nullptr ? d : Binary(Opcode::kAdd, flat, d);
      }
    }
    for (int64_t d = 0; d < ta.num_dimensions(); ++d) {
      if (ta.dim(d) == 1) {
        out[d] = ScalarS32(0);
        continue;
      }
      out[d] = digit(flat, strides[d], ta.dim(d), d == 0);
    }
  } else {
    // Explicit array: one s32 table per dim, indexed by partition-id.
    const std::vector<int64_t> devices = ta.Devices();
    int64_t max_device = ta.MaxDevice();
    for (int64_t d = 0; d < ta.num_dimensions(); ++d) {
      if (ta.dim(d) == 1) {
        out[d] = ScalarS32(0);
        continue;
      }
      Literal table(Shape(PrimitiveType::S32, {max_device + 1}));
      for (size_t flat = 0; flat < devices.size(); ++flat)
        table.SetInt(devices[flat], (static_cast<int64_t>(flat) / strides[d]) % ta.dim(d));
      Instruction* t = ConstantLiteral(std::move(table), "tile_index_table");
      Instruction* one = DynamicSlice(t, {pid}, {1});
      out[d] = Reshape(one, {});
    }
  }
  return tile_index_cache_[key] = std::move(out);
}

}  // namespace meshsplit
