// Sharding-mutation fuzzer: random valid shardings for real modules, each
// variant written as a partitioning case and run by the conformance runner.
#include "verify/sharding_fuzz.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include "ir/computation.h"
#include "ir/instruction.h"
#include "partitioner/reshard.h"
#include "verify/verify.h"
#include "text/parser.h"
#include "text/printer.h"
#include "transforms/shrink_shapes.h"

namespace meshsplit {
namespace {

namespace fs = std::filesystem;

// splitmix64: a well-mixed 64-bit step, so that nearby seeds and variant
// indices give unrelated streams.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The generator's own integer draws (not std::uniform_int_distribution, whose
// algorithm may differ between standard libraries), so a seed means the same
// variant everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return state_ = Mix(state_); }
  // Uniform in [lo, hi].
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Coin(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Uniform(0, i - 1)]);
  }

 private:
  uint64_t state_;
};

std::vector<int64_t> PrimeFactors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      out.push_back(p);
      n /= p;
    }
  if (n > 1) out.push_back(n);
  return out;
}

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// A tile assignment of `dims` (product n) in a random device order: plain
// iota, iota reshaped to a random factorisation of n and transposed, or an
// explicit random permutation.
TileAssignment RandomDevices(const std::vector<int64_t>& dims, int64_t n, Rng& rng) {
  double r = static_cast<double>(rng.Uniform(0, 999)) / 1000;
  std::vector<int64_t> primes = PrimeFactors(n);
  if (r < 0.35 || n == 1) return TileAssignment::Iota(dims);
  if (r < 0.7 && primes.size() >= 2) {
    // Group the (shuffled) prime factors into 2 or 3 reshape dims.
    rng.Shuffle(primes);
    int64_t parts = std::min<int64_t>(static_cast<int64_t>(primes.size()), rng.Uniform(2, 3));
    std::vector<int64_t> reshape(parts, 1);
    for (size_t k = 0; k < primes.size(); ++k)
      reshape[k < static_cast<size_t>(parts) ? k : rng.Uniform(0, parts - 1)] *= primes[k];
    std::vector<int64_t> perm(parts);
    std::iota(perm.begin(), perm.end(), 0);
    while (std::is_sorted(perm.begin(), perm.end())) rng.Shuffle(perm);
    return TileAssignment::Iota(dims, reshape, perm);
  }
  std::vector<int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  rng.Shuffle(ids);
  return TileAssignment::FromDevices(dims, ids);
}

// A random valid sharding of an array of `dims` on n devices.
Sharding RandomArraySharding(const std::vector<int64_t>& dims, int64_t n, Rng& rng) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  double r = static_cast<double>(rng.Uniform(0, 999)) / 1000;
  if (n == 1 || rank == 0) return r < 0.75 ? Sharding::Replicate() : Sharding::Maximal(rng.Uniform(0, n - 1));
  if (r < 0.1) return Sharding::Replicate();
  if (r < 0.16) return Sharding::Maximal(rng.Uniform(0, n - 1));
  // The tiled part: all n devices (60%), or a proper divisor with the rest
  // as a replicated subgroup.
  int64_t tiled = n;
  std::vector<int64_t> divs = Divisors(n);
  if (r >= 0.6 && divs.size() > 2) tiled = divs[rng.Uniform(1, divs.size() - 2)];
  // Hand each prime factor of the tiled part to a dim: mostly dims of size
  // > 1 (any dim, even one it does not divide), sometimes any dim at all.
  std::vector<int64_t> big;
  for (int64_t d = 0; d < rank; ++d)
    if (dims[d] > 1) big.push_back(d);
  // Prefer few tiled dims: pick the candidate dims once.
  rng.Shuffle(big);
  if (!big.empty()) big.resize(rng.Uniform(1, std::min<int64_t>(big.size(), 3)));
  std::vector<int64_t> tiles(rank, 1);
  for (int64_t p : PrimeFactors(tiled)) {
    int64_t d = big.empty() || rng.Coin(0.1) ? rng.Uniform(0, rank - 1)
                                               : big[rng.Uniform(0, big.size() - 1)];
    tiles[d] *= p;
  }
  std::vector<int64_t> array = tiles;
  const bool partial = tiled < n;
  if (partial) array.push_back(n / tiled);
  TileAssignment devices = RandomDevices(array, n, rng);
  return partial ? Sharding::PartialTile(devices) : Sharding::Tile(devices);
}

