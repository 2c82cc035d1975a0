// Fused elementwise loops: finding the chains and running them (see
// loop_fusion.h).
#include "runtime/loop_fusion.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>

#include "runtime/parallel.h"
#include "runtime/streaming.h"

namespace meshsplit::interp {
namespace {

std::atomic<bool>& EnabledFlag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("MESHSPLIT_LOOP_FUSION");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }()};
  return on;
}

// Elements per chunk: a chunk of every live intermediate stays in L1/L2,
// and the per-op cost of a chunk (one ElementwiseSpan call) is amortised
// over enough elements to vectorise.
constexpr int64_t kChunk = 1024;
constexpr int64_t kMaxRank = 16;
// Loops from this many elements split their chunks over IntraOpThreads()
// threads (parallel.h); smaller ones cost less than waking a thread.
constexpr int64_t kParallelElements = int64_t{1} << 16;

// Types a loop computes on: everything ElementwiseSpan knows except complex.
bool FusibleType(PrimitiveType t) { return IsSupportedType(t) && !IsComplex(t); }

// Instructions with control edges keep their own place in the order.
// (Set while a plan is built: every control predecessor of the computation.)
thread_local const std::unordered_set<const Instruction*>* control_preds = nullptr;
bool HasControlEdges(const Instruction* i) {
  return !i->control_predecessors().empty() ||
         (control_preds != nullptr && control_preds->count(i) > 0);
}

// Ops a loop computes, exactly those Dispatch sends to the elementwise
// kernels (EvalUnary, EvalBinary, EvalCompare, EvalSelect, EvalClamp,
// EvalConvert) plus array copies.
bool IsLoopOpcode(Opcode op) {
  switch (op) {
    case Opcode::kAbs: case Opcode::kCbrt: case Opcode::kCeil: case Opcode::kClz:
    case Opcode::kCos: case Opcode::kErf: case Opcode::kExp: case Opcode::kExpm1:
    case Opcode::kFloor: case Opcode::kIsFinite: case Opcode::kLog: case Opcode::kLog1p:
    case Opcode::kLogistic: case Opcode::kNegate: case Opcode::kNot: case Opcode::kPopcnt:
    case Opcode::kRoundNearestAfz: case Opcode::kRoundNearestEven: case Opcode::kRsqrt:
    case Opcode::kSign: case Opcode::kSin: case Opcode::kSqrt: case Opcode::kTan:
    case Opcode::kTanh:
    case Opcode::kCopy: case Opcode::kConvert:
    case Opcode::kAdd: case Opcode::kAnd: case Opcode::kAtan2: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum: case Opcode::kMultiply: case Opcode::kOr:
    case Opcode::kPower: case Opcode::kRemainder: case Opcode::kShiftLeft:
    case Opcode::kShiftRightArithmetic: case Opcode::kShiftRightLogical:
    case Opcode::kSubtract: case Opcode::kXor:
    case Opcode::kCompare: case Opcode::kSelect: case Opcode::kClamp:
      return true;
    default:
      return false;
  }
}

// Operand `i` of `op` may be a scalar standing for every element.
bool ScalarOperandAllowed(Opcode op, int i) {
  return (op == Opcode::kSelect && i == 0) || (op == Opcode::kClamp && i != 1);
}

// `i` can be a node of a loop: an op the loop computes, on array operands of
// its own dims (or allowed scalars), for types ElementwiseSpan defines it on
// (asked with n = 0, and operands as the loop passes them: never scalar).
bool IsLoopNode(const Instruction* i) {
  if (!IsLoopOpcode(i->opcode()) || !i->shape().IsArray() ||
      !FusibleType(i->shape().element_type()) || HasControlEdges(i))
    return false;
  const int n_in = i->operand_count();
  if (n_in < 1 || n_in > 3) return false;
  SpanOperand ops[3];
  for (int k = 0; k < n_in; ++k) {
    const Shape& s = i->operand(k)->shape();
    if (!s.IsArray() || !FusibleType(s.element_type())) return false;
    if (s.dimensions() != i->shape().dimensions() &&
        !(s.rank() == 0 && ScalarOperandAllowed(i->opcode(), k)))
      return false;
    ops[k] = {nullptr, s.element_type(), false};
  }
  return ElementwiseSpan(*i, ops, n_in, i->shape().element_type(), nullptr, 0);
}

