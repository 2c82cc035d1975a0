// Module verifier: structural checks per module and computation, then shape
// inference per instruction compared with its declared shape (layouts
// ignored), then a basic check that shardings fit the module's device count.
#include "ir/verifier.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "ir/shape_inference.h"
#include "ir/shape_inference_util.h"

namespace meshsplit {

using shape_inference_internal::StrCat;

namespace {

// Device facts read from a sharding's canonical text: the tile assignment
// sizes and the largest device id. Reading the text keeps the verifier
// independent of the Sharding class internals.
struct ShardingDevices {
  int64_t max_tile_devices = 0;  // largest product of a devices=[...] list
  int64_t max_device_id = -1;
};

void ReadInts(const std::string& s, size_t& pos, std::vector<int64_t>& out) {
  while (pos < s.size()) {
    if (std::isdigit(static_cast<unsigned char>(s[pos]))) {
      int64_t v = 0;
      while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
        if (v < (int64_t{1} << 55)) v = v * 10 + (s[pos] - '0');
        ++pos;
      }
      out.push_back(v);
    } else if (s[pos] == ',') {
      ++pos;
    } else {
      break;
    }
  }
}

ShardingDevices ScanShardingText(const std::string& s) {
  ShardingDevices r;
  for (size_t pos = 0; (pos = s.find("device", pos)) != std::string::npos;) {
    pos += 6;
    if (s.compare(pos, 1, "=") == 0) {  // maximal device=N
      ++pos;
      std::vector<int64_t> v;
      ReadInts(s, pos, v);
      if (!v.empty()) r.max_device_id = std::max(r.max_device_id, v[0]);
      continue;
    }
    if (s.compare(pos, 3, "s=[") != 0) continue;
    pos += 3;
    std::vector<int64_t> dims;
    ReadInts(s, pos, dims);
    int64_t count = 1;
    for (int64_t d : dims) count = std::min<int64_t>(count * std::max<int64_t>(d, 1), int64_t{1} << 40);
    r.max_tile_devices = std::max(r.max_tile_devices, count);
    if (pos < s.size() && s[pos] == ']') ++pos;
    if (s.compare(pos, 2, "<=") == 0) {
      r.max_device_id = std::max(r.max_device_id, count - 1);
      continue;
    }
    std::vector<int64_t> ids;
    ReadInts(s, pos, ids);
    for (int64_t id : ids) r.max_device_id = std::max(r.max_device_id, id);
  }
  return r;
}

// Checks the minor_to_major part of `shape`'s layout text (before any ':'
// tiling suffix): a permutation of the dimension numbers. Empty when fine.
std::string LayoutProblem(const Shape& shape) {
  if (shape.IsTuple()) {
    for (const Shape& e : shape.tuple_shapes()) {
      std::string p = LayoutProblem(e);
      if (!p.empty()) return p;
    }
    return "";
  }
  if (!shape.layout().has_value() || !shape.IsArray()) return "";
  const std::string& text = *shape.layout();
  std::string m2m = text.substr(0, text.find(':'));
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos < m2m.size()) {
    size_t comma = m2m.find(',', pos);
    std::string item = m2m.substr(pos, comma == std::string::npos ? std::string::npos
                                                                 : comma - pos);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    bool digits = !item.empty() && item.size() < 10 &&
                  std::all_of(item.begin(), item.end(), [](char c) {
                    return std::isdigit(static_cast<unsigned char>(c));
                  });
    if (!digits)
      return StrCat("layout {", text, "} of ", shape.ToString(false), ": '", item,
                    "' is not a dimension number");
    dims.push_back(std::stoll(item));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (static_cast<int>(dims.size()) != shape.rank())
    return StrCat("layout {", text, "} has ", dims.size(), " entries but ",
                  shape.ToString(false), " has rank ", shape.rank());
  std::vector<bool> seen(dims.size(), false);
  for (int64_t d : dims) {
    if (d >= shape.rank())
      return StrCat("layout {", text, "} names dimension ", d, " but ",
                    shape.ToString(false), " has rank ", shape.rank());
    if (seen[d])
      return StrCat("layout {", text, "} repeats dimension ", d);
    seen[d] = true;
  }
  return "";
}

class Verifier {
 public:
  explicit Verifier(const Module& m) : module_(m) {}

