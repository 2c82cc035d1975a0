// `meshsplit verify FILE [--num-partitions N] [--seed S] [--init uniform|fan-in]
// [--inputs DIR] [--no-propagate] [--json]`: propagates and partitions the
// module, runs the original on one device and the partitioned program on N
// virtual devices with the same inputs (seeded random ones, or .npy files),
// and compares the assembled outputs (verify/verify.h). Exit 0 when they
// agree; 1 on a mismatch (naming the first diverging instruction when it
// can) or on any error.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/shard_flags.h"
#include "runtime/npy.h"
#include "verify/mpi_runner.h"
#include "verify/verify.h"
#include "text/parser.h"
#include "transforms/batch_norm_expander.h"

namespace meshsplit::cli {
namespace {

struct VerifyFlags {
  std::string file;
  uint64_t seed = 0;
  bool no_propagate = false;
  bool strict = false;
  bool stub_opaque_custom_calls = false;
  bool json = false;
  std::string backend = "threads";
  std::string init = "uniform";
  std::string inputs;
  int64_t probe_limit_mib = 2048;
  int64_t max_while_iterations = kDefaultMaxWhileIterations;
  ShardFlags shard;
};

// Reads the .npy files of `dir` that name entry parameters (as `run
// --inputs` does: <name>.npy, else param<i>.npy). Parameters without a file
// are left to the generator, so a user can pin just the values whose role
// verify cannot see (batch-norm scales, hyperparameters). A .npy file that
// names no parameter is an error: it is most likely a misspelt name.
StatusOr<std::map<int64_t, Literal>> ReadGivenInputs(const Computation& entry,
                                                     const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::Error("--inputs: " + dir + " is not a directory");
  std::map<int64_t, Literal> given;
  std::set<std::string> used;
  for (int i = 0; i < entry.parameter_count(); ++i) {
    const Instruction* p = entry.parameter(i);
    if (p == nullptr) continue;
    std::string what = "parameter " + std::to_string(i) + " '" + p->name() + "'";
    fs::path by_name = fs::path(dir) / (p->name() + ".npy");
    fs::path by_index = fs::path(dir) / ("param" + std::to_string(i) + ".npy");
    fs::path path = fs::exists(by_name, ec) ? by_name : by_index;
    if (!fs::exists(path, ec)) continue;
    used.insert(path.filename().string());
    if (!p->shape().IsArray())
      return Status::Error(path.string() + ": " + what + " has shape " +
                           p->shape().ToString(false) + "; only arrays come from .npy files");
    MS_ASSIGN_OR_RETURN(Literal lit, ReadNpy(path.string()));
    const Shape& want = p->shape();
    if (want.element_type() == PrimitiveType::BF16 && lit.element_type() == PrimitiveType::U16 &&
        lit.shape().dimensions() == want.dimensions()) {
      Literal bf(Shape(PrimitiveType::BF16, want.dimensions()));  // bf16 travels as <u2 words
      if (lit.size_bytes() > 0) std::memcpy(bf.raw(), lit.raw(), lit.size_bytes());
      lit = std::move(bf);
    }
    if (lit.element_type() != want.element_type() ||
        lit.shape().dimensions() != want.dimensions())
      return Status::Error(path.string() + ": " + what + " expects " + want.ToString(false) +
                           " but the file holds " + lit.shape().ToString(false));
    given.emplace(i, std::move(lit));
  }
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() == ".npy" && !used.count(name))
      return Status::Error("--inputs: " + e.path().string() +
                           " names no entry parameter (expected <parameter name>.npy or "
                           "param<i>.npy)");
  }
  if (ec) return Status::Error("--inputs: cannot list " + dir + ": " + ec.message());
  return given;
}

// --init fan-in: batch-norm ops of the entry whose scale / offset (and, for
// inference, mean / variance) are entry parameters get PyTorch's initial
// values 1 / 0 (0 / 1) for them. Their roles are visible only while the ops
// are fused, so this runs before the expansion.
std::map<int64_t, Literal> BatchNormParameterValues(const Computation& entry) {
  std::map<int64_t, Literal> out;
  auto set = [&](const Instruction& bn, int operand, double value) {
    if (bn.operand_count() <= operand) return;
    const Instruction* p = bn.operand(operand);
    if (p->opcode() != Opcode::kParameter || !p->shape().IsArray()) return;
    PrimitiveType t = p->shape().element_type();
    if (t != PrimitiveType::F16 && t != PrimitiveType::BF16 && t != PrimitiveType::F32 &&
        t != PrimitiveType::F64)
      return;
    Shape shape = p->shape();
    shape.clear_layout();
    Literal lit(shape);
    for (int64_t i = 0; i < lit.element_count(); ++i) lit.SetDouble(i, value);
    out.emplace(p->attrs().parameter_number, std::move(lit));
  };
  for (const auto& instr : entry.instructions()) {
    switch (instr->opcode()) {
      case Opcode::kBatchNormTraining:
        set(*instr, 1, 1.0);
        set(*instr, 2, 0.0);
        break;
      case Opcode::kBatchNormInference:
        set(*instr, 1, 1.0);
        set(*instr, 2, 0.0);
        set(*instr, 3, 0.0);
        set(*instr, 4, 1.0);
        break;
      case Opcode::kBatchNormGrad:
        set(*instr, 1, 1.0);
        break;
      default:
        break;
    }
  }
  return out;
}