// `i` is a broadcast, reshape or bitcast of an array of its element type
// with result dims `dims`: a loop reads its operand in place instead.
bool IsLeafOp(const Instruction* i, const std::vector<int64_t>& dims) {
  const Opcode op = i->opcode();
  if (op != Opcode::kBroadcast && op != Opcode::kReshape && op != Opcode::kBitcast) return false;
  if (!i->shape().IsArray() || i->shape().dimensions() != dims || HasControlEdges(i) ||
      i->operand_count() != 1)
    return false;
  const Shape& in = i->operand(0)->shape();
  if (!in.IsArray() || in.element_type() != i->shape().element_type() ||
      !FusibleType(in.element_type()))
    return false;
  if (op != Opcode::kBroadcast) return in.ElementCount() == i->shape().ElementCount();
  const std::vector<int64_t>& map = i->attrs().dimensions;
  if (static_cast<int64_t>(map.size()) != in.rank()) return false;
  std::vector<bool> used(dims.size(), false);
  for (size_t k = 0; k < map.size(); ++k) {
    if (map[k] < 0 || map[k] >= static_cast<int64_t>(dims.size()) || used[map[k]] ||
        dims[map[k]] != in.dimensions(k))
      return false;
    used[map[k]] = true;
  }
  return true;
}

// Builds the leaf reading `value` (an outside instruction) with `strides`
// (per loop dim, elements of the value; empty = direct).
LoopFusion::Leaf MakeLeaf(int input, const Instruction* value, const std::vector<int64_t>& dims,
                          std::vector<int64_t> strides) {
  LoopFusion::Leaf leaf;
  leaf.input = input;
  leaf.type = value->shape().element_type();
  leaf.elem = ByteWidth(leaf.type);
  if (strides.empty()) {
    leaf.direct = true;
    return leaf;
  }
  // Merge dim d into its outer neighbour when the value runs on across them
  // (both broadcast, or contiguous), so inner runs are as long as possible.
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (!leaf.dims.empty() && leaf.strides.back() == strides[d] * dims[d]) {
      leaf.dims.back() *= dims[d];
      leaf.strides.back() = strides[d];
      continue;
    }
    leaf.dims.push_back(dims[d]);
    leaf.strides.push_back(strides[d]);
  }
  bool all_zero = std::all_of(leaf.strides.begin(), leaf.strides.end(),
                              [](int64_t s) { return s == 0; });
  if (leaf.dims.empty() || all_zero) {
    leaf.constant = true;
  } else if (leaf.dims.size() == 1 && leaf.strides[0] == 1) {
    leaf.direct = true;
  }
  if (leaf.direct || leaf.constant) leaf.dims.clear(), leaf.strides.clear();
  return leaf;
}