// A partially replicated tiling in a transposed multi-way iota order, the
// class the plain draw above reaches rarely at once: tiles on 1-2 dims over a
// proper divisor of n, the rest of the devices a replicated subgroup, the
// device array (tiles + subgroup, often 3-D) filled from iota reshaped to
// every prime factor of n (grouped into at most 3 dims) read in a shuffled
// order, e.g. [2,2,4]<=[2,2,4]T(2,1,0) or [4,2,2]<=[2,4,2]T(1,0,2) on 16.
// Falls back to RandomArraySharding when n has fewer than two prime factors.
Sharding RandomStructuredSharding(const std::vector<int64_t>& dims, int64_t n, Rng& rng) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> primes = PrimeFactors(n);
  if (rank == 0 || primes.size() < 2) return RandomArraySharding(dims, n, rng);
  rng.Shuffle(primes);
  // The first k primes tile, the rest replicate (at least one each).
  const int64_t k = rng.Uniform(1, static_cast<int64_t>(primes.size()) - 1);
  std::vector<int64_t> tiled_dims;
  for (int64_t d = 0; d < rank; ++d) tiled_dims.push_back(d);
  rng.Shuffle(tiled_dims);
  tiled_dims.resize(std::min<int64_t>(rank, rng.Uniform(1, 2)));
  std::vector<int64_t> array(rank, 1);
  int64_t replicated = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(primes.size()); ++i) {
    if (i < k) array[tiled_dims[rng.Uniform(0, tiled_dims.size() - 1)]] *= primes[i];
    else replicated *= primes[i];
  }
  array.push_back(replicated);
  std::vector<int64_t> reshape;
  const int64_t parts = std::min<int64_t>(static_cast<int64_t>(primes.size()), 3);
  reshape.assign(parts, 1);
  for (size_t i = 0; i < primes.size(); ++i)
    reshape[i < static_cast<size_t>(parts) ? i : rng.Uniform(0, parts - 1)] *= primes[i];
  std::vector<int64_t> perm(parts);
  std::iota(perm.begin(), perm.end(), 0);
  while (std::is_sorted(perm.begin(), perm.end())) rng.Shuffle(perm);
  return Sharding::PartialTile(TileAssignment::Iota(array, reshape, perm));
}

// The ops whose operands an op-focused variant shards independently.
bool IsFocusOp(const Instruction& i) {
  switch (i.opcode()) {
    case Opcode::kGather:
    case Opcode::kScatter:
    case Opcode::kReshape:
    case Opcode::kDynamicSlice:
    case Opcode::kDot:
    case Opcode::kConvolution:
      return true;
    default:
      return false;
  }
}

void CollectLeaves(const Shape& s, std::vector<const Shape*>& out) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple_shapes()) CollectLeaves(e, out);
  } else {
    out.push_back(&s);
  }
}

// nullopt when the shape has a leaf no sharding can describe (token,
// opaque).
std::optional<Sharding> RandomSharding(const Shape& shape, int64_t n, Rng& rng) {
  std::vector<const Shape*> leaves;
  CollectLeaves(shape, leaves);
  for (const Shape* l : leaves)
    if (!l->IsArray()) return std::nullopt;
  if (!shape.IsTuple()) return RandomArraySharding(shape.dimensions(), n, rng);
  // Tuples: sometimes one sharding for every leaf (as XLA prints a
  // non-tuple sharding on a tuple), mostly one per leaf.
  std::vector<Sharding> elements;
  if (rng.Coin(0.2) && !leaves.empty()) {
    // The same kind on every leaf only makes sense for equal ranks; draw
    // per leaf but from one generator state so shapes of equal rank agree.
    uint64_t fork = rng.Next();
    for (const Shape* l : leaves) {
      Rng same(fork);
      elements.push_back(RandomArraySharding(l->dimensions(), n, same));
    }
  } else {
    for (const Shape* l : leaves) elements.push_back(RandomArraySharding(l->dimensions(), n, rng));
  }
  return Sharding::Tuple(std::move(elements));
}

