// Partitioning conformance runner: header parsing, per-case classification
// (skip / expect-error / verify) and forked execution with a time limit.
#include "verify/conformance_partitioning.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "collectives/threads_backend.h"
#include "ir/computation.h"
#include "ir/partitioned_rng.h"
#include "partitioner/partitioner.h"
#include "verify/random_module.h"
#include "runtime/reference.h"
#include "verify/verify.h"
#include "text/parser.h"
#include "transforms/shrink_shapes.h"

namespace meshsplit {
namespace {

namespace fs = std::filesystem;

// AddressSanitizer reserves terabytes of address space for its shadow memory
// before main(), so under ASan an RLIMIT_AS makes every later mmap fail and the
// child dies in ASan's allocator instead of running the case. Such builds skip
// the address-space limit; the CPU limit and the wall clock still bound the child.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// `text` as a decimal number without a sign, or nullopt when it is not one
// or does not fit in int64 (the text comes from a case file: never throw, as
// std::stoll does).
std::optional<int64_t> ParseCount(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || text[0] == '-' || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

int64_t ValueBytes(const Shape& s) { return s.ByteSize(); }

// An rng / rng-bit-generator of the original whose partitioned counterpart
// (same name) draws a different shape: a per-device random stream that
// cannot equal the whole run's values. A tiled rng (rng-bit-generator)
// partitioned into a PartitionInvariantRng (...BitGenerator) custom-call of
// the same global shape draws exactly its tile of the whole run's values,
// so it counts as equal.
// "" if none.
std::string PerDeviceRandom(const Module& original, const Module& partitioned) {
  for (const auto& c : original.computations())
    for (const auto& i : c->instructions()) {
      if (i->opcode() != Opcode::kRng && i->opcode() != Opcode::kRngBitGenerator) continue;
      const Instruction* p = nullptr;
      bool invariant = false;
      for (const auto& pc : partitioned.computations())
        if (const Instruction* f = pc->Find(i->name())) {
          if (f->opcode() == i->opcode()) p = f;
          if (i->opcode() == Opcode::kRng && IsPartitionInvariantRng(*f)) {
            StatusOr<PartitionInvariantRng> r = ReadPartitionInvariantRng(*f);
            invariant |= r.ok() && r->name == i->name() &&
                         r->global_dims == i->shape().dimensions();
          }
          if (i->opcode() == Opcode::kRngBitGenerator && IsPartitionInvariantRngBitGenerator(*f) &&
              i->shape().IsTuple() && i->shape().tuple_size() == 2) {
            StatusOr<PartitionInvariantRng> r = ReadPartitionInvariantRng(*f);
            invariant |= r.ok() && r->global_dims == i->shape().tuple_shapes(1).dimensions();
          }
        }
      if (invariant) continue;
      if (p == nullptr)
        return "%" + i->name() + " has no same-named " + std::string(OpcodeName(i->opcode())) +
               " in the partitioned module";
      if (!p->shape().Compatible(i->shape()))
        return "%" + i->name() + " draws " + p->shape().ToString(false) + " per device instead of " +
               i->shape().ToString(false);
    }
  return "";
}

// The windowed-einsum options of a case's `// options:` line (XLA's
// SpmdPartitionerOptions / debug options; only the first configuration
// when several are separated by '|') set in `options`:
// threshold_for_windowed_einsum_mib (also as the GPU debug option),
// max_windowed_einsum_iteration and bidirectional_windowed_einsum. A
// threshold also enables the reduce-scatter loop, as in XLA. Returns why an
// option the line sets could not be read ("" when all could): the case then
// does not run as XLA's test configures it.
std::string ReadWindowedEinsumOptions(const std::string& text, PartitionOptions* options) {
  std::smatch line;
  static const std::regex kOptions(R"(^// options:([^\n]*))", std::regex::multiline);
  if (!std::regex_search(text, line, kOptions)) return "";
  std::string first = line[1].str();
  first = first.substr(0, first.find('|'));
  std::string problem;
  auto number = [&](const char* pattern) -> std::optional<int64_t> {
    std::smatch m;
    if (!std::regex_search(first, m, std::regex(pattern))) return std::nullopt;
    std::optional<int64_t> value = ParseCount(m[1].str());
    if (!value && problem.empty())
      problem = "options line: " + m[0].str() + " does not fit in 64 bits";
    return value;
  };
  std::optional<int64_t> mib = number(R"(threshold_for_windowed_einsum_mib\s*=\s*(\d+))");
  if (!mib) mib = number(R"(set_xla_gpu_threshold_for_windowed_einsum_mib\((\d+)\))");
  if (mib && *mib < (int64_t{1} << 40)) {
    options->windowed_einsum_threshold_bytes = *mib << 20;
    options->windowed_einsum_reduce_scatter = true;
  }
  if (std::optional<int64_t> it = number(R"(max_windowed_einsum_iteration\s*=\s*(\d+))"))
    options->max_windowed_einsum_iterations = *it;
  if (std::regex_search(first, std::regex(R"(bidirectional_windowed_einsum\s*=\s*true)")))
    options->bidirectional_windowed_einsum = true;
  return problem;
}

// Instructions the entry's result or outfeeds depend on (through operands,
// control edges and called computations): what a run evaluates.
std::unordered_set<const Instruction*> LiveInstructions(const Module& m) {
  std::unordered_set<const Instruction*> live;
  std::unordered_set<const Computation*> entered;
  std::vector<const Instruction*> stack;
  auto enter = [&](const Computation* c) {
    if (c == nullptr || !entered.insert(c).second) return;
    if (c->root() != nullptr) stack.push_back(c->root());
    for (const auto& i : c->instructions())
      if (i->opcode() == Opcode::kOutfeed) stack.push_back(i.get());
  };
  enter(m.entry());
  while (!stack.empty()) {
    const Instruction* i = stack.back();
    stack.pop_back();
    if (!live.insert(i).second) continue;
    for (const Instruction* o : i->operands()) stack.push_back(o);
    for (const Instruction* o : i->control_predecessors()) stack.push_back(o);
    for (const Computation* c : i->called_computations()) enter(c);
  }
  return live;
}

// A custom-call target of the original the interpreter has no meaning for
// (an opaque backend op) that the outputs depend on, "" if none.
std::string OpaqueCustomCall(const Module& m) {
  std::unordered_set<const Instruction*> live = LiveInstructions(m);
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions()) {
      if (i->opcode() != Opcode::kCustomCall || !live.count(i.get())) continue;
      const std::string& t = i->attrs().custom_call_target;
      if (t == "Sharding" || t == "SPMDFullToShardShape" || t == "SPMDShardToFullShape" ||
          t == "TopK" || t == "MoveToHost" || t == "MoveToDevice")
        continue;
      return "custom-call target \"" + t + "\" (%" + i->name() + ")";
    }
  return "";
}

std::string Outcome(CaseOutcome o) {
  return o == CaseOutcome::kPassed ? "pass" : o == CaseOutcome::kSkipped ? "skip" : "fail";
}

PartitioningCaseResult Make(const PartitioningCase& c, CaseOutcome o, std::string detail,
                            std::string reason = "") {
  PartitioningCaseResult r;
  r.name = c.name;
  r.outcome = o;
  r.detail = std::move(detail);
  r.reason = std::move(reason);
  return r;
}

PartitioningCaseResult Skip(const PartitioningCase& c, std::string reason, std::string detail) {
  return Make(c, CaseOutcome::kSkipped, reason + ": " + detail, reason);
}

std::string OneLine(std::string s, size_t max_chars = 600) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

std::string ErrPath(pid_t pid) {
  return (fs::temp_directory_path() / ("meshsplit_conformance_" + std::to_string(pid) + ".err"))
      .string();
}

std::string TailOfFile(const std::string& path, size_t max_chars) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > max_chars) s = s.substr(s.size() - max_chars);
  return Trim(s);
}