// Builds the loop of `nodes` (operands first, root last) with the leaf ops
// `folded`.
std::shared_ptr<LoopFusion> BuildLoop(const std::vector<const Instruction*>& nodes,
                                      const std::unordered_set<const Instruction*>& folded) {
  auto loop = std::make_shared<LoopFusion>();
  loop->root = nodes.back();
  const std::vector<int64_t>& dims = loop->root->shape().dimensions();
  std::unordered_map<const Instruction*, int> node_index, input_index;
  std::map<std::pair<int, std::vector<int64_t>>, int> leaf_index;
  auto input_of = [&](const Instruction* v) {
    auto [it, fresh] = input_index.emplace(v, static_cast<int>(loop->inputs.size()));
    if (fresh) {
      loop->inputs.push_back(v);
      loop->input_direct_only.push_back(true);
    }
    return it->second;
  };
  // Strides reading `v` at the loop's index; empty = direct.
  auto leaf_of = [&](const Instruction* v, std::vector<int64_t> strides) {
    int in = input_of(v);
    auto key = std::make_pair(in, strides);
    auto it = leaf_index.find(key);
    if (it != leaf_index.end()) return it->second;
    LoopFusion::Leaf leaf = MakeLeaf(in, v, dims, std::move(strides));
    if (!leaf.direct) loop->input_direct_only[in] = false;
    int idx = static_cast<int>(loop->leaves.size());
    loop->leaves.push_back(std::move(leaf));
    leaf_index.emplace(std::move(key), idx);
    return idx;
  };
  for (const Instruction* i : nodes) {
    LoopFusion::Node node;
    node.instr = i;
    node.type = i->shape().element_type();
    for (const Instruction* o : i->operands()) {
      auto n = node_index.find(o);
      if (n != node_index.end()) {
        node.args.push_back(n->second);
        continue;
      }
      int leaf;
      if (folded.count(o) && o->opcode() == Opcode::kBroadcast) {
        const Instruction* v = o->operand(0);
        std::vector<int64_t> in_strides = RowMajorStrides(v->shape().dimensions());
        std::vector<int64_t> strides(dims.size(), 0);
        for (size_t k = 0; k < o->attrs().dimensions.size(); ++k)
          strides[o->attrs().dimensions[k]] = in_strides[k];
        leaf = leaf_of(v, std::move(strides));
      } else if (folded.count(o)) {
        leaf = leaf_of(o->operand(0), {});  // reshape / bitcast: same linear order
      } else if (o->shape().dimensions() == dims) {
        leaf = leaf_of(o, {});
      } else {
        leaf = leaf_of(o, std::vector<int64_t>(dims.size(), 0));  // a scalar operand
      }
      node.args.push_back(-1 - leaf);
    }
    node_index.emplace(i, static_cast<int>(loop->nodes.size()));
    loop->nodes.push_back(std::move(node));
  }
  // Scratch spans: a node's is taken before its operands' are released, so
  // no op writes over a span it reads at another width.
  const int count = static_cast<int>(loop->nodes.size());
  std::vector<int> last_use(count, -1);
  for (int j = 0; j < count; ++j)
    for (int a : loop->nodes[j].args)
      if (a >= 0) last_use[a] = j;
  std::vector<int> free_slots;
  for (int j = 0; j < count; ++j) {
    if (j + 1 < count) {  // the root writes to the output
      if (free_slots.empty()) free_slots.push_back(loop->slots++);
      loop->nodes[j].slot = free_slots.back();
      free_slots.pop_back();
    }
    for (int a : loop->nodes[j].args)
      if (a >= 0 && last_use[a] == j) free_slots.push_back(loop->nodes[a].slot);
  }
  return loop;
}

// Fills `out` with elements [s, s + m) of a strided leaf whose input starts
// at `base`.
void Gather(const LoopFusion::Leaf& leaf, const uint8_t* base, int64_t s, int64_t m,
            uint8_t* out) {
  const int r = static_cast<int>(leaf.dims.size());
  const std::vector<int64_t>& dims = leaf.dims;
  const std::vector<int64_t>& st = leaf.strides;
  int64_t idx[kMaxRank];
  int64_t rem = s, off = 0;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % dims[d];
    rem /= dims[d];
    off += idx[d] * st[d];
  }
  const int64_t w = leaf.elem, inner = dims[r - 1], step = st[r - 1];
  int64_t done = 0;
  while (done < m) {
    const int64_t run = std::min(inner - idx[r - 1], m - done);
    const uint8_t* src = base + off * w;
    uint8_t* dst = out + done * w;
    if (step == 1) {
      std::memcpy(dst, src, run * w);
    } else {
      auto copy = [&]<typename T>() {
        const T* sp = reinterpret_cast<const T*>(src);
        T* dp = reinterpret_cast<T*>(dst);
        if (step == 0) {
          const T v = sp[0];
          for (int64_t i = 0; i < run; ++i) dp[i] = v;
        } else {
          for (int64_t i = 0; i < run; ++i) dp[i] = sp[i * step];
        }
      };
      switch (w) {
        case 1: copy.template operator()<uint8_t>(); break;
        case 2: copy.template operator()<uint16_t>(); break;
        case 4: copy.template operator()<uint32_t>(); break;
        default: copy.template operator()<uint64_t>(); break;
      }
    }
    done += run;
    off += run * step;
    idx[r - 1] += run;
    if (idx[r - 1] < inner) continue;
    off -= inner * step;
    idx[r - 1] = 0;
    for (int d = r - 2; d >= 0; --d) {
      off += st[d];
      if (++idx[d] < dims[d]) break;
      off -= dims[d] * st[d];
      idx[d] = 0;
    }
  }
}

// Fills `n` elements of width `w` at `out` with the element at `v`.
void Splat(const uint8_t* v, int64_t w, int64_t n, uint8_t* out) {
  std::memcpy(out, v, w);
  for (int64_t filled = 1; filled < n;) {
    const int64_t c = std::min(filled, n - filled);
    std::memcpy(out + filled * w, out, c * w);
    filled += c;
  }
}

}  // namespace

