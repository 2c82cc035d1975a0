// Machine profiles: the JSON document round-trips, lookups fall back from
// (kind, axes) to the slowest measured single axis to the default, bad
// documents are refused.
#include <gtest/gtest.h>

#include "cost/machine_profile.h"

namespace meshsplit {
namespace {

MachineProfile Sample() {
  MachineProfile p;
  p.flops_per_second = 2e10;
  p.memory_bytes_per_second = 5e9;
  p.link = {1e-4, 1e9};
  p.collectives["all-reduce@model"] = {2e-5, 4e9};
  p.collectives["all-reduce@data"] = {5e-5, 1e9};
  p.backend = "threads";
  p.mesh = "data=2,model=4";
  p.measured_at = "2026-12-02T07:40Z";
  return p;
}

TEST(MachineProfile, JsonRoundTrip) {
  const MachineProfile p = Sample();
  auto back = ParseMachineProfile(MachineProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->flops_per_second, 2e10);
  EXPECT_EQ(back->memory_bytes_per_second, 5e9);
  EXPECT_EQ(back->link.latency_seconds, 1e-4);
  ASSERT_EQ(back->collectives.size(), 2u);
  EXPECT_EQ(back->collectives.at("all-reduce@model").bytes_per_second, 4e9);
  EXPECT_EQ(back->source, "p.json");
  EXPECT_EQ(back->Describe(), "p.json (threads, data=2,model=4, 2026-12-02T07:40Z)");
}

TEST(MachineProfile, LookupFallsBack) {
  const MachineProfile p = Sample();
  // Exact entry.
  EXPECT_DOUBLE_EQ(p.CollectiveSeconds("all-reduce", "model", 4e9), 2e-5 + 1);
  // Two axes measured one by one: the slower (data) one.
  EXPECT_DOUBLE_EQ(p.CollectiveSeconds("all-reduce", "data,model", 1e9), 5e-5 + 1);
  // A kind never measured: the default.
  EXPECT_DOUBLE_EQ(p.CollectiveSeconds("all-gather", "model", 1e9), 1e-4 + 1);
}

TEST(MachineProfile, BadDocumentsAreRefused) {
  EXPECT_FALSE(ParseMachineProfile("[]", "p.json").ok());
  EXPECT_FALSE(ParseMachineProfile(R"({"flops_per_second": 1})", "p.json").ok());
  std::string zero_bw = MachineProfileToJson(Sample());
  const std::string from = "\"bytes_per_second\": 1000000000.0";
  ASSERT_NE(zero_bw.find(from), std::string::npos) << zero_bw;
  zero_bw.replace(zero_bw.find(from), from.size(), "\"bytes_per_second\": 0");
  auto r = ParseMachineProfile(zero_bw, "p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("positive"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace meshsplit
