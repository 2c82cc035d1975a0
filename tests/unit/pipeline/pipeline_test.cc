// The pipeline pass's pieces that are not checked by running a program:
// the schedule table and its bubble formula, the flag and JSON readers, and
// the shardings at the stage region's border.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "import/pipeline_spec.h"
#include "pipeline/pipeline.h"
#include "pipeline/schedule.h"
#include "pipeline/stage_sharding.h"

namespace meshsplit {
namespace {

TEST(PipelineSchedule, GpipeBubbleIsTheFormula) {
  for (int64_t stages : {2, 4, 8})
    for (int64_t micro : {1, 4, 8, 16})
      for (bool backward : {false, true}) {
        PipelineSpec spec;
        spec.axis = "stage";
        spec.microbatches = micro;
        auto s = PlanSchedule(spec, stages, 8 * stages, backward);
        ASSERT_TRUE(s.ok()) << s.status().message();
        EXPECT_EQ(s->ticks, micro + stages - 1);
        EXPECT_NEAR(s->bubble_fraction,
                    static_cast<double>(stages - 1) / static_cast<double>(micro + stages - 1),
                    1e-12);
        // Each stage runs each microbatch exactly once, in order.
        for (int64_t st = 0; st < stages; ++st) {
          int64_t next = 0;
          for (const std::string& a : s->table[st]) {
            if (a.empty()) continue;
            EXPECT_EQ(a, (backward ? "B" : "F") + std::to_string(next));
            ++next;
          }
          EXPECT_EQ(next, micro);
        }
        // Forward: stage 0 starts; backward: the last stage starts.
        EXPECT_FALSE(s->table[backward ? stages - 1 : 0][0].empty());
      }
}

TEST(PipelineSchedule, CircularBubbleIsTheFormula) {
  for (int64_t stages : {2, 4})
    for (int64_t micro : {4, 8, 16})
      for (int64_t repeats : {2, 3})
        for (bool backward : {false, true}) {
          PipelineSpec spec;
          spec.axis = "stage";
          spec.schedule = "circular";
          spec.microbatches = micro;
          spec.repeats = repeats;
          auto s = PlanSchedule(spec, stages, 2 * stages * repeats, backward);
          ASSERT_TRUE(s.ok()) << s.status().message();
          EXPECT_EQ(s->ticks, micro * repeats + stages - 1);
          EXPECT_EQ(s->layers_per_chunk, 2);
          EXPECT_NEAR(s->bubble_fraction,
                      static_cast<double>(stages - 1) /
                          static_cast<double>(micro * repeats + stages - 1),
                      1e-12);
          // Each stage runs every microbatch once per round, rounds in order.
          for (int64_t st = 0; st < stages; ++st) {
            int64_t next = 0;
            for (const std::string& a : s->table[st]) {
              if (a.empty()) continue;
              EXPECT_EQ(a, (backward ? "B" : "F") + std::to_string(next % micro) + "." +
                               std::to_string(next / micro));
              ++next;
            }
            EXPECT_EQ(next, micro * repeats);
          }
        }
}

// Every stage runs every microbatch forward, then backward, once each; a
// forward follows the previous stage's, a backward the next stage's (on the
// last stage its own forward), at an earlier tick; no stage runs two actions
// in a tick unless paired; no two live microbatches share a buffer slot.
void CheckOneFOneB(const InterleavedTable& t, bool paired) {
  const int64_t S = t.stages, M = t.microbatches;
  std::vector<std::vector<int64_t>> fwd(S, std::vector<int64_t>(M, -1)), bwd = fwd;
  for (int64_t s = 0; s < S; ++s) {
    ASSERT_EQ(static_cast<int64_t>(t.forward[s].size()), t.ticks);
    int64_t next_f = 0, next_b = 0, live = 0, most = 0;
    for (int64_t k = 0; k < t.ticks; ++k) {
      const int64_t f = t.forward[s][k], b = t.backward[s][k];
      if (!paired) EXPECT_FALSE(f >= 0 && b >= 0) << "stage " << s << " tick " << k;
      if (b >= 0) {
        EXPECT_EQ(b, next_b++);
        bwd[s][b] = k;
        --live;
      }
      if (f >= 0) {
        EXPECT_EQ(f, next_f++);
        fwd[s][f] = k;
        most = std::max(most, ++live);
      }
    }
    EXPECT_EQ(next_f, M);
    EXPECT_EQ(next_b, M);
    EXPECT_LE(most, t.residual_slots);
  }
  for (int64_t s = 0; s < S; ++s)
    for (int64_t m = 0; m < M; ++m) {
      if (s > 0) EXPECT_LT(fwd[s - 1][m], fwd[s][m]);
      EXPECT_LT(s == S - 1 ? fwd[s][m] : bwd[s + 1][m], bwd[s][m]);
      EXPECT_LT(fwd[s][m], bwd[s][m]);
      // Slots: microbatches m and m + K (same slot) never hold residuals at once.
      const int64_t k = t.residual_slots;
      if (m + k < M) EXPECT_LE(bwd[s][m], fwd[s][m + k]);
    }
}

TEST(PipelineSchedule, OneFOneBBubbleIsGpipes) {
  for (int64_t stages : {2, 4, 8})
    for (int64_t micro : {1, 2, 4, 8, 16}) {
      SCOPED_TRACE("S=" + std::to_string(stages) + " M=" + std::to_string(micro));
      const InterleavedTable t = PlanOneFOneB(stages, micro);
      CheckOneFOneB(t, false);
      EXPECT_EQ(t.ticks, 2 * (micro + stages - 1));
      // At most S microbatches of residuals per stage (M when fewer).
      EXPECT_EQ(t.residual_slots, std::min(stages, micro));
      PipelineSpec spec;
      spec.axis = "stage";
      spec.microbatches = micro;
      spec.schedule = "1f1b";
      auto s = PlanSchedule(spec, stages, 2 * stages);
      ASSERT_TRUE(s.ok()) << s.status().message();
      EXPECT_NEAR(s->bubble_fraction,
                  static_cast<double>(stages - 1) / static_cast<double>(micro + stages - 1), 1e-12);
      EXPECT_EQ(s->live_microbatches, std::min(stages, micro));
    }
}

TEST(PipelineSchedule, PairedOneFOneB) {
  for (int64_t stages : {2, 4, 8})
    for (int64_t micro : {1, 4, 16}) {
      SCOPED_TRACE("S=" + std::to_string(stages) + " M=" + std::to_string(micro));
      const InterleavedTable t = PlanOneFOneB(stages, micro, /*paired=*/true);
      CheckOneFOneB(t, true);
      EXPECT_EQ(t.ticks, micro + 2 * stages - 1);
      EXPECT_EQ(t.residual_slots, std::min(2 * stages - 1, micro));
    }
  PipelineSpec spec;
  spec.axis = "stage";
  spec.microbatches = 4;
  spec.schedule = "1f1b";
  auto s = PlanSchedule(spec, 2, 4, false, /*paired=*/true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->table[1][2], "F1+B0");
  EXPECT_NEAR(s->bubble_fraction, 1.0 - 4.0 / 7.0, 1e-12);  // 8 of 14 slots busy
}

// Zero-bubble H1: every stage runs every microbatch F, then B, then W, in
// microbatch order; F follows the previous stage's F, B the next stage's B
// (on the last stage its own F), W its own B, each at an earlier tick; one
// action per stage and tick unless paired; buffer slots never shared by two
// live microbatches.
void CheckZeroBubble(const InterleavedTable& t, bool paired) {
  const int64_t S = t.stages, M = t.microbatches;
  std::vector<std::vector<int64_t>> fwd(S, std::vector<int64_t>(M, -1)), bwd = fwd, wgt = fwd;
  ASSERT_EQ(static_cast<int64_t>(t.weight.size()), S);
  for (int64_t s = 0; s < S; ++s) {
    ASSERT_EQ(static_cast<int64_t>(t.weight[s].size()), t.ticks);
    int64_t next[3] = {0, 0, 0};
    for (int64_t k = 0; k < t.ticks; ++k) {
      const int64_t ran[3] = {t.forward[s][k], t.backward[s][k], t.weight[s][k]};
      int busy = 0;
      for (int a = 0; a < 3; ++a) {
        if (ran[a] < 0) continue;
        ++busy;
        EXPECT_EQ(ran[a], next[a]++) << "stage " << s << " tick " << k << " action " << a;
        (a == 0 ? fwd : a == 1 ? bwd : wgt)[s][ran[a]] = k;
      }
      if (!paired) EXPECT_LE(busy, 1) << "stage " << s << " tick " << k;
    }
    for (int a = 0; a < 3; ++a) EXPECT_EQ(next[a], M);
  }
  for (int64_t s = 0; s < S; ++s)
    for (int64_t m = 0; m < M; ++m) {
      if (s > 0) EXPECT_LT(fwd[s - 1][m], fwd[s][m]);
      EXPECT_LT(s == S - 1 ? fwd[s][m] : bwd[s + 1][m], bwd[s][m]);
      EXPECT_LT(fwd[s][m], bwd[s][m]);
      EXPECT_LT(bwd[s][m], wgt[s][m]);
      // Residuals live from F to W, what B saves from B to W.
      if (m + t.residual_slots < M) EXPECT_LE(wgt[s][m], fwd[s][m + t.residual_slots]);
      if (m + t.weight_slots < M) EXPECT_LE(wgt[s][m], bwd[s][m + t.weight_slots]);
    }
}

TEST(PipelineSchedule, ZeroBubbleH1) {
  for (int64_t stages : {2, 4, 8})
    for (int64_t micro : {1, 2, 4, 8, 16}) {
      SCOPED_TRACE("S=" + std::to_string(stages) + " M=" + std::to_string(micro));
      const InterleavedTable t = PlanZeroBubbleH1(stages, micro);
      CheckZeroBubble(t, false);
      // At most S microbatches of residuals per stage, as 1F1B's stage 0.
      EXPECT_LE(t.residual_slots, std::min(stages, micro));
      if (micro < stages) continue;
      // F, B and W of one tick each: 3M + S - 1 ticks.
      EXPECT_EQ(t.ticks, 3 * micro + stages - 1);
      PipelineSpec spec;
      spec.axis = "stage";
      spec.microbatches = micro;
      spec.schedule = "zb-h1";
      auto s = PlanSchedule(spec, stages, 2 * stages);
      ASSERT_TRUE(s.ok()) << s.status().message();
      EXPECT_NEAR(s->bubble_fraction,
                  static_cast<double>(stages - 1) / static_cast<double>(3 * micro + stages - 1),
                  1e-12);
    }
  // The table as the paper draws it: the W's of the later stages wait
  // for the end, filling what would be 1F1B's cool-down bubble.
  PipelineSpec spec;
  spec.axis = "stage";
  spec.microbatches = 4;
  spec.schedule = "zb-h1";
  auto s = PlanSchedule(spec, 2, 2);
  ASSERT_TRUE(s.ok());
  std::string rows[2];
  for (int st = 0; st < 2; ++st)
    for (const std::string& cell : s->table[st]) rows[st] += cell.empty() ? "." : cell.substr(0, 1);
  EXPECT_EQ(rows[0], "FF.BWFBWFBWBW");
  EXPECT_EQ(rows[1], ".FBFBWFBWFBWW");
}

TEST(PipelineSchedule, PairedZeroBubbleH1) {
  for (int64_t stages : {2, 4})
    for (int64_t micro : {1, 4, 16}) {
      SCOPED_TRACE("S=" + std::to_string(stages) + " M=" + std::to_string(micro));
      CheckZeroBubble(PlanZeroBubbleH1(stages, micro, /*paired=*/true), true);
    }
}

TEST(PipelineSchedule, RefusesWhatIsNotBuilt) {
  PipelineSpec spec;
  spec.axis = "stage";
  spec.microbatches = 4;
  EXPECT_FALSE(PlanSchedule(spec, 4, 6).ok());  // 6 layers on 4 stages
  spec.schedule = "circular";
  spec.repeats = 2;
  EXPECT_FALSE(PlanSchedule(spec, 4, 12).ok());  // 12 layers in 8 chunks
  spec.microbatches = 2;
  EXPECT_FALSE(PlanSchedule(spec, 4, 16).ok());  // fewer microbatches than stages
  spec.microbatches = 4;
  spec.repeats = 1;
  spec.schedule = "zb-h2";
  auto s = PlanSchedule(spec, 2, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("is not implemented"), std::string::npos);
}

TEST(PipelineSpec, FlagAndJsonAgree) {
  auto flag = ParsePipelineFlag("axis=stage,microbatches=8,batch_dim=1,loops=a;%b");
  ASSERT_TRUE(flag.ok()) << flag.status().message();
  auto json = PipelineSpecFromJson(nlohmann::json::parse(
      R"({"axis": "stage", "microbatches": 8, "batch_dim": 1, "loops": ["a", "b"]})"));
  ASSERT_TRUE(json.ok()) << json.status().message();
  EXPECT_EQ(flag->axis, json->axis);
  EXPECT_EQ(flag->microbatches, json->microbatches);
  EXPECT_EQ(flag->batch_dim, json->batch_dim);
  EXPECT_EQ(flag->loops, json->loops);
  EXPECT_FALSE(ParsePipelineFlag("axis=stage,microbatches=0").ok());
  EXPECT_FALSE(ParsePipelineFlag("microbatches=2").ok());
  EXPECT_FALSE(ParsePipelineFlag("axis=stage,repeats=2").ok());  // circular only
  EXPECT_FALSE(PipelineSpecFromJson(nlohmann::json::parse(R"({"axis": "s", "micro": 2})")).ok());
}

TEST(StageShardings, AddTheStageAxisToATiling) {
  auto mesh = Mesh::Parse("data=2,stage=2,model=2");
  ASSERT_TRUE(mesh.ok());
  StageShardings sh(*mesh, 1);
  EXPECT_EQ(sh.stages(), 2);
  // Devices 0..7 at (data, stage, model) row-major: stage of d is (d / 2) % 2.
  for (int64_t d = 0; d < 8; ++d) EXPECT_EQ(sh.StageOf(d), (d / 2) % 2);
  auto shift = sh.ShiftPairs(1);
  ASSERT_EQ(shift.size(), 4u);
  for (const auto& [src, dst] : shift) {
    EXPECT_EQ(sh.StageOf(src) + 1, sh.StageOf(dst));
    EXPECT_EQ(src % 2, dst % 2);  // same model coordinate
    EXPECT_EQ(src / 4, dst / 4);  // same data coordinate
  }
  // A [L, D] weight split over model on dim 1: outside, dim 0 gains the
  // stages; inside, the stage axis is a manual subgroup.
  auto base = MeshSplit(*mesh, std::vector<std::optional<std::string>>{std::nullopt, "model"}, 2);
  ASSERT_TRUE(base.ok());
  auto tiled = sh.StageTiled(&*base, 2, 0);
  ASSERT_TRUE(tiled.ok()) << tiled.status().message();
  EXPECT_EQ(tiled->TileDim(0), 2);
  EXPECT_EQ(tiled->TileDim(1), 2);
  auto manual = sh.Manual(&*base, 2, 0);
  ASSERT_TRUE(manual.ok());
  EXPECT_TRUE(manual->HasManualSubgroup());
  EXPECT_EQ(manual->TileDim(0), 1);
  EXPECT_EQ(manual->TileDim(1), 2);
  // Every device keeps its model tile across the border.
  for (int64_t d = 0; d < 8; ++d) {
    auto outside = tiled->tile_assignment().IndexOfDevice(d);
    auto inside = manual->tile_assignment().IndexOfDevice(d);
    ASSERT_TRUE(outside && inside);
    EXPECT_EQ((*outside)[1], (*inside)[1]);
    EXPECT_EQ((*outside)[0], sh.StageOf(d));  // stage-major along the layers
  }
  // A tiling that already uses the stage axis cannot be staged.
  auto on_stage = MeshSplit(*mesh, std::vector<std::optional<std::string>>{"stage", std::nullopt}, 2);
  ASSERT_TRUE(on_stage.ok());
  EXPECT_FALSE(sh.Manual(&*on_stage, 2, 0).ok());
}

}  // namespace
}  // namespace meshsplit