// Runs `c` in a forked child; the result travels back through a pipe as
// "pass|fail|skip\tdetail".
PartitioningCaseResult RunIsolated(const PartitioningCase& c,
                                   const PartitioningConformanceOptions& options) {
  int fds[2];
  if (pipe(fds) != 0) return Make(c, CaseOutcome::kFailed, "pipe() failed");
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Make(c, CaseOutcome::kFailed, "fork() failed");
  }
  if (pid == 0) {
    close(fds[0]);
    // The time limit is CPU time (all threads), so a loaded machine does not
    // turn slow cases into timeouts; the wall-clock limit below is a backstop.
    rlimit cpu{static_cast<rlim_t>(options.timeout_seconds),
               static_cast<rlim_t>(options.timeout_seconds) + 1};
    setrlimit(RLIMIT_CPU, &cpu);
    FILE* err = std::fopen(ErrPath(getpid()).c_str(), "w");
    if (err != nullptr) dup2(fileno(err), 2);
    if (options.child_memory_bytes > 0 && !kAddressSanitizer) {
      rlimit lim{static_cast<rlim_t>(options.child_memory_bytes),
                 static_cast<rlim_t>(options.child_memory_bytes)};
      setrlimit(RLIMIT_AS, &lim);
    }
    PartitioningCaseResult r = RunPartitioningCase(c, options.seed, options.max_run_bytes);
    std::string msg = Outcome(r.outcome) + (r.reduced_shapes ? "+reduced" : "") + "\t" +
                      r.reason + "\t" + OneLine(r.detail, 4000);
    size_t off = 0;
    while (off < msg.size()) {
      ssize_t w = write(fds[1], msg.data() + off, msg.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  auto start = std::chrono::steady_clock::now();
  std::string data;
  bool timed_out = false;
  int status = 0;
  for (;;) {
    // Drain the pipe while waiting so a long message never blocks the child.
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 10) > 0) {
      char buf[4096];
      ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n > 0) data.append(buf, static_cast<size_t>(n));
    }
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > options.timeout_seconds * options.wall_factor) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
  }
  for (;;) {
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  std::string child_err = TailOfFile(ErrPath(pid), 400);
  std::remove(ErrPath(pid).c_str());
  if (timed_out) {
    std::ostringstream os;
    os << "timeout (over " << options.timeout_seconds * options.wall_factor << " s wall clock)";
    return Make(c, CaseOutcome::kFailed, os.str());
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU) {
    std::ostringstream os;
    os << "timeout (over " << options.timeout_seconds << " s CPU time)";
    return Make(c, CaseOutcome::kFailed, os.str());
  }
  if (WIFSIGNALED(status))
    return Make(c, CaseOutcome::kFailed,
                "crashed with signal " + std::to_string(WTERMSIG(status)) + " (" +
                    strsignal(WTERMSIG(status)) + "): " + OneLine(child_err));
  size_t tab = data.find('\t');
  size_t tab2 = tab == std::string::npos ? tab : data.find('\t', tab + 1);
  if (tab2 == std::string::npos) {
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      return Make(c, CaseOutcome::kFailed,
                  "exited with status " + std::to_string(WEXITSTATUS(status)) + ": " +
                      OneLine(child_err));
    return Make(c, CaseOutcome::kFailed, "child exited without a result");
  }
  std::string o = data.substr(0, tab);
  const bool reduced = o.size() > 8 && o.compare(o.size() - 8, 8, "+reduced") == 0;
  if (reduced) o.resize(o.size() - 8);
  CaseOutcome outcome = o == "pass"   ? CaseOutcome::kPassed
                        : o == "skip" ? CaseOutcome::kSkipped
                                      : CaseOutcome::kFailed;
  PartitioningCaseResult r =
      Make(c, outcome, data.substr(tab2 + 1), data.substr(tab + 1, tab2 - tab - 1));
  r.reduced_shapes = reduced;
  return r;
}

