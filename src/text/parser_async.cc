// XLA's async syntax sugar: `%s = ((f32[8]), f32[8], u32[]) call-start(%x),
// to_apply=%f` is an async-start whose wrapped computation holds one call of
// %f, and `call-update` / `call-done` are its async-update / async-done. The
// parser builds that wrapped computation; the printer writes the generic
// form, which parses back to the same module.
#include <algorithm>

#include "text/parser_impl.h"

namespace meshsplit::text_internal {

namespace {

bool IsAsyncOpcode(Opcode op) {
  switch (op) {
    case Opcode::kAsyncStart: case Opcode::kAsyncUpdate: case Opcode::kAsyncDone:
    case Opcode::kAllReduceStart: case Opcode::kAllReduceDone:
    case Opcode::kAllGatherStart: case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteStart: case Opcode::kCollectivePermuteDone:
    case Opcode::kCopyStart: case Opcode::kCopyDone:
      return true;
    default:
      return false;
  }
}

// Attributes of the async instruction itself; the rest belong to the
// wrapped op.
bool BelongsToStart(const std::string& name) {
  return name == "async_execution_thread" || name == "metadata" ||
         name == "backend_config" || name == "frontend_attributes" ||
         name == "async_group_id";
}

}  // namespace

std::optional<Opcode> Parser::AsyncSugarOpcode(std::string_view op_name,
                                               std::optional<Opcode>* wrapped) {
  static const std::pair<std::string_view, Opcode> kSuffixes[] = {
      {"-start", Opcode::kAsyncStart},
      {"-update", Opcode::kAsyncUpdate},
      {"-done", Opcode::kAsyncDone}};
  for (const auto& [suffix, async_op] : kSuffixes) {
    if (op_name.size() <= suffix.size() ||
        op_name.substr(op_name.size() - suffix.size()) != suffix)
      continue;
    std::optional<Opcode> base = ParseOpcode(op_name.substr(0, op_name.size() - suffix.size()));
    if (!base.has_value() || IsAsyncOpcode(*base) || *base == Opcode::kParameter) return std::nullopt;
    if (async_op == Opcode::kAsyncStart) *wrapped = base;
    return async_op;
  }
  return std::nullopt;
}

bool Parser::DesugarAsyncStart(std::unique_ptr<Instruction>* owned, size_t first_pending,
                               size_t op_pos, size_t op_len) {
  Instruction* parsed = owned->get();
  const std::string op_name(OpcodeName(parsed->opcode()));
  const Shape declared = parsed->shape();
  if (!declared.IsTuple() || declared.tuple_size() < 2)
    return Error(op_pos, op_len,
                 "'" + op_name + "-start' needs a ((operands), result, context...) tuple shape");

  // A computation name no other computation uses.
  std::string comp_name = "async_wrapped_" + parsed->name();
  std::replace(comp_name.begin(), comp_name.end(), '-', '_');
  while (computations_by_name_.count(comp_name)) comp_name += "_";
  auto wc = std::make_unique<Computation>(comp_name);
  wc->set_loc(parsed->loc());

  const std::vector<Instruction*> operands = parsed->operands();
  std::vector<Instruction*> params;
  for (size_t i = 0; i < operands.size(); ++i) {
    auto p = std::make_unique<Instruction>(Opcode::kParameter, "param_" + std::to_string(i),
                                           operands[i]->shape());
    p->mutable_attrs().parameter_number = static_cast<int64_t>(i);
    p->set_loc(parsed->loc());
    params.push_back(wc->AddInstruction(std::move(p)));
  }

  // The wrapped op: the parsed instruction's opcode, attributes and called
  // computations, on the parameters, with the start's result shape.
  auto w = std::make_unique<Instruction>(parsed->opcode(), parsed->name() + ".wrapped",
                                         declared.tuple_shapes(1));
  Attributes& wa = w->mutable_attrs();
  wa = parsed->attrs();
  std::vector<std::pair<std::string, std::string>> start_extra;
  std::vector<std::pair<std::string, std::string>> wrapped_extra;
  for (auto& kv : wa.extra) (BelongsToStart(kv.first) ? start_extra : wrapped_extra).push_back(kv);
  wa.extra = std::move(wrapped_extra);
  w->set_called_computations(parsed->called_computations());
  w->set_loc(parsed->loc());
  for (Instruction* p : params) w->AppendOperand(p);
  Instruction* wi = wc->AddInstruction(std::move(w));
  wc->set_root(wi);
  // Called computations named later in the text resolve onto the wrapped op.
  for (size_t i = first_pending; i < pending_calls_.size(); ++i)
    if (pending_calls_[i].instr == parsed) pending_calls_[i].instr = wi;

  auto start = std::make_unique<Instruction>(Opcode::kAsyncStart, parsed->name(), declared);
  start->set_loc(parsed->loc());
  for (Instruction* op : operands) start->AppendOperand(op);
  start->mutable_attrs().extra = std::move(start_extra);
  if (parsed->has_sharding()) start->set_sharding(*parsed->sharding());
  for (Instruction* pred : parsed->control_predecessors()) start->AddControlPredecessor(pred);
  parsed->DropAllOperands();

  Computation* added = module_->AddComputation(std::move(wc));
  computations_by_name_.emplace(added->name(), added);
  if (const std::string* thread = start->attrs().FindExtra("async_execution_thread")) {
    std::string t = *thread;
    if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
    added->set_execution_thread(t);
  }
  start->set_called_computations({added});
  *owned = std::move(start);
  return true;
}

}  // namespace meshsplit::text_internal