int RunVerify(const VerifyFlags& flags) {
  if (flags.backend != "threads" && flags.backend != "mpi")
    return ReportError(Status::Error("verify: unknown backend '" + flags.backend +
                                     "' (threads or mpi)"));
  if (flags.init != "uniform" && flags.init != "fan-in")
    return ReportError(Status::Error("verify: unknown --init '" + flags.init +
                                     "' (uniform or fan-in)"));
  if (flags.backend == "mpi" && (flags.init != "uniform" || !flags.inputs.empty()))
    return ReportError(Status::Error("verify: --init and --inputs need --backend threads"));
  // Batch-norm roles are read before the expansion LoadShardedModule would do.
  const bool fan_in = flags.init == "fan-in";
  ShardFlags load_flags = flags.shard;
  if (fan_in) load_flags.keep_batch_norm = true;
  StatusOr<std::unique_ptr<Module>> module = LoadShardedModule(flags.file, load_flags);
  if (!module.ok()) return ReportError(module.status());
  Module& m = **module;
  std::map<int64_t, Literal> given;
  if (fan_in && m.entry() != nullptr) {
    given = BatchNormParameterValues(*m.entry());
    if (!given.empty())
      std::cerr << "note: --init fan-in: " << given.size()
                << " batch-norm scale/offset/mean/variance parameters set to 1/0/0/1\n";
  }
  if (fan_in && !flags.shard.keep_batch_norm) {
    StatusOr<int64_t> expanded = ExpandBatchNorm(m);
    if (!expanded.ok()) return ReportError(expanded.status());
    if (*expanded > 0)
      std::cerr << "note: expanded " << *expanded
                << " batch-norm ops into reductions and elementwise ops (--keep-batch-norm "
                   "keeps them)\n";
  }
  VerifyOptions options;
  options.init = fan_in ? InputInit::kFanIn : InputInit::kUniform;
  options.max_probe_bytes = flags.probe_limit_mib << 20;
  options.max_while_iterations = flags.max_while_iterations;
  if (!flags.inputs.empty()) {
    if (m.entry() == nullptr)
      return ReportError(Status::Error(flags.file + ": module has no entry computation"));
    StatusOr<std::map<int64_t, Literal>> read = ReadGivenInputs(*m.entry(), flags.inputs);
    if (!read.ok()) return ReportError(read.status());
    std::cerr << "note: " << read->size() << " of " << m.entry()->parameter_count()
              << " entry parameters read from " << flags.inputs << ", the others generated (--init "
              << flags.init << ", --seed " << flags.seed << ")\n";
    for (auto& [index, value] : *read) given.insert_or_assign(index, std::move(value));
  }
  if (!given.empty())
    options.given_inputs = std::make_shared<const std::map<int64_t, Literal>>(std::move(given));
  // The load settled the count (--num-partitions, the mesh, the header or the
  // shardings); a module that names no devices is checked on 2.
  options.num_partitions = m.num_partitions() > 1 ? m.num_partitions() : 2;
  options.seed = flags.seed;
  options.propagate = !flags.no_propagate;
  options.strict = flags.strict;
  options.stub_opaque_custom_calls = flags.stub_opaque_custom_calls;
  const CompileOptions compile = CompileOptionsFor(flags.shard);
  options.partition = compile.partition;
  StatusOr<std::optional<PipelineRequest>> pipeline = RequestedPipeline(compile);
  if (!pipeline.ok()) return ReportError(pipeline.status());
  options.pipeline = *pipeline;
  if (options.pipeline) options.pipeline->fill_nan = true;
  // --backend mpi: every rank computes the same verdict (rank 0 judges and
  // shares it); only rank 0 prints.
  bool print = true;
  VerifyResult r;
  if (flags.backend == "mpi") {
    MpiVerifyOutcome mpi = VerifyModuleOnMpi(m, options);
    print = mpi.is_root;
    r = std::move(mpi.result);
  } else {
    r = VerifyModule(m, options);
  }
  if (!print) return r.ok() ? 0 : 1;
  if (flags.json) {
    nlohmann::json j;
    j["status"] = r.status;
    j["ok"] = r.ok();
    j["message"] = r.message;
    j["num_partitions"] = options.num_partitions;
    j["seed"] = options.seed;
    j["init"] = flags.init;
    j["given_inputs"] = options.given_inputs ? options.given_inputs->size() : 0;
    j["max_abs_error"] = r.max_abs_error;
    j["max_rel_error"] = r.max_rel_error;
    j["reduction_length"] = r.reduction_length;
    j["divergent_instruction"] = r.divergent_instruction;
    j["divergence_detail"] = r.divergence_detail;
    if (r.pipeline_ticks > 0) {
      j["pipeline_ticks"] = r.pipeline_ticks;
      j["pipeline_idle_ticks"] = r.pipeline_idle_ticks;
      j["pipeline_idle_time"] = r.pipeline_idle_time;
    }
    std::cout << j.dump(2) << "\n";
    return r.ok() ? 0 : 1;
  }
  if (r.ok()) {
    std::printf("OK: %lld partitions, seed %llu, max abs error %.3g, max rel error %.3g\n",
                static_cast<long long>(options.num_partitions),
                static_cast<unsigned long long>(options.seed), r.max_abs_error,
                r.max_rel_error);
    if (r.pipeline_ticks > 0)
      std::printf("pipeline measured: %lld ticks per device, idle in %.1f%% of the device-ticks "
                  "(the schedule's bubble), %.1f%% of the time (thread CPU, each tick as long "
                  "as its slowest device)\n",
                  static_cast<long long>(r.pipeline_ticks), 100 * r.pipeline_idle_ticks,
                  100 * r.pipeline_idle_time);
    return 0;
  }
  if (r.status == "mismatch" || r.status == "assemble") {
    std::printf("MISMATCH: %lld partitions, seed %llu: %s\n",
                static_cast<long long>(options.num_partitions),
                static_cast<unsigned long long>(options.seed), r.message.c_str());
    std::printf("max abs error %.3g, max rel error %.3g\n", r.max_abs_error, r.max_rel_error);
    if (!r.divergent_instruction.empty())
      std::printf("first diverging instruction: %%%s: %s\n", r.divergent_instruction.c_str(),
                  r.divergence_detail.c_str());
    else if (!r.divergence_detail.empty())
      std::printf("diverging instruction not found: %s\n", r.divergence_detail.c_str());
    std::fflush(stdout);
    return 1;
  }
  // An error in one of the stages. The stages' errors carry "error:"
  // already; the refusals (too-large, out of memory) get it here.
  const char* prefix = r.message.find("error:") == std::string::npos ? "error: " : "";
  std::fprintf(stderr, "%s%s (verify stage: %s)\n", prefix, r.message.c_str(),
               r.status.c_str());
  return 1;
}