// The whole run lives in this process: the reference (once, or on every
// device when it needs the N-device semantics), the N partitions, and the
// inputs of both. Returns the estimated peak bytes of VerifyPartitioned.
int64_t EstimateRunBytes(const Module& mod, const Module& partitioned, int64_t n,
                         int64_t* ref_peak_out = nullptr, int64_t* part_peak_out = nullptr,
                         int64_t* ref_copies_out = nullptr) {
  const bool per_device = !DeviceReferenceReason(mod).empty();
  const Computation& oe = *mod.entry();
  const Computation& pe = *partitioned.entry();
  int64_t ref_peak = EstimatePeakBytes(oe), part_peak = EstimatePeakBytes(pe);
  int64_t input_bytes = 0, local_input_bytes = 0;
  for (const Instruction* p : oe.parameters()) input_bytes += ValueBytes(p->shape());
  for (const Instruction* p : pe.parameters()) local_input_bytes += ValueBytes(p->shape());
  const int64_t ref_copies = per_device ? n : 1;
  const int64_t root_bytes = ValueBytes(oe.root()->shape());
  // Two phases: the reference run (its peak includes its arguments) while
  // the inputs are kept (whole, or per device with the partitioned
  // arguments already made), then the N partitions (their peaks include
  // their arguments) while the inputs and the reference result are kept.
  const int64_t kept_inputs = per_device ? n * local_input_bytes : input_bytes;
  if (ref_peak_out) *ref_peak_out = ref_peak;
  if (part_peak_out) *part_peak_out = part_peak;
  if (ref_copies_out) *ref_copies_out = ref_copies;
  return std::max(ref_copies * ref_peak + kept_inputs,
                  (per_device ? 0 : input_bytes) + ref_copies * root_bytes + n * part_peak) +
         root_bytes;
}