bool IsManualBoundary(const Instruction& i) {
  if (i.opcode() != Opcode::kCustomCall) return false;
  const std::string& t = i.attrs().custom_call_target;
  return t == "SPMDFullToShardShape" || t == "SPMDShardToFullShape";
}

bool HasManual(const Sharding& s) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements())
      if (HasManual(e)) return true;
    return false;
  }
  return s.IsManual() || s.HasManualSubgroup();
}

// A partial-sum sharding for an array of `dims` on n devices: {unreduced}
// (every device holds a summand of the whole value), or a tiling of a
// divisor d of n with the other n / d devices of each tile holding
// summands (last_tile_dims={unreduced}).
Sharding RandomUnreducedSharding(const std::vector<int64_t>& dims, int64_t n, Rng& rng) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> divs = Divisors(n);
  if (n == 1 || rank == 0 || divs.size() <= 2 || rng.Coin(0.4)) return Sharding::Unreduced();
  const int64_t tiled = divs[rng.Uniform(1, divs.size() - 2)];
  std::vector<int64_t> array(rank, 1);
  for (int64_t p : PrimeFactors(tiled)) array[rng.Uniform(0, rank - 1)] *= p;
  array.push_back(n / tiled);
  return Sharding::Subgroup(RandomDevices(array, n, rng), {SubgroupType::kUnreduced});
}

bool HasShardGroup(const Sharding& s) {
  if (s.shard_group().has_value()) return true;
  for (const Sharding& e : s.tuple_elements())
    if (HasShardGroup(e)) return true;
  return false;
}

bool HasManualParts(const Module& module) {
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions())
      if (IsManualBoundary(*i) || (i->has_sharding() && HasManual(*i->sharding()))) return true;
  return false;
}

// The instructions whose annotation a variant may change: the entry's
// parameters, root and interior instructions, and the interior instructions
// of while / conditional / call bodies (their parameters and roots are tied
// to the caller's sharding). Reducers and other to_apply computations carry
// no meaningful shardings. Manual regions keep their boundaries: the
// sharding of a value entering one (operand of SPMDFullToShardShape) and of
// one leaving it say how the region's shapes split the whole.
void CollectCandidates(const Computation& c, bool is_entry, std::vector<Instruction*>& out,
                       std::vector<const Computation*>& seen) {
  if (std::find(seen.begin(), seen.end(), &c) != seen.end()) return;
  seen.push_back(&c);
  std::vector<const Instruction*> entering;
  for (const auto& owned : c.instructions())
    if (IsManualBoundary(*owned) && owned->attrs().custom_call_target == "SPMDFullToShardShape")
      for (const Instruction* o : owned->operands()) entering.push_back(o);
  for (const auto& owned : c.instructions()) {
    Instruction* i = owned.get();
    const bool boundary = i->opcode() == Opcode::kParameter || i == c.root();
    if (boundary && !is_entry) continue;
    if (IsManualBoundary(*i)) continue;
    if (std::find(entering.begin(), entering.end(), i) != entering.end()) continue;
    if (i->has_sharding() && (HasManual(*i->sharding()) || HasShardGroup(*i->sharding()))) continue;
    if (i->opcode() == Opcode::kAfterAll) continue;
    out.push_back(i);
    if (i->opcode() == Opcode::kWhile || i->opcode() == Opcode::kConditional ||
        i->opcode() == Opcode::kCall)
      for (const Computation* called : i->called_computations())
        if (called != nullptr) CollectCandidates(*called, false, out, seen);
  }
}

std::string ShardingText(const Instruction& i) {
  return i.has_sharding() ? i.sharding()->ToString(/*include_metadata=*/false) : "";
}

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> SplitFilter(const std::string& filter) {
  std::vector<std::string> out;
  std::stringstream ss(filter);
  std::string part;
  while (std::getline(ss, part, ','))
    if (!Trim(part).empty()) out.push_back(Trim(part));
  return out;
}

