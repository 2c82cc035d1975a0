// `meshsplit fuzz-shardings FILE_OR_DIR --seed S --count N [--num-partitions P]
// [--json]`: rewrites the shardings of real modules at random (spmd/
// sharding_fuzz.h), partitions and verifies every variant, and lists each
// failure with its case, variant, mutated module file and error or mismatch.
// Exit 0 when no variant failed.
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/shard_flags.h"
#include "verify/sharding_fuzz.h"

namespace meshsplit::cli {
namespace {

struct FuzzFlags {
  std::string input;
  uint64_t seed = 0;
  uint64_t input_seed = 0;
  int64_t count = 4;
  int64_t num_partitions = 0;
  bool json = false;
  bool verbose = false;
  bool keep_passing = false;
  bool keep_fallbacks = false;
  std::string filter;
  std::string out_dir = "fuzz-shardings-out";
  double timeout_seconds = 20;
  double max_memory_gib = 1;
  double max_case_mib = 256;
};

const char* OutcomeName(CaseOutcome o) {
  return o == CaseOutcome::kPassed ? "pass" : o == CaseOutcome::kSkipped ? "skip" : "fail";
}

nlohmann::json VariantJson(const FuzzVariantResult& r) {
  nlohmann::json v;
  v["case"] = r.case_name;
  v["variant"] = r.variant;
  v["variant_seed"] = r.variant_seed;
  v["outcome"] = IsTimeout(r.result) ? "timeout" : OutcomeName(r.result.outcome);
  if (!r.result.reason.empty()) v["reason"] = r.result.reason;
  v["detail"] = r.result.detail;
  v["reduced_shapes"] = r.result.reduced_shapes;
  if (r.result.outcome == CaseOutcome::kFailed) v["file"] = r.file;
  v["reshard_fallback_gather_all"] = r.gather_all;
  v["reshard_fallback_gather_some"] = r.gather_some;
  if (!r.strict_error.empty()) v["strict_error"] = r.strict_error;
  v["seconds"] = r.result.seconds;
  nlohmann::json muts = nlohmann::json::array();
  for (const ShardingMutation& m : r.mutations)
    muts.push_back({{"instruction", m.instruction}, {"before", m.before}, {"after", m.after}});
  v["mutations"] = std::move(muts);
  return v;
}

int RunFuzz(const FuzzFlags& flags) {
  ShardingFuzzOptions options;
  options.seed = flags.seed;
  options.count = flags.count;
  options.num_partitions = flags.num_partitions;
  options.filter = flags.filter;
  options.out_dir = flags.out_dir;
  options.keep_passing = flags.keep_passing;
  options.keep_fallbacks = flags.keep_fallbacks;
  options.max_case_bytes = static_cast<int64_t>(flags.max_case_mib * (1 << 20));
  options.run.seed = flags.input_seed;
  options.run.timeout_seconds = flags.timeout_seconds;
  options.run.max_run_bytes = static_cast<int64_t>(flags.max_memory_gib * (int64_t{1} << 30));
  options.run.child_memory_bytes = options.run.max_run_bytes + (int64_t{2} << 30);
  if (flags.count < 1) return ReportError(Status::Error("fuzz-shardings: --count must be >= 1"));
  auto summary = RunShardingFuzz(flags.input, options, [&](const FuzzVariantResult& r) {
    if (flags.json) return;
    const PartitioningCaseResult& res = r.result;
    if (res.outcome == CaseOutcome::kFailed) {
      std::printf("%s %s variant %lld (seed %llu): %s\n  module: %s\n",
                  IsTimeout(res) ? "TIMEOUT" : "FAIL", r.case_name.c_str(),
                  static_cast<long long>(r.variant), static_cast<unsigned long long>(flags.seed),
                  res.detail.c_str(), r.file.c_str());
    } else if (r.gather_all > 0 && flags.keep_fallbacks) {
      std::printf("GATHER-ALL %s variant %lld: %lld reshard(s) gathered every tiled dim\n"
                  "  module: %s\n",
                  r.case_name.c_str(), static_cast<long long>(r.variant),
                  static_cast<long long>(r.gather_all), r.file.c_str());
    } else if (flags.verbose) {
      std::printf("%s %s variant %lld (%.2f s)%s%s\n",
                  res.outcome == CaseOutcome::kPassed ? "PASS" : "SKIP", r.case_name.c_str(),
                  static_cast<long long>(r.variant), res.seconds,
                  res.detail.empty() ? "" : ": ", res.detail.c_str());
    }
    std::fflush(stdout);
  });
  if (!summary.ok()) return ReportError(summary.status());
  if (flags.json) {
    nlohmann::json doc;
    doc["seed"] = flags.seed;
    doc["count"] = flags.count;
    doc["cases"] = summary->cases;
    doc["shrunk_cases"] = summary->shrunk_cases;
    doc["skipped_cases"] = summary->skipped_cases;
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& [name, why] : summary->skipped_cases_detail)
      skipped.push_back({{"case", name}, {"reason", why}});
    doc["skipped_cases_detail"] = std::move(skipped);
    doc["passed"] = summary->passed;
    doc["failed"] = summary->failed;
    doc["timed_out"] = summary->timed_out;
    doc["skipped"] = summary->skipped;
    nlohmann::json variants = nlohmann::json::array();
    for (const FuzzVariantResult& r : summary->variants) variants.push_back(VariantJson(r));
    doc["variants"] = std::move(variants);
    std::printf("%s\n", doc.dump(2).c_str());
    return summary->failed == 0 ? 0 : 1;
  }
  int64_t with_gather_all = 0, with_gather_some = 0;
  for (const FuzzVariantResult& r : summary->variants) {
    with_gather_all += r.gather_all > 0;
    with_gather_some += r.gather_some > 0;
  }
  std::printf("variants whose reshards fell back to gathering: %lld all tiled dims, %lld some\n",
              static_cast<long long>(with_gather_all), static_cast<long long>(with_gather_some));
  // Ops run on whole values for want of a rule (errors under --strict),
  // by the start of the message.
  std::map<std::string, int64_t> strict;
  for (const FuzzVariantResult& r : summary->variants)
    if (!r.strict_error.empty()) strict[r.strict_error.substr(0, 160)]++;
  for (const auto& [why, n] : strict)
    std::printf("variants with a replicated fallback (strict error) x%lld: %s\n",
                static_cast<long long>(n), why.c_str());
  // Skipped cases and variants by reason (the text before the first ':').
  std::map<std::string, int64_t> case_reasons, variant_reasons;
  for (const auto& [name, why] : summary->skipped_cases_detail)
    case_reasons[why.substr(0, why.find(':'))]++;
  for (const FuzzVariantResult& r : summary->variants)
    if (r.result.outcome == CaseOutcome::kSkipped)
      variant_reasons[r.result.reason.empty() ? "other" : r.result.reason]++;
  for (const auto& [why, n] : case_reasons)
    std::printf("cases skipped (%s): %lld\n", why.c_str(), static_cast<long long>(n));
  for (const auto& [why, n] : variant_reasons)
    std::printf("variants skipped (%s): %lld\n", why.c_str(), static_cast<long long>(n));
  std::printf("%lld cases fuzzed (%lld shrunk first), %lld cases skipped; variants: %lld "
              "passed, %lld failed, %lld timed out, %lld skipped\n",
              static_cast<long long>(summary->cases), static_cast<long long>(summary->shrunk_cases),
              static_cast<long long>(summary->skipped_cases),
              static_cast<long long>(summary->passed), static_cast<long long>(summary->failed),
              static_cast<long long>(summary->timed_out), static_cast<long long>(summary->skipped));
  return summary->failed == 0 ? 0 : 1;
}

const bool registered = RegisterCommand(
    "fuzz-shardings",
    "mutate the shardings of real modules at random, partition and verify every variant",
    [](CLI::App* app) {
      auto f = std::make_shared<FuzzFlags>();
      app->add_option("input", f->input, "module file or partitioning corpus directory")
          ->required();
      app->add_option("--seed", f->seed, "run seed (default 0)");
      app->add_option("--count", f->count, "variants per case (default 4)");
      app->add_option("--input-seed", f->input_seed,
                      "seed of the random inputs verify draws (default 0, as the conformance "
                      "runner; some cases need inputs it satisfies, e.g. rng bounds a < b)");
      AddNumPartitionsFlag(app, &f->num_partitions,
                           "mutate to this device count (default: each case's own)");
      app->add_flag("--json", f->json, "print one JSON document");
      app->add_flag("-v,--verbose", f->verbose, "also list passing and skipped variants");
      app->add_option("--filter", f->filter,
                      "only cases whose name contains one of these comma-separated strings");
      app->add_option("--out", f->out_dir,
                      "directory for the mutated modules (default fuzz-shardings-out)");
      app->add_flag("--keep-passing", f->keep_passing, "keep the modules of passing variants");
      app->add_flag("--keep-fallbacks", f->keep_fallbacks,
                    "keep and list variants where a reshard gathered every tiled dim "
                    "(MESHSPLIT_DEBUG=reshard meshsplit partition FILE shows which)");
      app->add_option("--timeout", f->timeout_seconds, "CPU seconds per variant (default 20)");
      app->add_option("--max-memory", f->max_memory_gib,
                      "GiB: variants estimated larger run at reduced shapes (default 1)");
      app->add_option("--max-case-mib", f->max_case_mib,
                      "shrink (or skip) cases whose one-device peak times (devices + 1) exceeds "
                      "this many MiB (default 256)");
      return [f]() { return RunFuzz(*f); };
    });

}  // namespace
}  // namespace meshsplit::cli
