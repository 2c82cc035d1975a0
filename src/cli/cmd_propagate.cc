// `meshsplit propagate FILE [--shard SPEC] [--mesh M] [--num-partitions N]
// [--json] [--explain NAME] [--strict] [--print-rules] [-o FILE]`: applies the
// spec, runs sharding propagation (the compile pipeline up to propagate, as
// partition runs it) and prints the module, a JSON map of shardings, how one
// instruction got its sharding, or the op rules it read.
#include <iostream>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/shard_flags.h"
#include "compiler/compile.h"
#include "ir/computation.h"
#include "propagation/propagation.h"
#include "rules/op_rules.h"
#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit::cli {
namespace {

struct PropagateOptions {
  std::string file;
  bool json = false;
  std::string explain;
  bool strict = false;
  bool spmd = true;
  bool to_output = false;
  bool to_parameters = false;
  bool print_rules = false;
  std::string output;
  ShardFlags shard;
};

const Instruction* FindInstruction(const Module& m, const std::string& name) {
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions())
      if (i->name() == name) return i.get();
  return nullptr;
}

// Prints the chain of assignments that led to `name`'s sharding, following
// the first source of each step back to an annotation.
void Explain(const Module& m, const PropagationReport& report,
             const std::string& name, std::ostream& os) {
  const Instruction* instr = FindInstruction(m, name);
  if (instr == nullptr) {
    os << "no instruction named '" << name << "' after propagation\n";
    return;
  }
  if (!instr->has_sharding()) {
    auto rule = GetOpShardingRule(*instr);
    os << name << " has no sharding.\n";
    const Computation* entry = m.entry();
    if (instr->opcode() == Opcode::kParameter && instr->parent() == entry)
      os << "  it is an entry parameter: their shardings change only with "
            "--propagate-to-parameters\n";
    if (instr == entry->root())
      os << "  it is the entry result: its sharding changes only with "
            "--propagate-to-output\n";
    if (rule.kind == RuleKind::kNoRule)
      os << "  its op (" << OpcodeName(instr->opcode())
         << ") has no sharding rule: " << rule.name << "\n";
    os << "  none of its operands or users carried a sharding that its rule ("
       << rule.name << ") could pass on";
    if (!instr->operands().empty()) {
      os << "; operands:";
      for (const Instruction* op : instr->operands())
        os << " " << op->name() << (op->has_sharding() ? "(sharded)" : "(none)");
    }
    if (!instr->users().empty()) {
      os << "; users:";
      for (const Instruction* u : instr->users())
        os << " " << u->name() << (u->has_sharding() ? "(sharded)" : "(none)");
    }
    os << "\n";
    return;
  }
  os << name << " = " << instr->sharding()->ToString(false) << "\n";
  std::set<std::string> seen;
  std::string cur = name;
  int depth = 0;
  while (!cur.empty() && seen.insert(cur).second && depth++ < 64) {
    auto it = report.history.find(cur);
    if (it == report.history.end() || it->second.empty()) {
      os << "  " << cur << ": no recorded step (kept from the input)\n";
      break;
    }
    std::string next;
    for (const ShardingProvenance& p : it->second) {
      os << "  " << cur << " <- " << p.how;
      if (!p.sources.empty()) {
        os << " [";
        for (size_t k = 0; k < p.sources.size(); ++k)
          os << (k ? ", " : "") << p.sources[k];
        os << "]";
      }
      os << " via rule '" << p.rule << "'";
      if (p.aggressiveness >= 0) os << " at aggressiveness " << p.aggressiveness;
      os << ": " << p.sharding << "\n";
    }
    const ShardingProvenance& last = it->second.back();
    if (last.how.rfind("annotation (input)", 0) == 0) break;
    if (!last.sources.empty()) next = last.sources.front();
    cur = next;
  }
}

