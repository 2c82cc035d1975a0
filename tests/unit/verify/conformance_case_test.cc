// Header lines of partitioning conformance cases (spmd/
// conformance_partitioning.h) whose numbers do not parse: a located error
// or a skipped case with the reason, never an uncaught std::stoll exception.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "verify/conformance_partitioning.h"

namespace meshsplit {
namespace {

constexpr char kModule[] = R"(HloModule m
ENTRY e {
  a = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}
  b = f32[4,6] parameter(1), sharding={replicated}
  ROOT d = f32[8,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[2,1]0,1}
}
)";

std::string WriteCase(const std::string& name, const std::string& header) {
  const std::string path = testing::TempDir() + "/" + name + ".hlo";
  std::ofstream(path) << header << kModule;
  return path;
}

TEST(ConformanceCase, ReadsAWellFormedHeader) {
  StatusOr<PartitioningCase> c =
      ReadPartitioningCase(WriteCase("good", "// num_partitions=2\n// pipeline: Spmd\n"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_partitions, 2);
  EXPECT_FALSE(c->propagate);
  PartitioningCaseResult r = RunPartitioningCase(*c, /*seed=*/1);
  EXPECT_EQ(r.outcome, CaseOutcome::kPassed) << r.detail;
}

TEST(ConformanceCase, BadNumPartitionsIsALocatedError) {
  const char* bad[] = {"99999999999999999999999", "-2", "0", "2x", "", "two"};
  for (const char* v : bad) {
    const std::string header = "// a comment\n// num_partitions=" + std::string(v) + "\n";
    StatusOr<PartitioningCase> c = ReadPartitioningCase(WriteCase("bad_partitions", header));
    ASSERT_FALSE(c.ok()) << v;
    EXPECT_NE(c.status().message().find("num_partitions must be a positive integer"),
              std::string::npos)
        << c.status().ToString();
    EXPECT_EQ(c.status().loc().line, 2) << v;
    EXPECT_EQ(c.status().loc().column, 19) << v;  // the first character after '='
  }
}

TEST(ConformanceCase, UnreadableWindowedEinsumOptionSkipsTheCase) {
  const std::string header =
      "// num_partitions=2\n// options: threshold_for_windowed_einsum_mib=99999999999999999999999"
      "\n";
  StatusOr<PartitioningCase> c = ReadPartitioningCase(WriteCase("bad_option", header));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  PartitioningCaseResult r = RunPartitioningCase(*c, /*seed=*/1);
  EXPECT_EQ(r.outcome, CaseOutcome::kSkipped) << r.detail;
  EXPECT_EQ(r.reason, "options");
  EXPECT_NE(r.detail.find("does not fit in 64 bits"), std::string::npos) << r.detail;

  const std::string iterations =
      "// num_partitions=2\n// options: max_windowed_einsum_iteration=123456789012345678901\n";
  c = ReadPartitioningCase(WriteCase("bad_iterations", iterations));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  r = RunPartitioningCase(*c, /*seed=*/1);
  EXPECT_EQ(r.outcome, CaseOutcome::kSkipped) << r.detail;
  EXPECT_NE(r.detail.find("max_windowed_einsum_iteration=123456789012345678901"),
            std::string::npos)
      << r.detail;
}

}  // namespace
}  // namespace meshsplit
