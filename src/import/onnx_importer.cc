// ONNX importer driver: reads the ModelProto, creates entry parameters for
// graph inputs and constants for initializers, lowers nodes in order through
// the op table (onnx_ops_*.cc), folds nodes whose inputs are all constants by
// evaluating them with the interpreter, and builds the root tuple.
#include "import/onnx_importer.h"

#include <fstream>
#include <sstream>
#include <unordered_set>

#include "import/load.h"
#include "import/onnx_context.h"
#include "runtime/interpreter.h"

namespace meshsplit {

using onnx_import::Context;

std::string SanitizeOnnxName(const std::string& name) {
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')
               ? c : '_';
  if (out.empty() || !(std::isalpha(static_cast<unsigned char>(out[0])) || out[0] == '_'))
    out = "_" + out;
  return out;
}

namespace {

const onnx_import::OpTable& Ops() {
  static const onnx_import::OpTable table = [] {
    onnx_import::OpTable t;
    onnx_import::RegisterElementwiseOps(t);
    onnx_import::RegisterTensorOps(t);
    onnx_import::RegisterNnOps(t);
    onnx_import::RegisterConvOps(t);
    return t;
  }();
  return table;
}

// Lowers `node` into a scratch module where its inputs are constants and
// evaluates it. Returns false (and no error) when the node is not foldable
// because its results are larger than the limit.
StatusOr<bool> TryFold(const onnx::NodeProto& node, Context& ctx,
                       const onnx_import::LowerFn& lower, int64_t limit) {
  Module scratch(ctx.module()->name());
  Computation* comp = scratch.AddComputation(std::make_unique<Computation>("fold"));
  scratch.set_entry(comp);
  Context fold(&scratch, comp);
  fold.set_opset(ctx.opset());
  fold.set_node(&node);
  for (const auto& in : node.input()) {
    if (in.empty() || fold.values().count(in)) continue;
    fold.values()[in] = fold.Constant(ctx.values().at(in)->literal());
  }
  MS_RETURN_IF_ERROR(lower(fold));
  std::vector<Instruction*> outs;
  for (const auto& out : node.output()) {
    if (out.empty()) continue;
    auto it = fold.values().find(out);
    if (it == fold.values().end()) return ctx.Error("output '" + out + "' was not produced");
    if (!it->second->shape().IsArray() || it->second->shape().ElementCount() > limit)
      return false;
    outs.push_back(it->second);
  }
  MS_ASSIGN_OR_RETURN(Instruction * root, fold.Emit(Opcode::kTuple, Shape(), outs));
  comp->set_root(root);
  auto result = Evaluate(*comp, {});
  if (!result.ok()) return ctx.Error("constant folding failed: " + result.status().message());
  int k = 0;
  for (const auto& out : node.output()) {
    if (out.empty()) continue;
    ctx.values()[out] = ctx.Constant(std::move(result->elements()[k++]));
  }
  return true;
}

// Removes instructions the root does not reach (folded-away shape chains).
void RemoveDead(Computation* comp) {
  std::unordered_set<Instruction*> live;
  std::vector<Instruction*> stack = {comp->root()};
  for (Instruction* p : comp->parameters()) stack.push_back(p);
  while (!stack.empty()) {
    Instruction* i = stack.back();
    stack.pop_back();
    if (!live.insert(i).second) continue;
    for (Instruction* op : i->operands()) stack.push_back(op);
  }
  // Delete users before operands: walk the insertion order backwards.
  std::vector<Instruction*> dead;
  for (const auto& i : comp->instructions())
    if (!live.count(i.get())) dead.push_back(i.get());
  for (auto it = dead.rbegin(); it != dead.rend(); ++it) comp->RemoveInstruction(*it);
}

}  // namespace

StatusOr<std::unique_ptr<Module>> ImportOnnxBytes(const std::string& bytes,
                                                  const std::string& name,
                                                  const OnnxImportOptions& opts) {
  // An empty string is a valid (empty) protobuf message, and so is much
  // other input; a model must at least carry a graph.
  if (bytes.empty())
    return Status::Error(name + ".onnx: the file is empty (0 bytes), not an ONNX model");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    return Status::Error(name + ".onnx: not a valid ONNX model (protobuf parse failed)");
  if (!model.has_graph())
    return Status::Error(name + ".onnx: not an ONNX model (the protobuf has no graph)");
  int64_t opset_version = -1;
  for (const auto& opset : model.opset_import()) {
    if (!opset.domain().empty() && opset.domain() != "ai.onnx") continue;
    if (opset.version() < 7 || opset.version() > 17)
      return Status::Error(name + ".onnx: opset " + std::to_string(opset.version()) +
                           " is not supported (13 is tested)");
    opset_version = opset.version();
  }
  if (opset_version < 0)
    return Status::Error(name + ".onnx: the model imports no ai.onnx opset (opset_import)");
  const onnx::GraphProto& graph = model.graph();
  auto module = std::make_unique<Module>(SanitizeOnnxName(name));
  Computation* entry = module->AddComputation(std::make_unique<Computation>("main"));
  module->set_entry(entry);
  module->ReserveName("main");
  Context ctx(module.get(), entry);
  ctx.set_opset(opset_version);

  std::unordered_set<std::string> initializer_names;
  for (const auto& init : graph.initializer()) {
    auto lit = onnx_import::TensorToLiteral(init);
    if (!lit.ok()) return Status::Error(name + ".onnx: initializer '" + init.name() +
                                        "': " + lit.status().message());
    initializer_names.insert(init.name());
    Instruction* c = ctx.Constant(std::move(*lit));
    std::string cname = SanitizeOnnxName(init.name());
    if (!module->IsNameUsed(cname)) {
      module->ReserveName(cname);
      c->set_name(cname);
    }
    ctx.values()[init.name()] = c;
  }
  int64_t param_number = 0;
  for (const auto& in : graph.input()) {
    if (initializer_names.count(in.name())) continue;  // an initializer's default
    const auto& tt = in.type().tensor_type();
    auto type = onnx_import::OnnxType(tt.elem_type());
    if (!type.ok()) return Status::Error(name + ".onnx: input '" + in.name() + "': " +
                                         type.status().message());
    std::vector<int64_t> dims;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value())
        return Status::Error(name + ".onnx: input '" + in.name() +
                             "' has a symbolic dimension '" + d.dim_param() +
                             "' (only static shapes are supported)");
      dims.push_back(d.dim_value());
    }
    if (std::string why = Shape(*type, dims).SizeError(); !why.empty())
      return Status::Error(name + ".onnx: input '" + in.name() + "': " + why);
    std::string pname = SanitizeOnnxName(in.name());
    if (module->IsNameUsed(pname)) pname = module->UniqueInstructionName(pname);
    module->ReserveName(pname);
    auto p = std::make_unique<Instruction>(Opcode::kParameter, pname, Shape(*type, dims));
    p->mutable_attrs().parameter_number = param_number++;
    ctx.values()[in.name()] = entry->AddInstruction(std::move(p));
  }

  for (const auto& node : graph.node()) {
    ctx.set_node(&node);
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return ctx.Error("unsupported ONNX op domain '" + node.domain() + "'");
    auto it = Ops().find(node.op_type());
    if (it == Ops().end()) return ctx.Error("unsupported ONNX op");
    const onnx_import::OpRule& rule = it->second;
    if (node.input_size() < rule.min_inputs || node.input_size() > rule.max_inputs) {
      std::string want = rule.max_inputs == onnx_import::OpRule::kVariadic
                             ? "at least " + std::to_string(rule.min_inputs)
                         : rule.min_inputs == rule.max_inputs
                             ? std::to_string(rule.min_inputs)
                             : std::to_string(rule.min_inputs) + " to " +
                                   std::to_string(rule.max_inputs);
      want += want == "1" || want == "at least 1" ? " input" : " inputs";
      return ctx.Error("takes " + want + ", got " + std::to_string(node.input_size()));
    }
    MS_RETURN_IF_ERROR(CheckAttributes(ctx, node, rule));
    bool all_const = node.op_type() != "Constant";
    for (const auto& in : node.input()) {
      if (in.empty()) continue;
      auto v = ctx.values().find(in);
      if (v == ctx.values().end())
        return ctx.Error("input '" + in + "' is not defined before use");
      if (v->second->opcode() != Opcode::kConstant) all_const = false;
    }
    if (all_const) {
      MS_ASSIGN_OR_RETURN(bool folded, TryFold(node, ctx, rule.lower, opts.fold_limit));
      if (folded) continue;
    }
    MS_RETURN_IF_ERROR(rule.lower(ctx));
    for (const auto& out : node.output())
      if (!out.empty() && !ctx.values().count(out))
        return ctx.Error("output '" + out + "' was not produced");
  }
  ctx.set_node(nullptr);

  std::vector<Instruction*> outs;
  for (const auto& out : graph.output()) {
    auto it = ctx.values().find(out.name());
    if (it == ctx.values().end())
      return Status::Error(name + ".onnx: graph output '" + out.name() + "' is never produced");
    outs.push_back(it->second);
  }
  MS_ASSIGN_OR_RETURN(Instruction * root, ctx.Emit(Opcode::kTuple, Shape(), outs));
  entry->set_root(root);
  RemoveDead(entry);
  std::vector<std::string> names;
  for (const auto& out : graph.output()) names.push_back(out.name());
  SetEntryOutputNames(*module, names);
  return module;
}

StatusOr<std::unique_ptr<Module>> ImportOnnxFile(const std::string& path,
                                                 const OnnxImportOptions& opts) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 5 && base.substr(base.size() - 5) == ".onnx")
    base = base.substr(0, base.size() - 5);
  return ImportOnnxBytes(ss.str(), base, opts);
}

}  // namespace meshsplit