// "" when `n` virtual devices' thread stacks fit in half of `max_run_bytes`,
// else why not. Past that, thread creation fails under the child's
// address-space limit, and shrinking shapes does not reduce devices.
std::string TooManyThreadsReason(int64_t n, int64_t max_run_bytes) {
  const int64_t stacks = (n - 1) * DeviceThreadStackBytes(n);
  if (stacks <= max_run_bytes / 2) return "";
  std::ostringstream os;
  os << "the stacks of " << n << " virtual-device threads reserve " << (stacks >> 20)
     << " MiB, over half the " << (max_run_bytes >> 20)
     << " MiB limit (reduced shapes do not reduce devices)";
  return os.str();
}

// "" when the run fits in `max_run_bytes`, else why not.
std::string TooLargeReason(const Module& mod, const Module& partitioned, int64_t n,
                           int64_t max_run_bytes) {
  int64_t ref_peak = 0, part_peak = 0, ref_copies = 1;
  int64_t estimate = EstimateRunBytes(mod, partitioned, n, &ref_peak, &part_peak, &ref_copies);
  if (estimate <= max_run_bytes) return "";
  std::ostringstream os;
  os << "the run needs about " << (estimate >> 20) << " MiB (original peak " << (ref_peak >> 20)
     << " MiB x " << ref_copies << ", " << n << " partitions x " << (part_peak >> 20)
     << " MiB), over the " << (max_run_bytes >> 20) << " MiB limit";
  return os.str();
}

// Runs both programs and classifies the outcome. `reduced` is empty for
// the case's own shapes, else the shape changes of the shrunk module (the
// outcome is then marked as reduced).
PartitioningCaseResult VerifyCase(const PartitioningCase& c, Module& mod, Module& partitioned,
                                  uint64_t seed, int64_t max_run_bytes, const std::string& opaque,
                                  const std::string& reduced) {
  const int64_t n = c.num_partitions;
  const int64_t estimate = EstimateRunBytes(mod, partitioned, n);
  VerifyOptions options = VerifyOptionsFor(c, seed);
  options.stub_opaque_custom_calls = !opaque.empty();
  options.max_probe_bytes = std::max<int64_t>(0, max_run_bytes - estimate);
  VerifyResult r;
  try {
    r = VerifyPartitioned(mod, partitioned, options);
  } catch (const std::bad_alloc&) {
    r.status = "too-large";
    r.message = "out of memory";
  }
  const std::string at = reduced.empty() ? "" : "at reduced shapes: " + reduced;
  auto mark = [&](PartitioningCaseResult res) {
    res.reduced_shapes = !reduced.empty();
    return res;
  };
  if (r.ok()) {
    std::string detail = at;
    if (!r.reference_reason.empty())
      detail += std::string(detail.empty() ? "" : "; ") + "against the " + std::to_string(n) +
                "-device reference (" + r.reference_reason + ")";
    if (!opaque.empty())
      detail += std::string(detail.empty() ? "" : "; ") + "with " + opaque + " run as a stub";
    return mark(Make(c, CaseOutcome::kPassed, detail));
  }
  const std::string prefix = at.empty() ? "" : at + ": ";
  if (r.message.find("std::bad_alloc") != std::string::npos || r.status == "too-large")
    return Skip(c, "too large",
                prefix + "out of memory with " + std::to_string(c.num_partitions) +
                    " devices in one process (estimated " + std::to_string(estimate >> 20) +
                    " MiB)");
  if (r.status == "empty")
    return Skip(c, "no output to compare", prefix + "partitioned OK, ran, but " + r.message);
  if (r.status == "reference") {
    // The original has no whole value where the sharding says it should
    // (e.g. partition-id outside a manual region): nothing to compare.
    if (r.message.find("differs between devices") != std::string::npos)
      return Skip(c, "device-dependent original", prefix + OneLine(r.message));
    return Skip(c, "interpreter cannot run the original", prefix + OneLine(r.message));
  }
  std::string detail = prefix + r.status + ": " + r.message;
  if (!r.divergent_instruction.empty())
    detail += " [first diverging: %" + r.divergent_instruction + ": " + r.divergence_detail +
              "]";
  return mark(Make(c, CaseOutcome::kFailed, detail));
}

