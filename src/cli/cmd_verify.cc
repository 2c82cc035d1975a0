// `meshsplit verify FILE [--num-partitions N] [--seed S] [--no-propagate]
// [--json]`: propagates and partitions the module, runs the original on one
// device and the partitioned program on N virtual devices with the same
// seeded random inputs, and compares the assembled outputs (spmd/verify.h).
// Exit 0 when they agree; 1 on a mismatch (naming the first diverging
// instruction when it can) or on any error.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/shard_flags.h"
#include "spmd/mpi_runner.h"
#include "spmd/verify.h"
#include "text/parser.h"

namespace meshsplit::cli {
namespace {

struct VerifyFlags {
  std::string file;
  int64_t num_partitions = 0;
  uint64_t seed = 0;
  bool no_propagate = false;
  bool strict = false;
  bool stub_opaque_custom_calls = false;
  bool json = false;
  std::string backend = "threads";
  ShardFlags shard;
};

// Devices the module's shardings name: 1 + the largest id (0 if none).
int64_t DevicesNamed(const Sharding& s) {
  if (s.IsTuple()) {
    int64_t n = 0;
    for (const Sharding& e : s.tuple_elements()) n = std::max(n, DevicesNamed(e));
    return n;
  }
  if (s.IsMaximal()) return s.device() + 1;
  if (s.IsTiled()) return s.tile_assignment().MaxDevice() + 1;
  return 0;
}

int64_t DefaultPartitions(const Module& m) {
  if (m.num_partitions() > 1) return m.num_partitions();
  int64_t n = 0;
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions())
      if (i->has_sharding()) n = std::max(n, DevicesNamed(*i->sharding()));
  return n > 1 ? n : 2;
}

int RunVerify(const VerifyFlags& flags) {
  if (flags.backend != "threads" && flags.backend != "mpi")
    return ReportError(Status::Error("verify: unknown backend '" + flags.backend +
                                     "' (threads or mpi)"));
  StatusOr<std::unique_ptr<Module>> module = LoadShardedModule(flags.file, flags.shard);
  if (!module.ok()) return ReportError(module.status());
  Module& m = **module;
  VerifyOptions options;
  options.num_partitions =
      flags.num_partitions > 0 ? flags.num_partitions : DefaultPartitions(m);
  options.seed = flags.seed;
  options.propagate = !flags.no_propagate;
  options.strict = flags.strict;
  options.stub_opaque_custom_calls = flags.stub_opaque_custom_calls;
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
    j["max_abs_error"] = r.max_abs_error;
    j["max_rel_error"] = r.max_rel_error;
    j["reduction_length"] = r.reduction_length;
    j["divergent_instruction"] = r.divergent_instruction;
    j["divergence_detail"] = r.divergence_detail;
    std::cout << j.dump(2) << "\n";
    return r.ok() ? 0 : 1;
  }
  if (r.ok()) {
    std::printf("OK: %lld partitions, seed %llu, max abs error %.3g, max rel error %.3g\n",
                static_cast<long long>(options.num_partitions),
                static_cast<unsigned long long>(options.seed), r.max_abs_error,
                r.max_rel_error);
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
  // An error in one of the stages. Messages already carry "error:".
  std::fprintf(stderr, "%s (verify stage: %s)\n", r.message.c_str(), r.status.c_str());
  return 1;
}

const bool kRegistered = RegisterCommand(
    "verify",
    "Partition a module and check the N-device run against the 1-device run on random "
    "inputs",
    [](CLI::App* app) -> std::function<int()> {
      auto flags = std::make_shared<VerifyFlags>();
      app->add_option("FILE", flags->file, "HLO text file ('-' for stdin)")->required();
      app->add_option("--num-partitions", flags->num_partitions,
                      "Number of partitions (default: the module header's, else the "
                      "devices its shardings name)");
      app->add_option("--seed", flags->seed, "Seed of the random inputs (default 0)");
      app->add_flag("--no-propagate", flags->no_propagate,
                    "Skip sharding propagation (unannotated values are replicated)");
      app->add_flag("--strict", flags->strict, "Partitioner fallbacks are errors");
      app->add_flag("--stub-opaque-custom-calls", flags->stub_opaque_custom_calls,
                    "Run custom-calls the interpreter has no meaning for (backend kernels) as a "
                    "deterministic function of their operands in both programs");
      app->add_flag("--json", flags->json, "Print one JSON document");
      app->add_option("--backend", flags->backend, "Collectives backend: threads, or mpi (under mpirun, one rank per partition)");
      AddShardFlags(app, &flags->shard);
      return [flags]() { return RunVerify(*flags); };
    });

}  // namespace
}  // namespace meshsplit::cli