const bool kRegistered = RegisterCommand(
    "verify",
    "Partition a module and check the N-device run against the 1-device run on random "
    "inputs",
    [](CLI::App* app) -> std::function<int()> {
      auto flags = std::make_shared<VerifyFlags>();
      app->add_option("FILE", flags->file, "HLO text file ('-' for stdin)")->required();
      AddNumPartitionsFlag(app, &flags->shard.num_partitions,
                           "Number of partitions (default: the mesh's, else the module "
                           "header's, else the devices its shardings name, else 2)");
      app->add_option("--seed", flags->seed, "Seed of the random inputs (default 0)");
      app->add_option("--init", flags->init,
                      "How the random inputs are drawn: 'uniform' (default: floats in [-1, 1]) "
                      "or 'fan-in' (as uniform, but parameters used as convolution kernels or "
                      "dot operands get N(0, 1/fan_in), and batch-norm scale/offset 1/0, "
                      "keeping deep networks well conditioned; see docs/models.md)");
      app->add_option("--inputs", flags->inputs,
                      "Directory of .npy files (<parameter name>.npy or param<i>.npy, full "
                      "shapes, as for run --inputs); they replace the generated values of "
                      "those parameters, the others are still generated");
      app->add_flag("--no-propagate", flags->no_propagate,
                    "Skip sharding propagation (unannotated values are replicated)");
      app->add_flag("--strict", flags->strict, "Partitioner fallbacks are errors");
      app->add_flag("--stub-opaque-custom-calls", flags->stub_opaque_custom_calls,
                    "Run custom-calls the interpreter has no meaning for (backend kernels) as a "
                    "deterministic function of their operands in both programs");
      app->add_flag("--json", flags->json, "Print one JSON document");
      app->add_option("--backend", flags->backend, "Collectives backend: threads, or mpi (under mpirun, one rank per partition)");
      app->add_option("--probe-limit-mib", flags->probe_limit_mib,
                      "On a mismatch, look for the first diverging instruction only if holding "
                      "every probed value needs at most this many MiB (default 2048)");
      app->add_option("--max-while-iterations", flags->max_while_iterations,
                      "Iterations one execution of a while loop may run in either program "
                      "before verify stops with an error naming the loop (default " +
                          std::to_string(kDefaultMaxWhileIterations) + "; 0: no limit)")
          ->check(CLI::NonNegativeNumber);
      AddShardFlags(app, &flags->shard);
      return [flags]() { return RunVerify(*flags); };
    });

}  // namespace
}  // namespace meshsplit::cli