// "all-gather x2, collective-permute x5": the collectives of a
// partitioned module (every computation), by opcode.
std::string CollectiveCounts(const Module& m) {
  std::map<std::string, int64_t> counts;
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions())
      if (GetOpcodeFamily(i->opcode()) == OpcodeFamily::kCollective)
        counts[std::string(OpcodeName(i->opcode()))]++;
  std::string out;
  for (const auto& [name, n] : counts)
    out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  return out.empty() ? "none" : out;
}

// A case too large to run as written: shrink the original (fresh from
// `text`; `full` is the full-size module after propagation, whose
// shardings also constrain divisibility), partition the shrunk module the
// same way (`windowed_einsum`: the case's partitioner options) and verify
// it. The full-size partitioning has already passed.
PartitioningCaseResult RunAtReducedShapes(const PartitioningCase& c, const std::string& text,
                                          const Module& full, const Module& full_partitioned,
                                          uint64_t seed,
                                          int64_t max_run_bytes, const std::string& opaque,
                                          const std::string& too_large,
                                          const PartitionOptions& windowed_einsum) {
  const std::string not_run = "partitioned OK, not run: " + too_large;
  const std::string full_collectives = CollectiveCounts(full_partitioned);
  // The smallest shapes first; sizes can steer the partitioner (which
  // operand to reshard, whether to window an einsum), so while the
  // collectives differ from the full-size partitioning, try shapes that
  // keep more of the original proportions, within a small budget.
  const int64_t kProportionalBudget = std::min<int64_t>(max_run_bytes / 8, int64_t{256} << 20);
  std::unique_ptr<Module> small, partitioned;
  std::string reduced, small_collectives, partition_error;
  for (int64_t divisor : {int64_t{0}, int64_t{4096}, int64_t{1024}, int64_t{256}, int64_t{64}}) {
    StatusOr<std::unique_ptr<Module>> m = ParseModuleText(text);
    if (!m.ok()) return Skip(c, "too large", not_run + "; reparse: " + m.status().message());
    ShrinkShapesOptions shrink;
    shrink.sharding_source = &full;
    shrink.divisor = divisor;
    StatusOr<ShrinkShapesReport> report = ShrinkShapes(**m, shrink);
    if (!report.ok()) {
      if (small) break;
      return Skip(c, "too large", not_run + "; no reduced shapes: " + report.status().message());
    }
    std::string stage;
    StatusOr<std::unique_ptr<Module>> p =
        PropagateAndPartition(**m, c.num_partitions, c.propagate, /*strict=*/false, &stage,
                              windowed_einsum);
    if (!p.ok()) {
      if (small) break;  // keep the smaller shapes that did partition
      // The full size partitioned: a failure here is the partitioner's at
      // these sizes. Larger shapes may still run; the failure is kept.
      if (partition_error.empty())
        partition_error = report->Summary() + ": " + stage + ": " + OneLine(p.status().ToString());
      continue;
    }
    if ((small || !partition_error.empty()) &&
        EstimateRunBytes(**m, **p, c.num_partitions) > kProportionalBudget)
      break;
    // Larger shapes replace the smallest only when they partition like
    // the full-size module.
    std::string collectives = CollectiveCounts(**p);
    if (small && collectives != full_collectives) continue;
    small = std::move(*m);
    partitioned = std::move(*p);
    reduced = report->Summary();
    small_collectives = std::move(collectives);
    if (small_collectives == full_collectives) break;
  }
  if (!small) {
    PartitioningCaseResult r =
        Make(c, CaseOutcome::kFailed, "at reduced shapes: " + partition_error);
    r.reduced_shapes = true;
    return r;
  }
  if (std::string rnd = PerDeviceRandom(*small, *partitioned); !rnd.empty())
    return Skip(c, "per-device random values",
                "partitioned OK at full and reduced shapes, not run: " + rnd);
  if (std::string still = TooLargeReason(*small, *partitioned, c.num_partitions, max_run_bytes);
      !still.empty())
    return Skip(c, "too large", not_run + "; at reduced shapes (" + reduced + ") " + still);
  std::string note = reduced;
  if (!partition_error.empty())
    note += "; smaller shapes failed to partition (" + partition_error + ")";
  if (full_collectives != small_collectives)
    note += "; collectives differ from the full-size partitioning: " + full_collectives +
            " at full size, " + small_collectives + " reduced";
  return VerifyCase(c, *small, *partitioned, seed, max_run_bytes, opaque, note);
}

}  // namespace