bool MatchesFilter(const std::string& name, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  for (const std::string& f : filters)
    if (name.find(f) != std::string::npos) return true;
  return false;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The leading `//` comment lines of a case file (its header), except the
// ones the variant rewrites.
std::vector<std::string> HeaderLines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.rfind("//", 0) != 0) {
      if (Trim(line).empty()) continue;
      break;
    }
    std::string body = Trim(line.substr(2));
    if (body.rfind("num_partitions=", 0) == 0 || body.rfind("pipeline:", 0) == 0) continue;
    out.push_back(line);
  }
  return out;
}

// Builds, writes and runs one variant.
// `text` is the case file (its header comments are kept); `module_text` the
// module to mutate (the case's own, or a shrunk copy).
FuzzVariantResult RunVariant(const PartitioningCase& c, const std::string& text,
                             const std::string& module_text, const std::string& shrunk,
                             const ShardingFuzzOptions& options, int64_t variant) {
  FuzzVariantResult out;
  out.case_name = c.name;
  out.variant = variant;
  out.variant_seed = VariantSeed(options.seed, c.name, variant);
  const int64_t n = options.num_partitions > 0 ? options.num_partitions : c.num_partitions;
  PartitioningCase v = c;
  v.num_partitions = n;
  v.name = c.name + ".s" + std::to_string(options.seed) + ".v" + std::to_string(variant);
  v.path = (fs::path(options.out_dir) / (v.name + ".hlo")).string();
  out.file = v.path;
  out.result.name = v.name;
  StatusOr<std::unique_ptr<Module>> m = ParseModuleText(module_text);
  if (!m.ok()) {
    out.result.outcome = CaseOutcome::kFailed;
    out.result.detail = "parse: " + m.status().ToString();
    return out;
  }
  Module& mod = **m;
  // The case header's count is the one its shardings were written for.
  mod.set_num_partitions(c.num_partitions);
  out.mutations = MutateShardings(mod, n, out.variant_seed);
  bool dropped = false;
  for (const ShardingMutation& mu : out.mutations) dropped |= mu.after.empty() && !mu.before.empty();
  // A dropped annotation is for propagation to fill; without propagation
  // the partitioner would read it as replicated.
  v.propagate = c.propagate || dropped;
  std::ostringstream file;
  file << "// num_partitions=" << n << "\n";
  file << "// pipeline: "
       << (v.propagate ? "ShardingPropagation; SpmdPartitioner" : "SpmdPartitioner")
       << "  [fuzz-shardings variant]\n";
  for (const std::string& h : HeaderLines(text)) file << h << "\n";
  file << "// fuzz-shardings: case " << c.name << ", seed " << options.seed << ", variant "
       << variant << " (variant seed " << out.variant_seed << ")\n";
  if (!shrunk.empty()) file << "// fuzz-shardings: shrunk first: " << shrunk << "\n";
  for (const ShardingMutation& mu : out.mutations)
    file << "// fuzz-shardings: %" << mu.instruction << ": "
         << (mu.before.empty() ? "(none)" : mu.before) << " -> "
         << (mu.after.empty() ? "(dropped)" : mu.after) << "\n";
  file << PrintModule(mod);
  {
    std::ofstream f(v.path);
    f << file.str();
    if (!f) {
      out.result.outcome = CaseOutcome::kFailed;
      out.result.detail = "cannot write " + v.path;
      return out;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  out.result = options.run.isolate ? RunPartitioningCaseIsolated(v, options.run)
                                   : RunPartitioningCase(v, options.run.seed,
                                                         options.run.max_run_bytes);
  out.result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.result.name = v.name;
  if (!shrunk.empty())
    out.result.detail = "shrunk first (" + shrunk + ")" +
                        (out.result.detail.empty() ? "" : "; " + out.result.detail);
  if (out.result.outcome != CaseOutcome::kFailed) {
    // Partitioned fine in the child: partition again here (no crash to
    // fear) to count the reshards that fell back to gathering.
    StatusOr<std::unique_ptr<Module>> again = ParseModuleText(file.str());
    if (again.ok()) {
      spmd::ResetReshardStats();
      StatusOr<std::unique_ptr<Module>> p =
          PropagateAndPartition(**again, n, v.propagate, /*strict=*/false);
      if (p.ok()) {
        spmd::ReshardStats stats = spmd::GetReshardStats();
        out.gather_all = stats.count(spmd::ReshardPath::kFallbackGatherAll);
        out.gather_some = stats.count(spmd::ReshardPath::kFallbackGatherSome);
      }
    }
    // Under --strict an op without a partitioning rule for its shardings
    // (run on whole values with a warning otherwise) is an error: say which.
    StatusOr<std::unique_ptr<Module>> strict_copy = ParseModuleText(file.str());
    if (strict_copy.ok()) {
      StatusOr<std::unique_ptr<Module>> p =
          PropagateAndPartition(**strict_copy, n, v.propagate, /*strict=*/true);
      if (!p.ok()) out.strict_error = p.status().message();
    }
  }
  const bool keep = out.result.outcome == CaseOutcome::kFailed ||
                    (options.keep_fallbacks && out.gather_all > 0);
  if (!keep && !options.keep_passing) {
    std::error_code ec;
    fs::remove(v.path, ec);
  }
  return out;
}

}  // namespace

bool IsTimeout(const PartitioningCaseResult& r) {
  return r.outcome == CaseOutcome::kFailed && r.detail.find("timeout (over") != std::string::npos;
}

uint64_t VariantSeed(uint64_t seed, const std::string& name, int64_t variant) {
  uint64_t h = Mix(seed);
  for (unsigned char ch : name) h = Mix(h ^ ch);
  return Mix(h ^ static_cast<uint64_t>(variant));
}

std::string UnmutableReason(const Module& module) {
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions()) {
      // Device-dependent ops are fine inside manual regions (annotated
      // manual), whose shardings the fuzzer keeps.
      const bool manual = i->has_sharding() && HasManual(*i->sharding());
      const bool device_dependent =
          GetOpcodeFamily(i->opcode()) == OpcodeFamily::kCollective ||
          i->opcode() == Opcode::kPartitionId || i->opcode() == Opcode::kReplicaId;
      if (device_dependent && !manual)
        return std::string(OpcodeName(i->opcode())) + " outside a manual region (%" + i->name() +
               ")";
    }
  return "";
}

