// The pipeline pass's pieces that are not checked by running a program:
// the schedule table and its bubble formula, the flag and JSON readers, and
// the shardings at the stage region's border.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "import/pipeline_spec.h"
#include "pipeline/pipeline.h"
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
  spec.schedule = "1f1b";
  auto s = PlanSchedule(spec, 2, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not implemented yet"), std::string::npos);
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