StatusOr<PartitioningCase> ReadPartitioningCase(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read " + path);
  PartitioningCase c;
  c.path = path;
  c.name = fs::path(path).stem().string();
  std::string line;
  std::string header;  // the lines before `line`, for locating errors
  int line_number = 0;
  bool saw_partitions = false;
  for (; std::getline(in, line); header += line + "\n") {
    ++line_number;
    if (line.rfind("//", 0) != 0) {
      if (Trim(line).empty()) continue;
      break;  // the module text starts
    }
    std::string body = Trim(line.substr(2));
    auto value = [&](const std::string& key) -> std::optional<std::string> {
      if (body.rfind(key, 0) != 0) return std::nullopt;
      return Trim(body.substr(key.size()));
    };
    if (auto v = value("num_partitions=")) {
      std::optional<int64_t> n = ParseCount(*v);
      if (!n || *n < 1) {
        // Located at the value, quoting the lines read so far.
        auto file = std::make_shared<SourceFile>(SourceFile{path, header + line});
        const size_t key = line.find("num_partitions=") + 15;
        const size_t at = std::min(line.find_first_not_of(" \t", key), line.size());
        return Status::Error(
            "num_partitions must be a positive integer that fits in 64 bits, got '" + *v + "'",
            SourceLoc{file, line_number, static_cast<int>(at) + 1,
                      std::max(1, static_cast<int>(v->size()))});
      }
      c.num_partitions = *n;
      saw_partitions = true;
    } else if (auto v = value("pipeline:")) {
      c.propagate = v->find("ShardingPropagation") != std::string::npos;
    } else if (auto v = value("expect_error:")) {
      c.expect_error = v->empty() ? "(any error)" : *v;
    } else if (auto v = value("opaque_ops:")) {
      c.opaque_ops = *v;
    }
  }
  if (!saw_partitions) return Status::Error(path + ": no '// num_partitions=' header line");
  return c;
}

bool IsPartitioningCorpus(const std::string& dir) {
  std::error_code ec;
  bool any_hlo = false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string ext = e.path().extension().string();
    if (ext == ".expected") return false;
    if (ext == ".hlo") any_hlo = true;
  }
  return any_hlo && !ec;
}

int64_t EstimatePeakBytes(const Computation& c) {
  std::vector<Instruction*> order = c.MakePostOrder();
  std::unordered_map<const Instruction*, size_t> last_use;
  for (size_t k = 0; k < order.size(); ++k)
    for (const Instruction* o : order[k]->operands()) last_use[o] = k;
  int64_t live = 0, peak = 0;
  for (const Instruction* i : order)
    if (i->opcode() == Opcode::kParameter) live += ValueBytes(i->shape());
  peak = live;
  for (size_t k = 0; k < order.size(); ++k) {
    const Instruction* i = order[k];
    if (i->opcode() == Opcode::kParameter) continue;
    int64_t nested = 0;
    for (const Computation* called : i->called_computations())
      if (called != nullptr && called != &c) nested = std::max(nested, EstimatePeakBytes(*called));
    int64_t bytes = ValueBytes(i->shape());
    peak = std::max(peak, live + bytes + nested);
    live += bytes;
    for (const Instruction* o : i->operands()) {
      auto it = last_use.find(o);
      if (it != last_use.end() && it->second == k) {
        live -= ValueBytes(o->shape());
        last_use.erase(it);  // an operand used twice by one instruction dies once
      }
    }
  }
  return peak;
}