int RunPropagate(const PropagateOptions& opts) {
  if (opts.file.empty())
    return ReportError(Status::Error("propagate: missing input FILE"));
  // The module as partition would see it: the spec or mesh applied, batch
  // norm expanded unless --keep-batch-norm.
  CompileOptions options = CompileOptionsFor(opts.shard);
  options.until = opts.print_rules ? CompileStage::kPrepared : CompileStage::kPropagated;
  options.propagation.is_spmd = opts.spmd;
  options.propagation.strict = opts.strict;
  options.propagation.allow_spmd_sharding_propagation_to_output = {opts.to_output};
  options.propagation.allow_spmd_sharding_propagation_to_parameters = {opts.to_parameters};
  std::unique_ptr<Module> loaded;
  auto compiled = CompileFile(opts.file, options, &loaded);
  if (!compiled.ok()) return ReportError(compiled.status());
  Module& module = *loaded;
  if (opts.print_rules) {
    // The factor rule of every instruction, as propagation reads it.
    for (const auto& c : module.computations())
      for (const auto& i : c->instructions())
        std::cout << i->name() << ": "
                  << RuleToString(GetOpShardingRule(*i))
                  << "\n";
    return 0;
  }
  const PropagationReport& report = compiled->propagation;
  for (const std::string& w : report.warnings)
    std::cerr << opts.file << ": warning: " << w << "\n";
  if (!opts.explain.empty()) {
    if (FindInstruction(module, opts.explain) == nullptr)
      return ReportError(Status::Error("--explain: no instruction named '" +
                                       opts.explain + "' in " + opts.file));
    Explain(module, report, opts.explain, std::cout);
    return 0;
  }
  if (opts.json) {
    nlohmann::ordered_json shardings = nlohmann::ordered_json::object();
    for (const auto& c : module.computations())
      for (const auto& i : c->instructions())
        shardings[i->name()] = i->has_sharding()
                                   ? nlohmann::ordered_json(i->sharding()->ToString(false))
                                   : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json doc;
    doc["shardings"] = shardings;
    return WriteOutput(opts.output, doc.dump(2) + "\n");
  }
  return WriteOutput(opts.output, PrintModule(module));
}

const bool registered = RegisterCommand(
    "propagate", "complete the shardings of a module (sharding propagation)",
    [](CLI::App* app) {
      auto opts = std::make_shared<PropagateOptions>();
      app->add_option("file", opts->file, "HLO file ('-' for stdin)");
      app->add_flag("--json", opts->json,
                    "print {\"shardings\": {name: sharding or null}} instead");
      app->add_option("--explain", opts->explain,
                      "print how instruction NAME got its sharding");
      app->add_flag("--strict", opts->strict, "ops without a sharding rule are errors");
      app->add_flag("--print-rules", opts->print_rules,
                    "print each instruction's sharding rule (factors) and exit");
      app->add_flag("!--no-spmd", opts->spmd, "XLA's non-SPMD (MPMD) propagation mode");
      app->add_flag("--propagate-to-output", opts->to_output,
                    "allow changing the entry result's sharding");
      app->add_flag("--propagate-to-parameters", opts->to_parameters,
                    "allow changing the entry parameters' shardings");
      AddNumPartitionsFlag(app, &opts->shard.num_partitions,
                           "number of partitions (default: the mesh's, else the module "
                           "header's, else the devices its shardings name)");
      // The spec flags of AddShardFlags; the partitioner's options mean
      // nothing here.
      app->add_option("--shard", opts->shard.spec,
                      "sharding spec JSON: mesh + name-glob rules applied before propagation");
      app->add_option("--mesh", opts->shard.mesh,
                      "device mesh 'data=2,model=4' (overrides the spec's mesh)");
      app->add_flag("--keep-batch-norm", opts->shard.keep_batch_norm,
                    "keep batch-norm ops fused (by default they are expanded, as partition does)");
      AddXlaStrictFlag(app, &opts->shard.parse);
      AddOutputFlag(app, &opts->output);
      return [opts]() { return RunPropagate(*opts); };
    });

}  // namespace
}  // namespace meshsplit::cli
