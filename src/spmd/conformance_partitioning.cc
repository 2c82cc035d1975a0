// Partitioning conformance runner: header parsing, per-case classification
// (skip / expect-error / verify) and forked execution with a time limit.
#include "spmd/conformance_partitioning.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "ir/computation.h"
#include "spmd/verify.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

namespace fs = std::filesystem;

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Ops whose meaning in the unpartitioned module depends on the device it
// runs on: the original has no single-device reference value.
std::string DeviceDependentOp(const Module& m) {
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions())
      switch (i->opcode()) {
        case Opcode::kAllReduce: case Opcode::kAllGather: case Opcode::kReduceScatter:
        case Opcode::kAllToAll: case Opcode::kCollectivePermute: case Opcode::kPartitionId:
        case Opcode::kReplicaId:
          return std::string(OpcodeName(i->opcode())) + " %" + i->name();
        default:
          break;
      }
  return "";
}

// Values over this size make a case too large to run on this machine.
constexpr int64_t kMaxValueBytes = int64_t{512} << 20;

std::string OversizedValue(const Module& m, int64_t limit) {
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions())
      if (i->shape().IsArray() && i->shape().ByteSize() > limit)
        return "%" + i->name() + " (" + i->shape().ToString(false) + ") needs " +
               std::to_string(i->shape().ByteSize() >> 20) + " MiB, over the " +
               std::to_string(limit >> 20) + " MiB limit";
  return "";
}

bool Unsplittable(const Sharding& s) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements())
      if (Unsplittable(e)) return true;
    return false;
  }
  return s.IsManual() || s.IsUnreduced() || s.IsUnknown() ||
         (s.IsTiled() && (s.HasManualSubgroup() ||
                          s.SubgroupSize(SubgroupType::kUnreduced) > 1));
}

// An entry parameter or root whose sharding the executor cannot split or
// assemble, described; "" if none.
std::string UnsplittableEntryValue(const Module& m) {
  const Computation* e = m.entry();
  std::vector<const Instruction*> values(e->parameters().begin(), e->parameters().end());
  values.push_back(e->root());
  for (const Instruction* v : values)
    if (v != nullptr && v->has_sharding() && Unsplittable(*v->sharding()))
      return "%" + v->name() + " has sharding " + v->sharding()->ToString(false);
  return "";
}

std::string Outcome(CaseOutcome o) {
  return o == CaseOutcome::kPassed ? "pass" : o == CaseOutcome::kSkipped ? "skip" : "fail";
}

PartitioningCaseResult Make(const PartitioningCase& c, CaseOutcome o, std::string detail) {
  PartitioningCaseResult r;
  r.name = c.name;
  r.outcome = o;
  r.detail = std::move(detail);
  return r;
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
    if (options.child_memory_bytes > 0) {
      rlimit lim{static_cast<rlim_t>(options.child_memory_bytes),
                 static_cast<rlim_t>(options.child_memory_bytes)};
      setrlimit(RLIMIT_AS, &lim);
    }
    PartitioningCaseResult r = RunPartitioningCase(c, options.seed);
    std::string msg = Outcome(r.outcome) + "\t" + OneLine(r.detail, 4000);
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
  if (tab == std::string::npos)
    return Make(c, CaseOutcome::kFailed, "child exited without a result");
  std::string o = data.substr(0, tab);
  CaseOutcome outcome = o == "pass"   ? CaseOutcome::kPassed
                        : o == "skip" ? CaseOutcome::kSkipped
                                      : CaseOutcome::kFailed;
  return Make(c, outcome, data.substr(tab + 1));
}

}  // namespace

