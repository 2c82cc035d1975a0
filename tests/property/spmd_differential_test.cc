// Differential property test: 1,000 seeded random modules (verify/random_module.h)
// with random shardings on meshes of 1..16 devices are propagated,
// partitioned and run on N virtual devices; every result must match the
// single-device interpreter (verify/verify.h). A failure prints the seed, the
// verdict and the module text, so it can be replayed with
// `meshsplit verify FILE --num-partitions N [--no-propagate]`.
// MESHSPLIT_DIFF_SEEDS=a:b overrides the seed range [a, b);
// MESHSPLIT_DIFF_PRINT=1 prints each module first.
#include <gtest/gtest.h>

#include <cstdlib>
#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "partitioner/partitioner.h"
#include "verify/random_module.h"
#include "verify/verify.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

TEST(SpmdDifferential, GeneratorIsDeterministicAndParses) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    RandomCase a = GenerateRandomCase(seed), b = GenerateRandomCase(seed);
    ASSERT_EQ(a.text, b.text);
    auto m = ParseModuleText(a.text);
    ASSERT_TRUE(m.ok()) << "seed " << seed << ": " << m.status().ToString() << "\n" << a.text;
  }
  EXPECT_NE(GenerateRandomCase(1).text, GenerateRandomCase(2).text);
}

TEST(SpmdDifferential, ThousandRandomModules) {
  uint64_t begin = 0, end = 1000;
  if (const char* r = std::getenv("MESHSPLIT_DIFF_SEEDS")) {
    std::string s = r;
    size_t colon = s.find(':');
    if (colon != std::string::npos) {
      begin = std::stoull(s.substr(0, colon));
      end = std::stoull(s.substr(colon + 1));
    }
  }
  // MESHSPLIT_DIFF_PRINT=1 prints every module before it runs (a crash's
  // module is the last one printed).
  const bool print = std::getenv("MESHSPLIT_DIFF_PRINT") != nullptr;
  int64_t failures = 0;
  std::map<std::string, int64_t> by_status;
  for (uint64_t seed = begin; seed < end; ++seed) {
    RandomCase c = GenerateRandomCase(seed);
    if (print) std::printf("seed %llu (%lld partitions, %s):\n%s", static_cast<unsigned long long>(seed),
                           static_cast<long long>(c.num_partitions),
                           c.propagate ? "propagate" : "no-propagate", c.text.c_str());
    if (print) std::fflush(stdout);
    auto m = ParseModuleText(c.text);
    ASSERT_TRUE(m.ok()) << "seed " << seed << ": " << m.status().ToString() << "\n" << c.text;
    VerifyResult r = VerifyModule(**m, VerifyOptionsFor(c, seed));
    by_status[r.status]++;
    if (!r.ok()) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << " (" << c.num_partitions << " partitions, "
                    << (c.propagate ? "propagate" : "no-propagate") << "): " << r.status
                    << ": " << r.message
                    << (r.divergent_instruction.empty()
                            ? ""
                            : "\nfirst diverging: %" + r.divergent_instruction + ": " +
                                  r.divergence_detail)
                    << "\n"
                    << c.text;
    }
  }
  std::string summary;
  for (const auto& [status, n] : by_status) summary += " " + status + "=" + std::to_string(n);
  std::printf("differential: %lld cases,%s\n", static_cast<long long>(end - begin),
              summary.c_str());
  EXPECT_EQ(failures, 0);
}

// A random dot whose shardings call for a windowed loop: the all-gather
// loop over a non-contracting or a contracting dim, or the reduce-scatter
// loop over a free or batch dim; optional batch dim split over a second
// mesh axis; uneven sizes; iota, transposed or permuted device orders.
std::string RandomWindowedDot(uint64_t seed, int64_t* num_partitions) {
  std::mt19937_64 rng(seed * 7919 + 13);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t k = pick(2, 6), batch_split = pick(0, 2) == 0 ? 2 : 1;
  const bool has_batch = batch_split > 1 || pick(0, 1) == 1;
  const int64_t n = k * batch_split;
  *num_partitions = n;
  const int64_t B = pick(batch_split, 5), M = pick(1, 13), K = pick(1, 13), N = pick(1, 13);
  // Device order of the [batch_split, k] mesh.
  std::string order;
  const int64_t kind = pick(0, 2);
  if (kind == 0 || n < 4) {
    order = "<=[" + std::to_string(n) + "]";
  } else if (kind == 1 && batch_split > 1) {
    order = "<=[" + std::to_string(k) + "," + std::to_string(batch_split) + "]T(1,0)";
  } else {
    std::vector<int64_t> ids(n);
    for (int64_t i = 0; i < n; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int64_t i = 0; i < n; ++i) order += (i ? "," : "") + std::to_string(ids[i]);
  }
  // sharding of a value with dims `names` (B first when present): the
  // batch dim over batch_split, `dim` over k, the rest whole; a mesh axis
  // no dim uses becomes partial replication.
  auto sharding = [&](const std::string& names, char dim) {
    std::vector<int64_t> tiles;
    for (char c : names) tiles.push_back(c == 'B' ? batch_split : c == dim ? k : 1);
    int64_t used = 1;
    for (int64_t t : tiles) used *= t;
    std::string text = "{devices=[";
    for (size_t i = 0; i < tiles.size(); ++i) text += (i ? "," : "") + std::to_string(tiles[i]);
    if (used < n) text += "," + std::to_string(n / used);
    text += "]" + order + (used < n ? " last_tile_dim_replicate}" : "}");
    return text;
  };
  const std::string lb = has_batch ? "B" : "", bd = has_batch ? std::to_string(B) + "," : "";
  char ls = 'M', rs = 'N', os = 'M';
  switch (pick(0, 3)) {
    case 0: ls = 'M'; rs = 'N'; os = 'M'; break;   // all-gather rhs over N
    case 1: ls = 'M'; rs = 'K'; os = 'M'; break;   // all-gather rhs over K
    case 2: ls = 'K'; rs = 'K'; os = 'N'; break;   // reduce-scatter over N
    default: ls = 'K'; rs = 'K'; os = 'M'; break;  // reduce-scatter over M
  }
  auto dims = [&](int64_t a, int64_t b) {
    return bd + std::to_string(a) + "," + std::to_string(b);
  };
  std::string text = "HloModule wdot, num_partitions=" + std::to_string(n) + "\nENTRY e {\n";
  text += "  x = f32[" + dims(M, K) + "] parameter(0), sharding=" + sharding(lb + "MK", ls) + "\n";
  text += "  w = f32[" + dims(K, N) + "] parameter(1), sharding=" + sharding(lb + "KN", rs) + "\n";
  text += "  ROOT d = f32[" + dims(M, N) + "] dot(x, w), " +
          (has_batch ? "lhs_batch_dims={0}, rhs_batch_dims={0}, " : "") + "lhs_contracting_dims={" +
          (has_batch ? "2" : "1") + "}, rhs_contracting_dims={" + (has_batch ? "1" : "0") +
          "}, sharding=" + sharding(lb + "MN", os) + "\n}\n";
  return text;
}

