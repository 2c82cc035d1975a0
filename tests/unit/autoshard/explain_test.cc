// Verdicts between two costed plans: the deltas, the factor by which
// collectives would have to get cheaper, and the rate-flag thresholds, on
// hand-made evaluations whose answers are worked out below.
#include <gtest/gtest.h>

#include "autoshard/explain.h"

namespace meshsplit::autoshard {
namespace {

Evaluation Eval(double compute, double latency, double wire, int64_t collectives) {
  Evaluation e;
  e.ok = e.feasible = true;
  e.compute_seconds = compute;
  e.comm_latency_seconds = latency;
  e.comm_wire_seconds = wire;
  e.comm_seconds = latency + wire;
  e.num_collectives = collectives;
  e.time_seconds = compute + latency + wire;
  return e;
}

TEST(Explain, ReplicationBeatsASplitOnLatency) {
  MachineModel m;  // defaults: 5 us per collective, 50 GB/s
  // Replicated: 100 us of compute. Split: 60 us of compute plus 10
  // collectives (50 us latency, 20 us on the wire).
  const Evaluation replicated = Eval(100e-6, 0, 0, 0);
  const Evaluation split = Eval(60e-6, 50e-6, 20e-6, 10);
  const Verdict v = Explain(replicated, split, m);
  EXPECT_DOUBLE_EQ(v.roofline_delta, -40e-6);
  EXPECT_EQ(v.collectives_delta, 10);
  // 70 us more communication for 40 us saved: 1.75x cheaper collectives.
  EXPECT_DOUBLE_EQ(v.comm_factor_to_win, 1.75);
  // Latency alone: 40 - 20 = 20 us of room over 10 collectives: 2 us each.
  EXPECT_NEAR(v.latency_to_win, 2e-6, 1e-15);
  // Bandwidth alone: 40 - 50 < 0: no link is fast enough.
  EXPECT_EQ(v.bandwidth_to_win, -1);
  EXPECT_NE(v.text.find("saves 40 us of compute"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("10 more collectives"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("1.75x cheaper"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("--collective-latency below 2 us"), std::string::npos) << v.text;
}

TEST(Explain, BandwidthThreshold) {
  MachineModel m;
  // 40 us saved, 10 us of latency and 60 us on the wire: the wire part must
  // shrink to 30 us, so the link must be 2x faster (100 GB/s).
  const Verdict v = Explain(Eval(100e-6, 0, 0, 0), Eval(60e-6, 10e-6, 60e-6, 2), m);
  EXPECT_NEAR(v.bandwidth_to_win, 100e9, 1);
  EXPECT_NE(v.text.find("--link-bandwidth above 100 GB/s"), std::string::npos) << v.text;
}

TEST(Explain, ASlowerAlternativeHasNoThreshold) {
  MachineModel m;
  const Verdict v = Explain(Eval(50e-6, 0, 0, 0), Eval(70e-6, 5e-6, 1e-6, 1), m);
  EXPECT_GT(v.roofline_delta, 0);
  EXPECT_EQ(v.comm_factor_to_win, 0);
  EXPECT_EQ(v.latency_to_win, -1);
  EXPECT_NE(v.text.find("costs 20 us more compute"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("1 more collective:"), std::string::npos) << v.text;
}

}  // namespace
}  // namespace meshsplit::autoshard