void SetLoopFusionEnabled(bool on) { EnabledFlag().store(on); }
bool LoopFusionEnabled() { return EnabledFlag().load(); }

LoopFusionPlan PlanLoopFusions(const std::vector<const Instruction*>& order,
                               const Instruction* root) {
  LoopFusionPlan plan;
  if (!LoopFusionEnabled()) return plan;
  std::unordered_map<const Instruction*, int> pos;
  std::unordered_set<const Instruction*> preds;
  for (size_t s = 0; s < order.size(); ++s) {
    pos[order[s]] = static_cast<int>(s);
    for (const Instruction* p : order[s]->control_predecessors()) preds.insert(p);
  }
  control_preds = &preds;
  auto live = [&](const Instruction* i) { return pos.count(i) > 0; };
  std::unordered_map<const Instruction*, const LoopFusion*> node_loop;  // every node's loop
  // Leaf ops folded into some loop, and the loops that fold each.
  std::unordered_map<const Instruction*, std::unordered_set<const LoopFusion*>> folded_by;
  // Roots from the last instruction back: a root's operands join its loop
  // when the loop is their only reader, so chains grow towards the inputs.
  for (int s = static_cast<int>(order.size()) - 1; s >= 0; --s) {
    const Instruction* r = order[s];
    // (Gather's odometer holds up to kMaxRank dims.)
    if (node_loop.count(r) || !IsLoopNode(r) || r->shape().rank() > kMaxRank) continue;
    const std::vector<int64_t>& dims = r->shape().dimensions();
    std::unordered_set<const Instruction*> members = {r}, folded;
    std::vector<const Instruction*> work = {r};
    while (!work.empty()) {
      const Instruction* m = work.back();
      work.pop_back();
      for (const Instruction* p : m->operands()) {
        if (members.count(p) || folded.count(p) || p == root || node_loop.count(p)) continue;
        if (p->shape().IsArray() && p->shape().dimensions() == dims && IsLoopNode(p)) {
          bool only_here = true;
          for (const Instruction* u : p->users())
            if (live(u) && !members.count(u)) only_here = false;
          if (only_here) {
            members.insert(p);
            work.push_back(p);
            continue;
          }
        }
        if (IsLeafOp(p, dims)) folded.insert(p);
      }
    }
    // An op with a broadcast saves materialising the broadcast; an op on its
    // own gains only when it is large enough to split over threads.
    if (members.size() + folded.size() < 2 && r->shape().ElementCount() < kParallelElements)
      continue;
    std::vector<const Instruction*> nodes(members.begin(), members.end());
    std::sort(nodes.begin(), nodes.end(),
              [&](const Instruction* a, const Instruction* b) { return pos[a] < pos[b]; });
    std::shared_ptr<LoopFusion> loop = BuildLoop(nodes, folded);
    for (const Instruction* n : nodes) node_loop[n] = loop.get();
    for (const Instruction* f : folded) folded_by[f].insert(loop.get());
    plan.loops.push_back(std::move(loop));
  }
  control_preds = nullptr;
  for (const auto& [i, loop] : node_loop)
    if (i != loop->root) plan.absorbed.insert(i);
  // A folded leaf op runs on its own unless every reader is a loop that
  // folded it.
  for (const auto& [f, loops] : folded_by) {
    if (f == root) continue;
    bool all_fold = true;
    for (const Instruction* u : f->users()) {
      if (!live(u)) continue;
      auto it = node_loop.find(u);
      if (it == node_loop.end() || !loops.count(it->second)) all_fold = false;
    }
    if (all_fold) plan.absorbed.insert(f);
  }
  return plan;
}