std::vector<ShardingMutation> MutateShardings(Module& module, int64_t num_partitions,
                                              uint64_t seed) {
  Rng rng(seed);
  std::vector<Instruction*> candidates;
  std::vector<const Computation*> seen;
  if (module.entry() == nullptr) return {};
  CollectCandidates(*module.entry(), true, candidates, seen);
  const bool new_count = num_partitions != module.num_partitions();
  // Per variant, how eager each kind of change is, so that some variants
  // touch one value and others most of them.
  // A quarter of the variants are dense: every candidate gets a random
  // sharding, so every edge of the graph may need a reshard.
  // Another fifth are sparse: parameters and root only, every interior
  // annotation dropped, so propagation decides the rest.
  const bool dense = rng.Coin(0.25);
  const bool sparse = !dense && rng.Coin(0.2);
  const double p_boundary = dense || sparse ? 1.0 : rng.Coin(0.5) ? 0.8 : 0.35;
  const double p_interior = dense ? 1.0 : sparse ? 0.0 : rng.Coin(0.5) ? 0.5 : 0.15;
  // With manual regions, unannotated values may be manual ones: nothing is
  // added or dropped there.
  const bool manual = HasManualParts(module);
  const double p_drop = dense || manual ? 0.0 : sparse ? 1.0 : rng.Coin(0.4) ? 0.3 : 0.0;
  const double p_add = manual || sparse ? 0.0 : dense ? 1.0 : rng.Coin(0.3) ? 0.1 : 0.0;
  std::vector<ShardingMutation> out;
  std::vector<const Instruction*> rewritten;
  auto change = [&](Instruction* i) {
    // Partial sums are what a contraction yields before its reduction:
    // dots and convolutions sometimes keep them.
    const bool contraction = i->opcode() == Opcode::kDot || i->opcode() == Opcode::kConvolution;
    std::optional<Sharding> s =
        contraction && i->shape().IsArray() && rng.Coin(0.15)
            ? RandomUnreducedSharding(i->shape().dimensions(), num_partitions, rng)
            : RandomSharding(i->shape(), num_partitions, rng);
    if (!s) return false;
    ShardingMutation m{i->name(), ShardingText(*i), s->ToString(false)};
    if (m.before == m.after) return false;
    i->set_sharding(*s);
    out.push_back(std::move(m));
    rewritten.push_back(i);
    return true;
  };
  for (Instruction* i : candidates) {
    const bool boundary = i->opcode() == Opcode::kParameter || i == module.entry()->root();
    if (i->has_sharding()) {
      if (new_count || rng.Coin(boundary ? p_boundary : p_interior)) {
        change(i);
      } else if (!boundary && rng.Coin(p_drop)) {
        out.push_back({i->name(), ShardingText(*i), ""});
        i->clear_sharding();
      }
    } else if (!boundary && rng.Coin(p_add)) {
      change(i);
    } else if (boundary && !manual && rng.Coin(p_boundary / 2)) {
      change(i);  // an unannotated parameter or root gets one
    }
  }
  // At least one change: try the candidates from a random start.
  if (out.empty() && !candidates.empty()) {
    size_t start = rng.Uniform(0, candidates.size() - 1);
    for (size_t k = 0; k < candidates.size() && out.empty(); ++k) {
      Instruction* i = candidates[(start + k) % candidates.size()];
      if (!manual || i->has_sharding()) change(i);
    }
  }
  // An op-focused variant (a fifth, when the module has one of the ops):
  // up to three gathers, scatters, reshapes, dynamic-slices, dots or
  // convolutions get a partially replicated, transposed-iota sharding on
  // their result and on every array operand, each drawn on its own, so the
  // operands of one op disagree with each other and with the result.
  std::vector<Instruction*> focus;
  for (Instruction* i : candidates)
    if (IsFocusOp(*i) && !manual) focus.push_back(i);
  if (!focus.empty() && rng.Coin(0.2)) {
    rng.Shuffle(focus);
    if (focus.size() > 3) focus.resize(3);
    auto structured = [&](Instruction* i) {
      if (!i->shape().IsArray() || i->shape().element_type() == PrimitiveType::TOKEN) return;
      if (std::find(candidates.begin(), candidates.end(), i) == candidates.end()) return;
      Sharding s = RandomStructuredSharding(i->shape().dimensions(), num_partitions, rng);
      ShardingMutation m{i->name(), ShardingText(*i), s.ToString(false)};
      if (m.before == m.after) return;
      i->set_sharding(s);
      out.push_back(std::move(m));
      rewritten.push_back(i);
    };
    for (Instruction* op : focus) {
      structured(op);
      for (Instruction* operand : op->operands()) structured(operand);
    }
  }
  if (new_count) {
    // Annotations not rewritten above (loop bodies' parameters and roots,
    // reducers, values with tokens) would name devices of the old count:
    // they get new ones, or none.
    for (const auto& c : module.computations())
      for (const auto& owned : c->instructions()) {
        Instruction* i = owned.get();
        if (!i->has_sharding() ||
            std::find(rewritten.begin(), rewritten.end(), i) != rewritten.end())
          continue;
        if (!change(i)) {
          out.push_back({i->name(), ShardingText(*i), ""});
          i->clear_sharding();
        }
      }
    module.set_num_partitions(num_partitions);
  }
  return out;
}

