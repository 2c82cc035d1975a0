// Differential property test: 1,000 seeded random modules (spmd/random_module.h)
// with random shardings on meshes of 1..16 devices are propagated,
// partitioned and run on N virtual devices; every result must match the
// single-device interpreter (spmd/verify.h). A failure prints the seed, the
// verdict and the module text, so it can be replayed with
// `meshsplit verify FILE --num-partitions N [--no-propagate]`.
// MESHSPLIT_DIFF_SEEDS=a:b overrides the seed range [a, b).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "spmd/random_module.h"
#include "spmd/verify.h"
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
  int64_t failures = 0;
  std::map<std::string, int64_t> by_status;
  for (uint64_t seed = begin; seed < end; ++seed) {
    RandomCase c = GenerateRandomCase(seed);
    auto m = ParseModuleText(c.text);
    ASSERT_TRUE(m.ok()) << "seed " << seed << ": " << m.status().ToString() << "\n" << c.text;
    VerifyOptions options;
    options.num_partitions = c.num_partitions;
    options.seed = seed;
    options.propagate = c.propagate;
    VerifyResult r = VerifyModule(**m, options);
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

}  // namespace
}  // namespace meshsplit
