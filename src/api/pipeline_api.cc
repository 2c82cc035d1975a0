// The pipeline half of the public API: load, then the compile pipeline
// (compiler/compile.h) with the options the CLI command of the same name
// passes (cmd_partition / cmd_run / cmd_verify), so that a result from
// Python or C++ is the CLI's result bit for bit.
#include <cstring>

#include "api/internal.h"
#include "autoshard/decision_space.h"
#include "autoshard/plan.h"
#include "compiler/compile.h"
#include "import/load.h"
#include "import/shard_spec.h"
#include "ir/module.h"
#include "report/report.h"
#include "runtime/run_module.h"
#include "text/parser.h"
#include "text/printer.h"
#include "verify/run_spmd.h"
#include "verify/verify.h"

namespace meshsplit::api {
namespace {

TensorInfo InfoOf(const std::string& name, const Shape& shape) {
  TensorInfo t;
  t.name = name;
  t.dtype = std::string(PrimitiveTypeName(shape.element_type()));
  if (shape.IsArray()) t.shape = shape.dimensions();
  return t;
}

void FlattenOutputs(const Shape& shape, std::vector<TensorInfo>& out) {
  if (shape.IsTuple()) {
    for (const Shape& e : shape.tuple_shapes()) FlattenOutputs(e, out);
    return;
  }
  out.push_back(InfoOf("out" + std::to_string(out.size()), shape));
}

bool IsCollective(Opcode op) {
  switch (op) {
    case Opcode::kAllReduce:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
      return true;
    default:
      return false;
  }
}

}  // namespace

// Builds api::Module values and hands out mutable copies of them.
struct ModuleAccess {
  static Module Make(std::unique_ptr<meshsplit::Module> m, std::string name) {
    Module out;
    if (m->entry() == nullptr)
      throw Error("error: " + name + ": module has no entry computation");
    const Computation& entry = *m->entry();
    for (int i = 0; i < entry.parameter_count(); ++i)
      out.parameters_.push_back(InfoOf(entry.parameter(i)->name(), entry.parameter(i)->shape()));
    FlattenOutputs(entry.root()->shape(), out.outputs_);
    // An ONNX model's graph outputs name them, as `run` names its files.
    std::vector<std::string> names = EntryOutputNames(*m);
    if (names.size() == out.outputs_.size())
      for (size_t i = 0; i < names.size(); ++i) out.outputs_[i].name = names[i];
    out.module_ = std::move(m);
    out.source_name_ = std::move(name);
    return out;
  }
  static std::unique_ptr<meshsplit::Module> Copy(const Module& m) { return m.module_->Clone(); }
};

int64_t Module::num_partitions() const { return module_->num_partitions(); }
std::string Module::ToString() const { return PrintModule(*module_); }

Module Load(const std::string& path) {
  return ModuleAccess::Make(Unwrap(LoadModule(path)), path);
}

Module Parse(const std::string& text, const std::string& name) {
  if (text.empty()) throw Error("error: " + name + ": empty module text");
  auto file = std::make_shared<SourceFile>(SourceFile{name, text});
  return ModuleAccess::Make(Unwrap(ParseHloText(file)), name);
}

// --- ShardSpec ------------------------------------------------------------------

meshsplit::ShardSpec ToInternal(const ShardSpec& spec) {
  meshsplit::ShardSpec s;
  s.mesh = ToInternal(spec.mesh);
  s.has_mesh = true;
  for (const ShardRule& r : spec.rules) s.rules.push_back({r.match, r.replicated, r.dims.dims, r.on_op});
  s.existing_axes = spec.existing_axes;
  return s;
}

ShardSpec FromInternal(const meshsplit::ShardSpec& s) {
  ShardSpec spec;
  if (s.has_mesh) spec.mesh = FromInternal(s.mesh);
  for (const meshsplit::ShardRule& r : s.rules)
    spec.rules.push_back({r.match, r.replicated, PartitionSpec{r.dims}, r.on_op});
  spec.existing_axes = s.existing_axes;
  return spec;
}

ShardSpec ShardSpec::FromJson(const std::string& text, const std::string& name) {
  meshsplit::ShardSpec s = Unwrap(ParseShardSpec(text, name));
  if (!s.has_mesh) throw Error("error: " + name + ": the sharding spec has no mesh");
  return FromInternal(s);
}

ShardSpec ShardSpec::Load(const std::string& path) {
  return FromJson(Unwrap(ReadSourceFile(path))->text, path);
}

std::string ShardSpec::ToJson() const {
  return autoshard::SpecToJson(ToInternal(*this), "written by the meshsplit API");
}

// --- the pipeline -----------------------------------------------------------------

namespace {

// What every command sets from --shard (cli/shard_flags.cc
// CompileOptionsFor): the spec, batch-norm expansion, all stages on.
CompileOptions PipelineOptions(const ShardSpec* spec) {
  CompileOptions o;
  if (spec != nullptr) o.spec = std::make_shared<const meshsplit::ShardSpec>(ToInternal(*spec));
  o.expand_batch_norm = true;
  return o;
}

// A copy of `module` through the pipeline's front passes (apply-spec,
// expand-batch-norm, and the IR verifier when `verify`), as run, verify and
// report load theirs.
std::unique_ptr<meshsplit::Module> Prepare(const Module& module, const ShardSpec* spec,
                                           bool verify = false) {
  std::unique_ptr<meshsplit::Module> m = ModuleAccess::Copy(module);
  CompileOptions o = PipelineOptions(spec);
  o.until = CompileStage::kPrepared;
  o.verify_input = verify;
  Unwrap(Compile(*m, o));
  return m;
}

}  // namespace

PartitionResult Partition(const Module& module, const ShardSpec* spec, const Options& options) {
  std::unique_ptr<meshsplit::Module> m = ModuleAccess::Copy(module);
  CompileOptions o = PipelineOptions(spec);
  o.num_partitions = options.num_partitions;
  o.propagate = options.propagate;
  o.partition.num_partitions = options.num_partitions;
  o.partition.strict = options.strict;
  CompileResult compiled = Unwrap(Compile(*m, o));
  const meshsplit::Module& out = *compiled.partitioned;
  PartitionResult r;
  r.text = PrintModule(out);
  r.num_partitions = out.num_partitions();
  for (const auto& c : out.computations())
    for (const auto& i : c->instructions())
      if (IsCollective(i->opcode())) ++r.collectives[std::string(OpcodeName(i->opcode()))];
  return r;
}

namespace {

// The input for parameter `i`: dtype and dims exactly the parameter's, bf16
// also as raw u16 words (as ReadEntryInputs takes .npy files).
Literal InputLiteral(const Instruction& param, const HostArray& a) {
  const Shape& want = param.shape();
  const std::string what = "input '" + param.name() + "' (parameter " +
                           std::to_string(param.attrs().parameter_number) + ")";
  if (!want.IsArray())
    throw Error("error: " + what + " has shape " + want.ToString(false) +
                "; only array parameters take host arrays");
  std::optional<PrimitiveType> type = ParsePrimitiveType(a.dtype);
  if (!type) throw Error("error: " + what + ": unknown element type '" + a.dtype + "'");
  if (*type == PrimitiveType::U16 && want.element_type() == PrimitiveType::BF16)
    type = PrimitiveType::BF16;
  Shape got(*type, a.shape);
  if (*type != want.element_type() || a.shape != want.dimensions())
    throw Error("error: " + what + " expects " + want.ToString(false) + " but got " +
                got.ToString(false));
  Shape shape = want;
  shape.clear_layout();
  Literal lit = Literal::Uninitialized(shape);
  if (static_cast<int64_t>(a.data.size()) != lit.size_bytes())
    throw Error("error: " + what + ": " + std::to_string(a.data.size()) + " bytes for " +
                want.ToString(false) + " (" + std::to_string(lit.size_bytes()) + " bytes)");
  if (lit.size_bytes() > 0) std::memcpy(lit.raw(), a.data.data(), a.data.size());
  return lit;
}

HostArray ToHost(const Literal& lit) {
  HostArray a;
  a.dtype = std::string(PrimitiveTypeName(lit.element_type()));
  a.shape = lit.shape().dimensions();
  a.data.assign(lit.raw(), lit.raw() + lit.size_bytes());
  return a;
}

}  // namespace

std::vector<HostArray> Run(const Module& module, const std::vector<HostArray>& inputs,
                           const ShardSpec* spec, const Options& options) {
  std::unique_ptr<meshsplit::Module> m = Prepare(module, spec);
  const Computation& entry = *m->entry();
  if (static_cast<int>(inputs.size()) != entry.parameter_count())
    throw Error("error: " + std::to_string(inputs.size()) + " inputs for " +
                std::to_string(entry.parameter_count()) + " entry parameters");
  std::vector<Literal> args;
  for (int i = 0; i < entry.parameter_count(); ++i)
    args.push_back(InputLiteral(*entry.parameter(i), inputs[i]));
  // As `meshsplit run`: on devices when partitioning to more than one.
  const bool spmd = options.num_partitions > 1 || (spec != nullptr && m->num_partitions() > 1);
  SpmdRunRequest request{options.num_partitions > 0 ? options.num_partitions : m->num_partitions(),
                         /*already_partitioned=*/false, options.propagate, "threads",
                         PipelineOptions(spec).partition};
  Literal result = spmd ? Unwrap(RunModuleOnDevices(*m, std::move(args), request))
                        : Unwrap(RunEntry(*m, std::move(args)));
  std::vector<HostArray> out;
  for (const Literal* l : OutputArrays(result)) out.push_back(ToHost(*l));
  return out;
}

VerifyReport Verify(const Module& module, const ShardSpec* spec, uint64_t seed,
                    const Options& options) {
  std::unique_ptr<meshsplit::Module> m = Prepare(module, spec);
  VerifyOptions vopts;
  vopts.num_partitions = options.num_partitions > 0 ? options.num_partitions : m->num_partitions();
  if (vopts.num_partitions < 2)
    throw Error("error: " + module.source_name() +
                ": verify needs two or more partitions (give a spec or num_partitions)");
  vopts.seed = seed;
  vopts.propagate = options.propagate;
  vopts.strict = options.strict;
  vopts.partition = PipelineOptions(spec).partition;
  VerifyResult r = VerifyModule(*m, vopts);
  // A program meshsplit cannot propagate or partition is bad input, as in
  // partition(); a wrong or failing run is the verdict.
  if (r.status == "propagate" || r.status == "partition") throw Error(r.message);
  VerifyReport out;
  out.ok = r.ok();
  out.status = r.status;
  out.message = r.message;
  out.num_partitions = vopts.num_partitions;
  out.max_abs_error = r.max_abs_error;
  out.max_rel_error = r.max_rel_error;
  out.first_diverging = r.divergent_instruction;
  out.divergence_detail = r.divergence_detail;
  return out;
}

std::string Report(const Module& module, const ShardSpec* spec, const Options& options) {
  // As cmd_report.cc: costs read declared shapes, so the input is verified.
  ReportOptions r;
  r.file = module.source_name();
  r.num_partitions = options.num_partitions;
  r.propagate = options.propagate;
  r.partition = PipelineOptions(spec).partition;
  if (spec != nullptr) r.mesh = spec->mesh.ToString();
  ReportData d;
  ThrowIfError(BuildReport(Prepare(module, spec, /*verify=*/true), r, &d));
  return ReportJson(d).dump(2);
}

Plan Autoshard(const Module& module, const Mesh& mesh, const AutoshardOptions& options) {
  if (options.budget < 1) throw Error("error: the budget must be at least 1");
  // As cmd_autoshard.cc; the options not given here keep the defaults the
  // command's flags also have (autoshard/decision_space.h, objective.h).
  std::unique_ptr<meshsplit::Module> m = Prepare(module, nullptr, /*verify=*/true);
  autoshard::PlanOptions plan;
  plan.existing_axes = options.existing_axes;
  plan.search.max_evaluations = options.budget;
  plan.search.max_seconds = options.time_limit;
  plan.search.seed = options.seed;
  plan.machine.memory_limit_bytes = options.memory_limit_bytes;
  auto planner = Unwrap(autoshard::Planner::Create(*m, ToInternal(mesh), std::move(plan)));
  const autoshard::SearchResult r = planner->Search();
  Plan out;
  out.spec = FromInternal(planner->SpecOf(r.best));
  out.cost = r.best_eval.time_seconds;
  out.evaluations = r.evaluations;
  return out;
}

}  // namespace meshsplit::api