PartitioningCaseResult RunPartitioningCase(const PartitioningCase& c, uint64_t seed,
                                           int64_t max_run_bytes) {
  auto start = std::chrono::steady_clock::now();
  auto finish = [&](PartitioningCaseResult r) {
    r.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  std::ifstream in(c.path);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  PartitionOptions windowed_einsum;
  if (std::string problem = ReadWindowedEinsumOptions(text, &windowed_einsum); !problem.empty())
    return finish(Skip(c, "options", problem));
  static const std::regex kUnsupportedType(R"(\b(f4e2m1fn)\[)");
  std::smatch m;
  if (std::regex_search(text, m, kUnsupportedType))
    return finish(Skip(c, "element type",
                       m[1].str() + " is not supported by the interpreter"));
  StatusOr<std::unique_ptr<Module>> module = ParseModuleText(text);
  if (!module.ok())
    return finish(Make(c, CaseOutcome::kFailed, "parse: " + module.status().ToString()));
  Module& mod = **module;
  if (!c.expect_error.empty()) {
    std::string stage;
    StatusOr<std::unique_ptr<Module>> p =
        PropagateAndPartition(mod, c.num_partitions, c.propagate, /*strict=*/false, &stage,
                            windowed_einsum);
    if (!p.ok())
      return finish(Make(c, CaseOutcome::kPassed, "rejected: " + p.status().message()));
    return finish(Make(c, CaseOutcome::kFailed,
                       "partitioned without error; XLA rejects it: " + c.expect_error));
  }
  // Partition first, so partitioner errors and crashes count even for
  // modules we then cannot execute.
  std::string stage;
  StatusOr<std::unique_ptr<Module>> partitioned =
      PropagateAndPartition(mod, c.num_partitions, c.propagate, /*strict=*/false, &stage,
                            windowed_einsum);
  if (!partitioned.ok())
    return finish(Make(c, CaseOutcome::kFailed, stage + ": " + partitioned.status().ToString()));
  // A backend's custom-call runs as a deterministic stub in both programs
  // (VerifyOptions::stub_opaque_custom_calls); the pass says so.
  const std::string opaque = OpaqueCustomCall(mod);
  if (std::string rnd = PerDeviceRandom(mod, **partitioned); !rnd.empty())
    return finish(Skip(c, "per-device random values",
                       "partitioned OK, not run: " + rnd +
                           ", so its values cannot equal the whole run's"));
  if (std::string threads = TooManyThreadsReason(c.num_partitions, max_run_bytes); !threads.empty())
    return finish(Skip(c, "too large", "partitioned OK, not run: " + threads));
  const std::string too_large = TooLargeReason(mod, **partitioned, c.num_partitions, max_run_bytes);
  if (too_large.empty())
    return finish(VerifyCase(c, mod, **partitioned, seed, max_run_bytes, opaque, ""));
  // Too large to run: the full-size module partitioned fine (checked
  // above); now run the same case at reduced shapes.
  return finish(
      RunAtReducedShapes(c, text, mod, **partitioned, seed, max_run_bytes, opaque, too_large,
                         windowed_einsum));
}

PartitioningCaseResult RunPartitioningCaseIsolated(const PartitioningCase& c,
                                                   const PartitioningConformanceOptions& options) {
  return RunIsolated(c, options);
}

StatusOr<PartitioningSummary> RunPartitioningConformance(
    const std::string& dir, const PartitioningConformanceOptions& options,
    const std::function<void(const PartitioningCaseResult&)>& on_case) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".hlo") files.push_back(e.path().string());
  if (ec) return Status::Error("cannot list " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  PartitioningSummary summary;
  int64_t index = -1;
  for (const std::string& f : files) {
    ++index;
    if (options.num_shards > 1 && index % options.num_shards != options.shard) continue;
    if (!options.from.empty() && fs::path(f).stem().string() < options.from) continue;
    StatusOr<PartitioningCase> c = ReadPartitioningCase(f);
    PartitioningCaseResult r;
    if (!c.ok()) {
      r.name = fs::path(f).stem().string();
      if (!options.filter.empty() && r.name.find(options.filter) == std::string::npos) continue;
      r.outcome = CaseOutcome::kFailed;
      r.detail = c.status().message();
    } else {
      if (!options.filter.empty() && c->name.find(options.filter) == std::string::npos) continue;
      auto start = std::chrono::steady_clock::now();
      r = options.isolate ? RunIsolated(*c, options)
                          : RunPartitioningCase(*c, options.seed, options.max_run_bytes);
      r.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    switch (r.outcome) {
      case CaseOutcome::kPassed:
        summary.passed++;
        if (r.reduced_shapes) summary.passed_reduced++;
        break;
      case CaseOutcome::kFailed:
        summary.failed++;
        if (r.reduced_shapes) summary.failed_reduced++;
        break;
      case CaseOutcome::kSkipped: summary.skipped++; break;
    }
    if (on_case) on_case(r);
    summary.cases.push_back(std::move(r));
  }
  return summary;
}

}  // namespace meshsplit
