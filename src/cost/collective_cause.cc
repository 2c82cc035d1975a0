// Attribution of collectives to the original program (collective_cause.h).
// The recorded cause (frontend attributes written by the partitioner) is
// read first. Without one, the cause is inferred: original instructions keep
// their names in the partitioned program, while the partitioner's helpers
// (slices, pads, collectives, partition-id arithmetic) get fresh names; so
// the nearest originally-named producer is the value being moved and the
// nearest originally-named user the consumer.
#include "cost/collective_cause.h"

#include "ir/attribute_text.h"

#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "ir/attribute_text.h"
#include "ir/opcode.h"

namespace meshsplit {
namespace {

using NameIndex = std::unordered_map<std::string, const Instruction*>;

// The keys partitioner/spmd_builder.h (kCause*Attr) writes; spelled here
// too because the cost model does not depend on the partitioner.
constexpr char kInstrKey[] = "ms_instr";
constexpr char kOpKey[] = "ms_op";
constexpr char kRuleKey[] = "ms_rule";
constexpr char kReshardKey[] = "ms_reshard";
constexpr char kValueKey[] = "ms_value";

NameIndex IndexByName(const Module& m) {
  NameIndex out;
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions()) out.emplace(i->name(), i.get());
  return out;
}

bool IsHelper(const Instruction* i) {
  switch (i->opcode()) {
    case Opcode::kConstant:
    case Opcode::kPartitionId:
    case Opcode::kIota:
      return true;
    default:
      return false;
  }
}

// Breadth-first over operands (backward) or users (forward) to the first
// instruction whose name, opcode and computation match an original one.
const Instruction* Nearest(const Instruction* start, const NameIndex& orig,
                           bool backward) {
  std::deque<const Instruction*> queue;
  std::unordered_set<const Instruction*> seen{start};
  auto push_next = [&](const Instruction* i) {
    const auto& next = backward ? i->operands() : i->users();
    for (const Instruction* n : next)
      if (!IsHelper(n) && seen.insert(n).second) queue.push_back(n);
  };
  push_next(start);
  while (!queue.empty() && seen.size() < 4096) {
    const Instruction* i = queue.front();
    queue.pop_front();
    auto it = orig.find(i->name());
    if (it != orig.end() && it->second->opcode() == i->opcode()) return i;
    push_next(i);
  }
  return nullptr;
}

// The sharding of `i`, or of its tuple element `index` (>= 0) when it is a
// tuple sharding: a moved loop-state element should name its own layout, not
// the whole tuple's.
std::string ShardingText(const Instruction* i, int64_t index = -1) {
  if (!i || !i->has_sharding()) return "{replicated}";
  const Sharding& s = *i->sharding();
  if (s.IsTuple() && index >= 0 &&
      index < static_cast<int64_t>(s.tuple_elements().size()))
    return s.tuple_elements()[index].ToString(false);
  return s.ToString(false);
}

// When `user` reads `value` directly through a get-tuple-element (or `value`
// feeds operand k of the tuple `user`), the tuple index involved; else -1.
int64_t TupleIndexBetween(const Instruction* value, const Instruction* user) {
  if (!value || !user) return -1;
  for (const Instruction* o : user->operands())
    if (o->opcode() == Opcode::kGetTupleElement && o->operand(0) == value)
      return o->attrs().tuple_index;
  return -1;
}

int64_t OperandIndex(const Instruction* value, const Instruction* user) {
  if (!value || !user || user->opcode() != Opcode::kTuple) return -1;
  for (int64_t k = 0; k < user->operand_count(); ++k)
    if (user->operand(k) == value) return k;
  return -1;
}

// The instruction named `name` among `start` and its transitive operands
// (the value a recorded reshard moved feeds the collective).
const Instruction* FindUpstream(const Instruction* start, const std::string& name) {
  std::deque<const Instruction*> queue{start};
  std::unordered_set<const Instruction*> seen{start};
  while (!queue.empty() && seen.size() < 4096) {
    const Instruction* i = queue.front();
    queue.pop_front();
    if (i->name() == name) return i;
    for (const Instruction* o : i->operands())
      if (seen.insert(o).second) queue.push_back(o);
  }
  return nullptr;
}

const std::string* Lookup(const std::vector<std::pair<std::string, std::string>>& kv,
                          const char* key) {
  for (const auto& [k, v] : kv)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> FrontendAttributes(
    const Instruction& instr) {
  const std::string* text = instr.attrs().FindExtra("frontend_attributes");
  if (text == nullptr) return {};
  return ParseFrontendAttributes(*text).value_or(FrontendAttributePairs{});
}

std::string CollectiveCause::ToString() const {
  std::string out;
  if (recorded) {
    // No instruction: the reshard of a computation's root to its layout.
    out += instruction.empty() ? std::string("root: ") : instruction + " (" + op + "): ";
    std::string what = rule;
    if (!from_sharding.empty() || !to_sharding.empty()) {
      if (!what.empty()) what += "; ";
      what += "reshard " + (source.empty() ? "" : source + " ") + from_sharding + " -> " +
              to_sharding;
    }
    if (what.empty()) what = "emitted by the " + op + " handler";
    out += what;
    if (!annotation.empty()) out += "; root annotation: " + annotation;
    return out;
  }
  if (!source.empty()) out += source + " (" + source_op + "): ";
  out += rule;
  if (!from_sharding.empty() || !to_sharding.empty())
    out += " " + from_sharding + " -> " + to_sharding;
  if (!consumer.empty()) out += " for " + consumer;
  if (!annotation.empty()) out += "; root annotation: " + annotation;
  out += "; cause: inferred";
  return out;
}

CollectiveCauseFinder::CollectiveCauseFinder(
    const Module& original, std::function<std::string(const std::string&)> root_annotation)
    : by_name_(IndexByName(original)), root_annotation_(std::move(root_annotation)) {}

CollectiveCause CollectiveCauseFinder::Find(const Instruction& collective) const {
  const NameIndex& orig = by_name_;
  const auto& root_annotation = root_annotation_;
  CollectiveCause cause;
  const auto attrs = FrontendAttributes(collective);
  // A reshard outside any instruction's scope (the computation root's, to
  // the output layout) records no instruction, and is still recorded.
  const std::string* instr = Lookup(attrs, kInstrKey);
  if (instr != nullptr || Lookup(attrs, kReshardKey) != nullptr) {
    cause.recorded = true;
    if (instr != nullptr) cause.instruction = *instr;
    if (const std::string* op = Lookup(attrs, kOpKey)) cause.op = *op;
    if (const std::string* rule = Lookup(attrs, kRuleKey)) cause.rule = *rule;
    if (const std::string* r = Lookup(attrs, kReshardKey)) {
      // Sharding text never contains " -> ".
      size_t arrow = r->find(" -> ");
      cause.from_sharding = arrow == std::string::npos ? *r : r->substr(0, arrow);
      cause.to_sharding = arrow == std::string::npos ? "" : r->substr(arrow + 4);
    }
    // The value moved: the recorded one, named back to the original
    // instruction it computes (a helper's value to its nearest original
    // producer).
    const Instruction* moved = nullptr;
    if (const std::string* v = Lookup(attrs, kValueKey)) moved = FindUpstream(&collective, *v);
    if (moved != nullptr) {
      auto it = orig.find(moved->name());
      const Instruction* src = it != orig.end() && it->second->opcode() == moved->opcode()
                                   ? moved
                                   : Nearest(moved, orig, /*backward=*/true);
      if (src != nullptr) {
        cause.source = src->name();
        cause.source_op = std::string(OpcodeName(orig.at(src->name())->opcode()));
      }
    }
    if (cause.source != cause.instruction) cause.consumer = cause.instruction;
    if (root_annotation) {
      // The layout that asked for the move comes from the instruction being
      // partitioned; a value with no chain of its own falls back to the
      // moved value's.
      cause.annotation = root_annotation(cause.instruction);
      if (cause.annotation.empty() && !cause.source.empty())
        cause.annotation = root_annotation(cause.source);
    }
    return cause;
  }
  const Instruction* src = Nearest(&collective, orig, /*backward=*/true);
  // The collective itself may keep an original name (a value the partitioner
  // replaced by its collective, e.g. the root).
  const Instruction* dst = nullptr;
  if (collective.IsRoot() || collective.users().empty()) {
    dst = nullptr;
  } else {
    dst = Nearest(&collective, orig, /*backward=*/false);
  }
  const Instruction* osrc = src ? orig.at(src->name()) : nullptr;
  const Instruction* odst = dst ? orig.at(dst->name()) : nullptr;
  if (osrc) {
    cause.source = osrc->name();
    cause.source_op = std::string(OpcodeName(osrc->opcode()));
  }
  if (odst) cause.consumer = odst->name();
  const Opcode kind = collective.opcode();
  const bool reduces = kind == Opcode::kAllReduce || kind == Opcode::kReduceScatter;
  const bool contraction = osrc && (osrc->opcode() == Opcode::kDot ||
                                    osrc->opcode() == Opcode::kConvolution ||
                                    osrc->opcode() == Opcode::kReduce);
  if (reduces && contraction) {
    // The op rule left partial sums (contracted / reduced dim was sharded);
    // the collective sums them into the sharding the result asked for.
    cause.rule = "partial sums of " + cause.source_op + " (sharded contracted dim)";
    cause.from_sharding = "partial";
    cause.to_sharding = ShardingText(osrc);
  } else if (osrc) {
    cause.rule = "reshard";
    cause.from_sharding = ShardingText(osrc, TupleIndexBetween(src, &collective));
    // What the consumer needed: its own sharding when it is elementwise-like;
    // otherwise the collective's result sharding if the partitioner kept one.
    // The global shape of the moved value (the source's tuple element when
    // the collective reads one).
    const int64_t src_index = TupleIndexBetween(src, &collective);
    const Shape* global = &osrc->shape();
    if (global->IsTuple() && src_index >= 0 && src_index < global->tuple_size())
      global = &global->tuple_shapes(src_index);
    if (collective.has_sharding()) {
      cause.to_sharding = collective.sharding()->ToString(false);
    } else if (collective.shape().Compatible(*global)) {
      // The collective rebuilds the whole value on every device: whatever the
      // consumer's annotation says, it runs on the replicated value (e.g. an
      // op with no partitioning rule).
      cause.to_sharding = "{replicated}";
    } else if (odst) {
      int64_t k = OperandIndex(&collective, dst);
      for (const Instruction* u : collective.users())
        if (k < 0 && u->opcode() == Opcode::kTuple) k = OperandIndex(&collective, u);
      cause.to_sharding = ShardingText(odst, k);
    } else {
      cause.to_sharding = "?";
    }
  } else {
    cause.rule = "inserted by the partitioner";
  }
  if (!cause.from_sharding.empty() && cause.from_sharding == cause.to_sharding) {
    // The intermediate layout that actually moved is not in the original
    // module: partial sums an op rule left (e.g. scatter-add), or a layout an
    // op rule asked its operand for. Say so instead of "X -> X".
    if (reduces) {
      cause.rule = "partial sums of " + cause.source_op;
      cause.from_sharding = "partial";
    } else {
      cause.to_sharding = "(layout the consumer's rule needs)";
    }
  }
  if (root_annotation) {
    // The annotation that decided the target layout: the consumer's chain
    // first (the side that asked for the move), then the source's.
    std::string root;
    if (reduces && contraction) root = root_annotation(cause.source);
    if (root.empty() && !cause.consumer.empty()) root = root_annotation(cause.consumer);
    if (root.empty() && !cause.source.empty()) root = root_annotation(cause.source);
    cause.annotation = root;
  }
  return cause;
}

}  // namespace meshsplit