// The windowed-einsum forms (all-gather and reduce-scatter loops, one way
// and both ways) against the single-device interpreter, on random
// dots (RandomWindowedDot) and on the general random modules, partitioned
// with every dot eligible (threshold 0). Odd seeds pass shards both ways.
// Counts the loops of each form, so the test fails if a form stops being
// chosen.
TEST(SpmdDifferential, WindowedEinsumRandomModules) {
  PartitionOptions windowed;
  windowed.windowed_einsum_threshold_bytes = 0;
  windowed.max_windowed_einsum_iterations = 64;
  windowed.windowed_einsum_reduce_scatter = true;
  int64_t failures = 0, cases = 0, one_loops = 0, both_loops = 0, rs_loops = 0, rs_both_loops = 0;
  for (uint64_t seed = 0; seed < 600; ++seed) {
    RandomCase c;
    if (seed < 300) {
      c.text = RandomWindowedDot(seed, &c.num_partitions);
      c.propagate = false;
    } else {
      c = GenerateRandomCase(seed);
      if (c.text.find(" dot(") == std::string::npos) continue;
    }
    ++cases;
    windowed.bidirectional_windowed_einsum = seed % 2 == 1;
    auto m = ParseModuleText(c.text);
    ASSERT_TRUE(m.ok()) << "seed " << seed << ": " << m.status().ToString() << "\n" << c.text;
    auto partitioned = PropagateAndPartition(**m, c.num_partitions, c.propagate, false,
                                             /*failed_stage=*/nullptr, windowed);
    if (!partitioned.ok()) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << ": " << partitioned.status().ToString() << "\n" << c.text;
      continue;
    }
    // Classify each windowed loop by its body: the reduce-scatter loop
    // passes a running sum (an add), the all-gather loop operand shards,
    // one or two of them per iteration.
    for (const auto& comp : (*partitioned)->computations())
      for (const auto& i : comp->instructions()) {
        if (i->opcode() != Opcode::kWhile || i->name().find(".windowed") == std::string::npos)
          continue;
        int64_t permutes = 0, sums = 0;
        for (const auto& j : i->called_computations()[1]->instructions())
          if (j->opcode() == Opcode::kCollectivePermute) {
            ++permutes;
            sums += j->operand(0)->opcode() == Opcode::kAdd;
          }
        ++(sums > 0 ? (permutes == 2 ? rs_both_loops : rs_loops)
                    : (permutes == 2 ? both_loops : one_loops));
      }
    VerifyResult r = VerifyPartitioned(**m, **partitioned, VerifyOptionsFor(c, seed));
    if (!r.ok()) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << " (" << c.num_partitions << " partitions, "
                    << (seed % 2 == 1 ? "both ways" : "one way") << "): " << r.status << ": "
                    << r.message << "\n"
                    << c.text;
    }
  }
  std::printf(
      "windowed einsum differential: %lld cases; windowed loops: %lld all-gather one way, "
      "%lld all-gather both ways, %lld reduce-scatter one way, %lld reduce-scatter both ways\n",
      static_cast<long long>(cases), static_cast<long long>(one_loops),
      static_cast<long long>(both_loops), static_cast<long long>(rs_loops),
      static_cast<long long>(rs_both_loops));
  EXPECT_EQ(failures, 0);
  EXPECT_GE(one_loops, 20);
  EXPECT_GE(both_loops, 20);
  EXPECT_GE(rs_loops, 20);
  EXPECT_GE(rs_both_loops, 10);
}

}  // namespace
}  // namespace meshsplit