StatusOr<Literal> RunLoopFusion(const LoopFusion& loop, KernelArgs& k) {
  const Shape& shape = loop.root->shape();
  const int64_t n = shape.ElementCount();
  const size_t n_inputs = loop.inputs.size();
  if (k.ops.size() != n_inputs) return InstrError(*loop.root, "internal: fused loop inputs");
  // Input views first: the output may take an input's buffer below.
  std::vector<const uint8_t*> base(n_inputs);
  for (size_t j = 0; j < n_inputs; ++j) {
    const Shape& want = loop.inputs[j]->shape();
    const Shape& got = k.ops[j]->shape();
    if (!got.IsArray() || got.element_type() != want.element_type() ||
        got.dimensions() != want.dimensions())
      return InstrError(*loop.root, "fused operand %" + loop.inputs[j]->name() + " is " +
                                        got.ToString(false) + ", expected " +
                                        want.ToString(false));
    base[j] = k.ops[j]->raw();
  }
  Literal out;
  bool took = false;
  for (size_t j = 0; j < n_inputs && !took; ++j) {
    if (k.donatable[j] && loop.input_direct_only[j] && k.ops[j]->shape().Compatible(shape)) {
      out = std::move(*k.ops[j]);
      took = true;
    }
  }
  if (!took) out = Literal::Uninitialized(shape);
  if (n == 0) return out;
  uint8_t* o = out.raw();
  const int64_t ow = ByteWidth(shape.element_type());
  // An output in an input's buffer is written the ordinary way: its lines
  // were just read, so a store costs no extra read.
  const bool stream = !took && n * ow >= StreamingBytes();

  // Chunks [c0, c1) on the calling thread, with that thread's scratch: the
  // node slots, one span per non-direct leaf, and the root's chunk when it
  // is streamed out (every element is at most 8 bytes).
  const int n_leaves = static_cast<int>(loop.leaves.size());
  const int n_nodes = static_cast<int>(loop.nodes.size());
  std::atomic<const Instruction*> failed{nullptr};
  auto run_chunks = [&](int64_t c0, int64_t c1) {
    thread_local std::vector<uint64_t> scratch;
    const size_t words = static_cast<size_t>((loop.slots + n_leaves + 1) * kChunk);
    if (scratch.size() < words) scratch.resize(words);
    auto span = [&](int i) { return reinterpret_cast<uint8_t*>(scratch.data() + i * kChunk); };
    uint8_t* stream_buf = span(loop.slots + n_leaves);
    const uint8_t* leaf_ptr[64];
    std::vector<const uint8_t*> many_leaves;
    const uint8_t** lp = leaf_ptr;
    if (n_leaves > 64) {
      many_leaves.resize(n_leaves);
      lp = many_leaves.data();
    }
    for (int l = 0; l < n_leaves; ++l) {
      const LoopFusion::Leaf& leaf = loop.leaves[l];
      if (leaf.constant) {
        Splat(base[leaf.input], leaf.elem, std::min(kChunk, n), span(loop.slots + l));
        lp[l] = span(loop.slots + l);
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t s = c * kChunk, m = std::min(kChunk, n - s);
      for (int l = 0; l < n_leaves; ++l) {
        const LoopFusion::Leaf& leaf = loop.leaves[l];
        if (leaf.direct) {
          lp[l] = base[leaf.input] + s * leaf.elem;
        } else if (!leaf.constant) {
          Gather(leaf, base[leaf.input], s, m, span(loop.slots + l));
          lp[l] = span(loop.slots + l);
        }
      }
      for (int j = 0; j < n_nodes; ++j) {
        const LoopFusion::Node& node = loop.nodes[j];
        SpanOperand ins[3];
        const int n_in = static_cast<int>(node.args.size());
        for (int a = 0; a < n_in; ++a) {
          const int arg = node.args[a];
          if (arg >= 0) {
            ins[a] = {span(loop.nodes[arg].slot), loop.nodes[arg].type, false};
          } else {
            ins[a] = {lp[-1 - arg], loop.leaves[-1 - arg].type, false};
          }
        }
        uint8_t* dst = j + 1 < n_nodes ? span(node.slot) : stream ? stream_buf : o + s * ow;
        if (!ElementwiseSpan(*node.instr, ins, n_in, node.type, dst, m)) {
          failed.store(node.instr);
          return;
        }
      }
      if (stream) StreamCopy(o + s * ow, stream_buf, m * ow);
    }
    // Each thread orders its own streamed stores before the result is used.
    if (stream) StreamingFence();
  };
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int parts = n >= kParallelElements ? std::min<int64_t>(IntraOpThreads(), chunks) : 1;
  if (parts <= 1) {
    run_chunks(0, chunks);
  } else {
    ParallelFor(parts, [&](int p) { run_chunks(chunks * p / parts, chunks * (p + 1) / parts); });
  }
  if (const Instruction* bad = failed.load())
    return InstrError(*bad, "internal: fused op not defined for its operand types");
  return out;
}

}  // namespace meshsplit::interp