StatusOr<ShardingFuzzSummary> RunShardingFuzz(
    const std::string& file_or_dir, const ShardingFuzzOptions& options,
    const std::function<void(const FuzzVariantResult&)>& on_variant) {
  std::error_code ec;
  std::vector<std::string> files;
  const bool is_dir = fs::is_directory(file_or_dir, ec);
  if (is_dir) {
    for (const auto& e : fs::directory_iterator(file_or_dir, ec))
      if (e.path().extension() == ".hlo") files.push_back(e.path().string());
    if (ec) return Status::Error("cannot list " + file_or_dir + ": " + ec.message());
    std::sort(files.begin(), files.end());
  } else {
    if (!fs::exists(file_or_dir, ec)) return Status::Error("cannot read " + file_or_dir);
    files.push_back(file_or_dir);
  }
  fs::create_directories(options.out_dir, ec);
  if (ec) return Status::Error("cannot create " + options.out_dir + ": " + ec.message());
  const std::vector<std::string> filters = SplitFilter(options.filter);
  ShardingFuzzSummary summary;
  auto skip_case = [&](const std::string& name, std::string why) {
    summary.skipped_cases++;
    summary.skipped_cases_detail.emplace_back(name, std::move(why));
  };
  for (const std::string& f : files) {
    const std::string name = fs::path(f).stem().string();
    if (!MatchesFilter(name, filters)) continue;
    const std::string text = ReadText(f);
    StatusOr<PartitioningCase> header = ReadPartitioningCase(f);
    PartitioningCase c;
    StatusOr<std::unique_ptr<Module>> m = ParseModuleText(text);
    if (!m.ok()) {
      if (!is_dir) return m.status();
      skip_case(name, "parse: " + m.status().message());
      continue;
    }
    if (header.ok()) {
      c = *header;
    } else {
      // A plain module: the device count from the flag or its header, with
      // propagation as `meshsplit verify` runs it.
      if (is_dir) {
        skip_case(name, header.status().message());
        continue;
      }
      c.name = name;
      c.path = f;
      c.num_partitions = options.num_partitions > 0 ? options.num_partitions
                                                    : (*m)->num_partitions();
      c.propagate = true;
    }
    if (!c.expect_error.empty()) {
      skip_case(name, "expects an error");
      continue;
    }
    if (std::string why = UnmutableReason(**m); !why.empty()) {
      skip_case(name, "not mutable: " + why);
      continue;
    }
    const int64_t n = options.num_partitions > 0 ? options.num_partitions : c.num_partitions;
    if (n != c.num_partitions && HasManualParts(**m)) {
      skip_case(name, "not mutable: manual region shapes are for " +
                          std::to_string(c.num_partitions) + " devices");
      continue;
    }
    if (n < 1) {
      skip_case(name, "no device count");
      continue;
    }
    // Whole values on every device is the largest a variant gets (plus the
    // reference run). Larger cases are shrunk first (transforms/
    // shrink_shapes.h: same ops, small dims), with dims of at least 8 so
    // that new tile counts still find something to cut.
    std::string module_text = text, shrunk;
    int64_t bytes = EstimatePeakBytes(*(*m)->entry());
    if (bytes > options.max_case_bytes / (n + 1)) {
      ShrinkShapesOptions shrink;
      shrink.min_dim = 8;
      StatusOr<ShrinkShapesReport> report = ShrinkShapes(**m, shrink);
      const int64_t before = bytes;
      if (report.ok()) bytes = EstimatePeakBytes(*(*m)->entry());
      if (!report.ok() || bytes > options.max_case_bytes / (n + 1)) {
        skip_case(name, "too large: estimated " + std::to_string(before >> 20) + " MiB x " +
                            std::to_string(n + 1) + " runs" +
                            (report.ok() ? ", " + std::to_string(bytes >> 20) + " MiB shrunk"
                                         : ", cannot shrink"));
        continue;
      }
      shrunk = report->Summary();
      module_text = PrintModule(**m);
      summary.shrunk_cases++;
    }
    summary.cases++;
    for (int64_t k = 0; k < options.count; ++k) {
      FuzzVariantResult r = RunVariant(c, text, module_text, shrunk, options, k);
      switch (r.result.outcome) {
        case CaseOutcome::kPassed: summary.passed++; break;
        case CaseOutcome::kFailed:
          if (IsTimeout(r.result)) {
            summary.timed_out++;
          } else {
            summary.failed++;
          }
          break;
        case CaseOutcome::kSkipped: summary.skipped++; break;
      }
      if (on_variant) on_variant(r);
      summary.variants.push_back(std::move(r));
    }
  }
  return summary;
}

}  // namespace meshsplit