StatusOr<PartitioningCase> ReadPartitioningCase(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read " + path);
  PartitioningCase c;
  c.path = path;
  c.name = fs::path(path).stem().string();
  std::string line;
  bool saw_partitions = false;
  while (std::getline(in, line)) {
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
      try {
        c.num_partitions = std::stoll(*v);
      } catch (...) {
        return Status::Error(path + ": bad num_partitions line");
      }
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

PartitioningCaseResult RunPartitioningCase(const PartitioningCase& c, uint64_t seed) {
  auto start = std::chrono::steady_clock::now();
  auto finish = [&](PartitioningCaseResult r) {
    r.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  if (!c.opaque_ops.empty())
    return finish(Make(c, CaseOutcome::kSkipped, "opaque ops: " + c.opaque_ops));
  std::ifstream in(c.path);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  static const std::regex kUnsupportedType(R"(\b(f8e[0-9a-z]+|f4e2m1fn|c64|c128)\[)");
  std::smatch m;
  if (std::regex_search(text, m, kUnsupportedType))
    return finish(Make(c, CaseOutcome::kSkipped,
                       "element type " + m[1].str() + " is not supported by the interpreter"));
  StatusOr<std::unique_ptr<Module>> module = ParseModuleText(text);
  if (!module.ok())
    return finish(Make(c, CaseOutcome::kFailed, "parse: " + module.status().ToString()));
  Module& mod = **module;
  if (std::string big = OversizedValue(mod, kMaxValueBytes); !big.empty())
    return finish(Make(c, CaseOutcome::kSkipped, "too large to run: " + big));
  if (!c.expect_error.empty()) {
    std::string stage;
    StatusOr<std::unique_ptr<Module>> p =
        PropagateAndPartition(mod, c.num_partitions, c.propagate, /*strict=*/false, &stage);
    if (!p.ok())
      return finish(Make(c, CaseOutcome::kPassed, "rejected: " + p.status().message()));
    return finish(Make(c, CaseOutcome::kFailed,
                       "partitioned without error; XLA rejects it: " + c.expect_error));
  }
  // Partition first, so partitioner errors and crashes count even for
  // modules we then cannot execute.
  std::string stage;
  StatusOr<std::unique_ptr<Module>> partitioned =
      PropagateAndPartition(mod, c.num_partitions, c.propagate, /*strict=*/false, &stage);
  if (!partitioned.ok())
    return finish(Make(c, CaseOutcome::kFailed, stage + ": " + partitioned.status().ToString()));
  std::string dev_op = DeviceDependentOp(mod);
  if (!dev_op.empty())
    return finish(Make(c, CaseOutcome::kSkipped,
                       "partitioned OK, not run: the original uses " + dev_op +
                           ", so it has no single-device reference value"));
  std::string unsplittable = UnsplittableEntryValue(mod);
  if (!unsplittable.empty())
    return finish(Make(c, CaseOutcome::kSkipped,
                       "partitioned OK, not run: " + unsplittable +
                           " (the executor cannot split or assemble manual/unreduced values)"));
  VerifyOptions options;
  options.num_partitions = c.num_partitions;
  options.seed = seed;
  options.propagate = c.propagate;
  VerifyResult r;
  try {
    r = VerifyPartitioned(mod, **partitioned, options);
  } catch (const std::bad_alloc&) {
    r.status = "too-large";
    r.message = "out of memory";
  }
  if (r.ok()) return finish(Make(c, CaseOutcome::kPassed, ""));
  if (r.message.find("std::bad_alloc") != std::string::npos)
    return finish(Make(c, CaseOutcome::kSkipped,
                       "too large to run: out of memory with " +
                           std::to_string(c.num_partitions) + " devices in one process"));
  if (r.status == "too-large")
    return finish(Make(c, CaseOutcome::kSkipped, "too large to run: " + r.message));
  if (r.status == "reference")
    return finish(Make(c, CaseOutcome::kSkipped,
                       "the interpreter cannot run the original: " + r.message));
  std::string detail = r.status + ": " + r.message;
  if (!r.divergent_instruction.empty())
    detail += " [first diverging: %" + r.divergent_instruction + ": " + r.divergence_detail +
              "]";
  return finish(Make(c, CaseOutcome::kFailed, detail));
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
      r = options.isolate ? RunIsolated(*c, options) : RunPartitioningCase(*c, options.seed);
      r.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    switch (r.outcome) {
      case CaseOutcome::kPassed: summary.passed++; break;
      case CaseOutcome::kFailed: summary.failed++; break;
      case CaseOutcome::kSkipped: summary.skipped++; break;
    }
    if (on_case) on_case(r);
    summary.cases.push_back(std::move(r));
  }
  return summary;
}

}  // namespace meshsplit
