// Reading and writing the frontend attributes of a PartitionInvariantRng
// custom-call (see partitioned_rng.h).
#include "ir/partitioned_rng.h"

#include <map>
#include <optional>

#include "ir/attribute_text.h"

namespace meshsplit {
namespace {

constexpr char kDistributionKey[] = "ms_rng_distribution";
constexpr char kGlobalDimsKey[] = "ms_rng_global_dims";
constexpr char kNameKey[] = "ms_rng_name";

// The key="value" pairs of a `{...}` frontend_attributes text as a map (a
// repeated key: the last), or nullopt when it does not have that form.
std::optional<std::map<std::string, std::string>> ParsePairs(const std::string& t) {
  std::optional<FrontendAttributePairs> pairs = ParseFrontendAttributes(t);
  if (!pairs) return std::nullopt;
  std::map<std::string, std::string> out;
  for (auto& [k, v] : *pairs) out[k] = std::move(v);
  return out;
}

}  // namespace

bool IsPartitionInvariantRng(const Instruction& instr) {
  return instr.opcode() == Opcode::kCustomCall &&
         instr.attrs().custom_call_target == kPartitionInvariantRngTarget;
}

bool IsPartitionInvariantRngBitGenerator(const Instruction& instr) {
  return instr.opcode() == Opcode::kCustomCall &&
         instr.attrs().custom_call_target == kPartitionInvariantRngBitGeneratorTarget;
}

std::string FormatPartitionInvariantRng(const PartitionInvariantRng& record,
                                        const std::string& existing) {
  std::string dims;
  for (size_t i = 0; i < record.global_dims.size(); ++i)
    dims += (i ? "," : "") + std::to_string(record.global_dims[i]);
  // HLO names and distribution words need no escapes.
  std::string mine = std::string(kDistributionKey) + "=\"" + record.distribution + "\"," +
                     kGlobalDimsKey + "=\"" + dims + "\"," + kNameKey + "=\"" + record.name + "\"";
  size_t close = existing.rfind('}');
  size_t open = existing.find('{');
  if (open == std::string::npos || close == std::string::npos || close < open) return "{" + mine + "}";
  std::string inner = existing.substr(open + 1, close - open - 1);
  bool empty = inner.find_first_not_of(" \t\n") == std::string::npos;
  return "{" + (empty ? "" : inner + ",") + mine + "}";
}

StatusOr<PartitionInvariantRng> ReadPartitionInvariantRng(const Instruction& instr) {
  const std::string* text = instr.attrs().FindExtra("frontend_attributes");
  std::optional<std::map<std::string, std::string>> pairs;
  if (text != nullptr) pairs = ParsePairs(*text);
  auto missing = [&](const char* key) {
    return Status::Error("custom-call " + instr.attrs().custom_call_target +
                             " needs frontend attribute " + key,
                         instr.loc());
  };
  if (!pairs.has_value()) return missing(kGlobalDimsKey);
  PartitionInvariantRng r;
  auto dist = pairs->find(kDistributionKey);
  auto dims = pairs->find(kGlobalDimsKey);
  auto name = pairs->find(kNameKey);
  if (dist == pairs->end()) return missing(kDistributionKey);
  if (dims == pairs->end()) return missing(kGlobalDimsKey);
  if (name == pairs->end() || name->second.empty()) return missing(kNameKey);
  r.distribution = dist->second;
  r.name = name->second;
  const std::string& d = dims->second;
  // "" is a scalar; otherwise dims separated by single commas.
  for (size_t p = 0; !d.empty();) {
    size_t q = d.find(',', p);
    if (q == std::string::npos) q = d.size();
    std::string part = d.substr(p, q - p);
    if (part.empty() || part.size() > 18 || part.find_first_not_of("0123456789") != std::string::npos)
      return Status::Error(std::string(kGlobalDimsKey) + " must be a comma-separated list of dims, got \"" +
                               d + "\"",
                           instr.loc());
    r.global_dims.push_back(std::stoll(part));
    if (q == d.size()) break;
    p = q + 1;
  }
  return r;
}

}  // namespace meshsplit
