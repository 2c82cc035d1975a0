// Propagation conformance runner (see conformance.h).
#include "verify/conformance_propagation.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "compiler/compile.h"
#include "ir/computation.h"
#include "sharding/sharding.h"
#include "text/parser.h"

namespace meshsplit {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

StatusOr<std::vector<bool>> ParseBoolList(const std::string& v) {
  std::string s = v;
  if (!s.empty() && s.front() == '{') s = s.substr(1);
  if (!s.empty() && s.back() == '}') s.pop_back();
  std::vector<bool> out;
  for (const std::string& item : Split(s, ',')) {
    if (item == "true") out.push_back(true);
    else if (item == "false") out.push_back(false);
    else return Status::Error("bad boolean list '" + v + "'");
  }
  return out;
}

std::string Describe(const Instruction* i) {
  if (!i->has_sharding()) return "<none>";
  return i->sharding()->ToString(/*include_metadata=*/false);
}

// Semantic comparison through both the IR's Sharding and propagation's
// normal form; they implement the same README rules.
bool SameSharding(const Sharding& a, const Sharding& b) { return a == b; }

}  // namespace

StatusOr<PropagationOptions> ParseConformanceOptions(const std::string& line) {
  PropagationOptions o;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    if (tok == "#" || tok == "options:") continue;
    size_t eq = tok.find('=');
    if (eq == std::string::npos) continue;
    std::string key = tok.substr(0, eq), val = tok.substr(eq + 1);
    if (key == "is_spmd") {
      o.is_spmd = val == "true";
    } else if (key == "propagate_metadata") {
      o.propagate_metadata = val == "true";
    } else if (key == "cse_prevention_only") {
      o.cse_prevention_only = val == "true";
    } else if (key == "allow_spmd_sharding_propagation_to_output") {
      MS_ASSIGN_OR_RETURN(o.allow_spmd_sharding_propagation_to_output,
                          ParseBoolList(val));
    } else if (key == "execution_threads") {
      std::string v = val;
      if (!v.empty() && v.front() == '{') v = v.substr(1);
      if (!v.empty() && v.back() == '}') v.pop_back();
      o.execution_threads.clear();
      for (std::string t : Split(v, ',')) {
        if (!t.empty() && t.front() == '"') t = t.substr(1);
        if (!t.empty() && t.back() == '"') t.pop_back();
        if (!t.empty()) o.execution_threads.push_back(t);
      }
    } else if (key == "allow_spmd_sharding_propagation_to_parameters") {
      MS_ASSIGN_OR_RETURN(o.allow_spmd_sharding_propagation_to_parameters,
                          ParseBoolList(val));
    }
  }
  return o;
}

