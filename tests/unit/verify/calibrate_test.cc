// The calibration behind `meshsplit calibrate`: the fit recovers known rates,
// and a small run measures every collective kind with positive rates.
#include <gtest/gtest.h>

#include "verify/calibrate.h"

namespace meshsplit {
namespace {

TEST(Calibrate, FitRecoversLatencyAndBandwidth) {
  const std::vector<double> wire = {4e3, 6.4e4, 1e6};
  std::vector<double> secs;
  for (double w : wire) secs.push_back(3e-5 + w / 2e9);
  const LinkRate r = FitLinkRate(wire, secs);
  EXPECT_NEAR(r.latency_seconds, 3e-5, 1e-9);
  EXPECT_NEAR(r.bytes_per_second, 2e9, 1e3);
  // A series that does not grow with size gets no negative or infinite rate.
  const LinkRate flat = FitLinkRate(wire, {5e-5, 4e-5, 4e-5});
  EXPECT_GE(flat.latency_seconds, 0);
  EXPECT_GT(flat.bytes_per_second, 0);
}

// The whole calibration on 2 threads devices with one small size: every
// kind is measured over the axis, with positive rates.
TEST(Calibrate, MeasuresEveryKindOnAnAxis) {
  CalibrateOptions options;
  options.mesh = *Mesh::Parse("data=2");
  options.sizes = {4096, 65536};
  auto r = Calibrate(options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->profile.flops_per_second, 0);
  EXPECT_GT(r->profile.memory_bytes_per_second, 0);
  for (const char* kind :
       {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"}) {
    auto it = r->profile.collectives.find(std::string(kind) + "@data");
    ASSERT_NE(it, r->profile.collectives.end()) << kind;
    EXPECT_GT(it->second.bytes_per_second, 0) << kind;
    EXPECT_GE(it->second.latency_seconds, 0) << kind;
  }
  EXPECT_EQ(r->samples.size(), 5u);
}

}  // namespace
}  // namespace meshsplit