  std::vector<Status> Run() {
    if (module_.entry() == nullptr)
      errors_.push_back(Status::Error("module '" + module_.name() +
                                      "' has no ENTRY computation"));
    std::set<const Computation*> in_module;
    for (const auto& c : module_.computations()) in_module.insert(c.get());
    if (module_.entry() != nullptr && !in_module.count(module_.entry()))
      errors_.push_back(Status::Error("the entry computation is not in the module"));
    for (const auto& c : module_.computations()) VerifyComputation(*c, in_module);
    VerifyEntryLayout();
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const Status& a, const Status& b) {
                       return a.loc().line < b.loc().line;
                     });
    return std::move(errors_);
  }

 private:
  void VerifyComputation(const Computation& c,
                         const std::set<const Computation*>& in_module) {
    if (c.root() == nullptr) {
      errors_.push_back(Status::Error(
          StrCat("computation %", c.name(), " has no root instruction"), c.loc()));
    } else if (c.root()->parent() != &c) {
      errors_.push_back(Status::Error(
          StrCat("root of computation %", c.name(), " belongs to another computation"),
          c.loc()));
    }
    // Parameter numbers: unique and 0..n-1.
    std::map<int64_t, const Instruction*> params;
    for (const auto& instr : c.instructions()) {
      if (instr->opcode() != Opcode::kParameter) continue;
      int64_t num = instr->attrs().parameter_number;
      if (num < 0) {
        errors_.push_back(Status::Error(
            StrCat("parameter %", instr->name(), " has negative number ", num),
            instr->loc()));
        continue;
      }
      auto [it, fresh] = params.emplace(num, instr.get());
      if (!fresh)
        errors_.push_back(Status::Error(
            StrCat("parameter number ", num, " of computation %", c.name(),
                   " is used by both %", it->second->name(), " and %",
                   instr->name()),
            instr->loc()));
    }
    int64_t expect = 0;
    for (const auto& [num, instr] : params) {
      if (num != expect) {
        errors_.push_back(Status::Error(
            StrCat("computation %", c.name(), " has parameter ", num,
                   " but no parameter ", expect,
                   " (parameter numbers must be contiguous from 0)"),
            instr->loc()));
        break;
      }
      ++expect;
    }
    for (const auto& instr : c.instructions())
      VerifyInstruction(c, *instr, in_module);
  }

  void VerifyInstruction(const Computation& c, const Instruction& instr,
                         const std::set<const Computation*>& in_module) {
    const std::string prefix =
        StrCat(OpcodeName(instr.opcode()), " %", instr.name(), ": ");
    for (int i = 0; i < instr.operand_count(); ++i) {
      if (instr.operand(i) == nullptr || instr.operand(i)->parent() != &c) {
        errors_.push_back(Status::Error(
            prefix + StrCat("operand ", i, " is not an instruction of computation %",
                            c.name()),
            instr.loc()));
        return;
      }
    }
    for (const Computation* callee : instr.called_computations()) {
      if (callee == nullptr || !in_module.count(callee)) {
        errors_.push_back(Status::Error(
            prefix + "calls a computation that is not in the module", instr.loc()));
        return;
      }
      if (callee == &c) {
        errors_.push_back(Status::Error(prefix + "calls its own computation %" +
                                            c.name(),
                                        instr.loc()));
        return;
      }
    }
    if (std::string p = LayoutProblem(instr.shape()); !p.empty()) {
      errors_.push_back(Status::Error(prefix + p, instr.loc()));
      return;
    }
    StatusOr<Shape> inferred = InferShape(instr);
    if (!inferred.ok()) {
      errors_.push_back(inferred.status());
      return;
    }
    if (!inferred->Compatible(instr.shape())) {
      errors_.push_back(Status::Error(
          prefix + StrCat("declared shape ", instr.shape().ToString(false),
                          " does not match inferred shape ",
                          inferred->ToString(false)),
          instr.loc()));
      return;
    }
    if (instr.has_sharding()) VerifySharding(instr, prefix);
  }

  // `entry_computation_layout={(params)->result}` must describe the entry's
  // signature (layouts ignored), as XLA's verifier requires.
  void VerifyEntryLayout() {
    const Computation* entry = module_.entry();
    if (entry == nullptr || entry->root() == nullptr) return;
    const std::string* text = nullptr;
    for (const auto& [key, value] : module_.header_attrs())
      if (key == "entry_computation_layout") text = &value;
    if (text == nullptr) return;
    std::string declared = StripLayouts(*text);
    // Split "(p0,p1,...)->result": find the paren closing the parameter
    // list, then split it at top-level commas.
    if (declared.empty() || declared[0] != '(') return;  // not understood
    int depth = 0;
    size_t close = std::string::npos;
    for (size_t i = 0; i < declared.size() && close == std::string::npos; ++i) {
      char c = declared[i];
      if (c == '(' || c == '[') ++depth;
      if ((c == ')' || c == ']') && --depth == 0) close = i;
    }
    if (close == std::string::npos || declared.compare(close + 1, 2, "->") != 0)
      return;
    const std::string inner = declared.substr(1, close - 1);
    const std::string result = declared.substr(close + 3);
    std::vector<std::string> params;
    std::string current;
    depth = 0;
    for (char c : inner) {
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (depth == 0 && c == ',') {
        params.push_back(current);
        current.clear();
      } else {
        current += c;
      }
    }
    if (!inner.empty()) params.push_back(current);
    auto fail = [&](const std::string& what) {
      errors_.push_back(Status::Error(
          "entry_computation_layout does not match the entry computation: " + what,
          entry->loc()));
    };
    if (static_cast<int>(params.size()) != entry->parameter_count())
      return fail(StrCat("it lists ", params.size(), " parameters but the entry has ",
                         entry->parameter_count()));
    for (int i = 0; i < entry->parameter_count(); ++i) {
      if (entry->parameter(i) == nullptr) return;  // reported elsewhere
      std::string actual = StripLayouts(entry->parameter(i)->shape().ToString(false));
      if (params[i] != actual)
        return fail(StrCat("parameter ", i, " is ", params[i],
                           " in the layout but ", actual, " in the computation"));
    }
    std::string actual = StripLayouts(entry->root()->shape().ToString(false));
    if (result != actual) {
      auto clip = [](const std::string& x) {
        return x.size() > 120 ? x.substr(0, 117) + "..." : x;
      };
      fail(StrCat("the result is ", clip(result), " in the layout but ", clip(actual),
                  " in the computation"));
    }
  }

  // Removes whitespace, /*...*/ comments, the outer braces and every {...}
  // layout block, and spells tokens `token`, so signatures compare
  // layout-free.
  static std::string StripLayouts(const std::string& in) {
    std::string s;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in.compare(i, 2, "/*") == 0) {
        size_t end = in.find("*/", i + 2);
        if (end == std::string::npos) break;
        i = end + 1;
        continue;
      }
      if (!std::isspace(static_cast<unsigned char>(in[i]))) s += in[i];
    }
    if (s.size() >= 2 && s.front() == '{' && s.back() == '}')
      s = s.substr(1, s.size() - 2);
    std::string out;
    int depth = 0;
    for (char c : s) {
      if (c == '{') ++depth;
      else if (c == '}') depth = std::max(0, depth - 1);
      else if (depth == 0) out += c;
    }
    for (size_t pos; (pos = out.find("token[]")) != std::string::npos;)
      out.erase(pos + 5, 2);
    return out;
  }

  void VerifySharding(const Instruction& instr, const std::string& prefix) {
    const int64_t partitions = module_.num_partitions();
    // The tiling must fit the shape: data tile dims = rank, one sharding per
    // tuple leaf. Device ids are checked below only when the module declares
    // its partition count (XLA's tests often leave it out).
    const int64_t any_devices = int64_t{1} << 62;
    if (instr.opcode() == Opcode::kOutfeed) {
      if (!VerifyOutfeedSharding(instr, prefix, any_devices)) return;
    } else {
      std::vector<int64_t> leaf_ranks;
      CollectLeafRanks(instr.shape(), leaf_ranks);
      Status fit = instr.shape().IsTuple()
                       ? instr.sharding()->ValidateTuple(leaf_ranks, any_devices)
                       : instr.sharding()->Validate(instr.shape().IsArray()
                                                        ? instr.shape().rank()
                                                        : 0,
                                                    any_devices);
      if (!fit.ok()) {
        errors_.push_back(Status::Error(prefix + "sharding does not fit " +
                                            instr.shape().ToString(false) + ": " +
                                            fit.message(),
                                        instr.loc()));
        return;
      }
    }
    if (partitions <= 1) return;
    const int64_t devices = partitions * std::max<int64_t>(1, module_.replica_count());
    // Without metadata: an op_name may quote any text, "devices=[8]" included.
    ShardingDevices d = ScanShardingText(instr.sharding()->ToString(/*include_metadata=*/false));
    std::string have = module_.replica_count() > 1
                           ? StrCat(devices, " devices (", partitions,
                                    " partitions x ", module_.replica_count(),
                                    " replicas)")
                           : StrCat(partitions, " partitions");
    if (d.max_tile_devices > devices) {
      errors_.push_back(Status::Error(
          prefix + StrCat("tile assignment uses ", d.max_tile_devices,
                          " devices but the module has ", have),
          instr.loc()));
    } else if (d.max_device_id >= devices) {
      errors_.push_back(Status::Error(
          prefix + StrCat("sharding names device ", d.max_device_id,
                          " but the module has ", have),
          instr.loc()));
    }
  }

  // An outfeed's sharding describes its operands, not its token result: one
  // element per top-level data leaf, optionally followed by the token's (or
  // one non-tuple sharding for all of them), which is how the partitioner
  // reads it (partitioner/handlers/feeds.cc). Each element given for an array
  // leaf must fit that leaf; the partitioner indexes tile dims by it. Records
  // an error and returns false when one does not.
  bool VerifyOutfeedSharding(const Instruction& instr, const std::string& prefix,
                             int64_t any_devices) {
    if (instr.operand_count() < 1) return true;
    const Shape& data = instr.operand(0)->shape();
    std::vector<const Shape*> leaves;
    if (data.IsTuple()) {
      for (const Shape& e : data.tuple_shapes()) leaves.push_back(&e);
    } else {
      leaves.push_back(&data);
    }
    const Sharding& s = *instr.sharding();
    for (size_t i = 0; i < leaves.size(); ++i) {
      const Sharding* e = &s;
      if (s.IsTuple()) {
        if (i >= s.tuple_elements().size()) break;
        e = &s.tuple_elements()[i];
      }
      if (!leaves[i]->IsArray()) continue;
      Status fit = e->Validate(leaves[i]->rank(), any_devices);
      if (!fit.ok()) {
        errors_.push_back(Status::Error(
            prefix + "sharding does not fit outfeed operand " +
                (data.IsTuple() ? StrCat("element ", i, " ") : std::string()) +
                leaves[i]->ToString(false) + ": " + fit.message(),
            instr.loc()));
        return false;
      }
    }
    return true;
  }

  static void CollectLeafRanks(const Shape& shape, std::vector<int64_t>& out) {
    if (shape.IsTuple()) {
      for (const Shape& e : shape.tuple_shapes()) CollectLeafRanks(e, out);
      return;
    }
    out.push_back(shape.IsArray() ? shape.rank() : 0);
  }

  const Module& module_;
  std::vector<Status> errors_;
};

}  // namespace

std::vector<Status> VerifyModuleAll(const Module& module) {
  return Verifier(module).Run();
}

Status VerifyModule(const Module& module) {
  std::vector<Status> errors = VerifyModuleAll(module);
  if (errors.empty()) return Status::Ok();
  return errors.front();
}

}  // namespace meshsplit