ConformanceCase RunPropagationCase(const std::string& name,
                                   const std::string& hlo_path,
                                   const std::string& expected_path) {
  ConformanceCase result;
  result.name = name;
  auto fail = [&](std::string msg) { result.failures.push_back(std::move(msg)); };
  std::ifstream ef(expected_path);
  if (!ef) {
    fail("cannot read " + expected_path);
    return result;
  }
  std::vector<std::string> lines;
  std::optional<PropagationOptions> options;
  for (std::string line; std::getline(ef, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("# options:", 0) == 0) {
      auto o = ParseConformanceOptions(line);
      if (!o.ok()) {
        fail(o.status().message());
        return result;
      }
      options = *o;
    } else if (!line.empty() && line[0] != '#') {
      lines.push_back(line);
    }
  }
  if (!options) options = PropagationOptions();
  auto module = ParseModuleFile(hlo_path);
  if (!module.ok()) {
    fail("parse: " + module.status().ToString());
    return result;
  }
  Module& m = **module;
  CompileOptions compile;
  compile.until = CompileStage::kPropagated;
  compile.propagation = *options;
  CompileResult compiled;
  if (Status st = Compile(m, compile, &compiled); !st.ok()) {
    fail("propagate: " + st.ToString());
    return result;
  }
  std::unordered_map<std::string, const Instruction*> by_name;
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions()) by_name[i->name()] = i.get();
  auto find = [&](const std::string& n) -> const Instruction* {
    auto it = by_name.find(n);
    return it == by_name.end() ? nullptr : it->second;
  };
  for (const std::string& line : lines) {
    std::vector<std::string> f = Split(line, '\t');
    if (f[0] == "@unchanged") {
      if (compiled.propagation.changed) fail("@unchanged: the pass reported a change");
      continue;
    }
    if (f[0] == "@entry_root" && f.size() >= 2) {
      const Instruction* root = m.entry()->root();
      auto want = Sharding::Parse(f[1]);
      if (!want.ok()) {
        fail("bad expected sharding " + f[1]);
      } else if (!root->has_sharding() || !SameSharding(*root->sharding(), *want)) {
        fail("@entry_root " + root->name() + ": want " + f[1] + ", got " +
             Describe(root));
      }
      continue;
    }
    if ((f[0] == "@same" || f[0] == "@differ") && f.size() >= 3) {
      const Instruction* a = find(f[1]);
      const Instruction* b = find(f[2]);
      if (a == nullptr || b == nullptr) {
        fail(f[0] + ": no instruction " + (a == nullptr ? f[1] : f[2]));
        continue;
      }
      bool same = a->has_sharding() == b->has_sharding() &&
                  (!a->has_sharding() || SameSharding(*a->sharding(), *b->sharding()));
      if (same != (f[0] == "@same"))
        fail(f[0] + " " + f[1] + " " + f[2] + ": got " + Describe(a) + " and " +
             Describe(b));
      continue;
    }
    if (f[0] == "@check" && f.size() >= 4) {
      const Instruction* a = find(f[1]);
      if (a == nullptr) {
        fail("@check: no instruction " + f[1]);
        continue;
      }
      const bool want = f[3] == "true";
      bool got = false;
      if (f[2] == "has_sharding") {
        got = a->has_sharding();
      } else if (f[2] == "IsManual") {
        got = a->has_sharding() && a->sharding()->IsManual();
        if (!a->has_sharding() && !want) {
          fail("@check " + f[1] + " IsManual false: no sharding");
          continue;
        }
      } else if (f[2] == "IsReplicated") {
        got = a->has_sharding() && a->sharding()->IsReplicated();
        if (!a->has_sharding() && !want) {
          fail("@check " + f[1] + " IsReplicated false: no sharding");
          continue;
        }
      } else {
        fail("unknown check " + f[2]);
        continue;
      }
      if (got != want) fail(line + ": got " + Describe(a));
      continue;
    }
    if (f.size() < 2) {
      fail("unreadable line: " + line);
      continue;
    }
    const Instruction* a = find(f[0]);
    if (a == nullptr) {
      fail(f[0] + ": no such instruction after propagation");
      continue;
    }
    if (f[1] == "<none>") {
      if (a->has_sharding()) fail(f[0] + ": want <none>, got " + Describe(a));
      continue;
    }
    auto want = Sharding::Parse(f[1]);
    if (!want.ok()) {
      fail("bad expected sharding " + f[1]);
      continue;
    }
    if (!a->has_sharding() || !SameSharding(*a->sharding(), *want))
      fail(f[0] + ": want " + f[1] + ", got " + Describe(a));
  }
  result.passed = result.failures.empty();
  return result;
}

StatusOr<ConformanceSummary> RunPropagationConformance(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status::Error("'" + dir + "' is not a directory");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".hlo") continue;
    fs::path exp = e.path();
    exp.replace_extension(".expected");
    if (fs::exists(exp)) names.push_back(e.path().stem().string());
  }
  if (ec) return Status::Error("cannot read '" + dir + "': " + ec.message());
  if (names.empty())
    return Status::Error("no NAME.hlo + NAME.expected pairs in '" + dir + "'");
  std::sort(names.begin(), names.end());
  ConformanceSummary summary;
  for (const std::string& n : names) {
    ConformanceCase c = RunPropagationCase(n, (fs::path(dir) / (n + ".hlo")).string(),
                                           (fs::path(dir) / (n + ".expected")).string());
    (c.passed ? summary.passed : summary.failed)++;
    summary.cases.push_back(std::move(c));
  }
  return summary;
}

bool LooksLikePartitioningCorpus(const std::string& dir) {
  std::error_code ec;
  bool hlo = false, expected = false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".hlo") hlo = true;
    if (e.path().extension() == ".expected") expected = true;
  }
  return hlo && !expected;
}

}  // namespace meshsplit
