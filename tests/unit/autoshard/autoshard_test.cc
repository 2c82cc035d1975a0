// Unit tests of the auto-sharding search: the decision space, the lowering
// to a sharding spec, the objective, and searches on small MLPs whose best
// plans are known (Megatron, data parallel, and a training step compared
// with the hand-written plans). The inputs are shared with the lit tests in
// tests/golden/autoshard/Inputs, which verify the plans found by running them.
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "autoshard/decision_space.h"
#include "autoshard/objective.h"
#include "autoshard/search.h"
#include "import/shard_spec.h"
#include "text/parser.h"

namespace meshsplit::autoshard {
namespace {

const std::string kInputs = std::string(MESHSPLIT_SOURCE_DIR) + "/tests/golden/autoshard/Inputs/";

std::unique_ptr<Module> Load(const std::string& file) {
  auto m = ParseModuleFile(kInputs + file);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

Mesh MakeMesh(const std::string& text) {
  auto m = Mesh::Parse(text);
  EXPECT_TRUE(m.ok());
  return *m;
}

ShardSpec LoadSpec(const std::string& file) {
  std::ifstream in(kInputs + file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto spec = ParseShardSpec(ss.str(), file);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return *spec;
}

// The chosen option of the group holding `name`, as text.
std::string Chosen(const DecisionSpace& space, const Choice& c, const std::string& name) {
  for (size_t g = 0; g < space.groups.size(); ++g)
    for (const auto& m : space.groups[g].members)
      if (m == name) return OptionToString(space.groups[g].options[c[g]], space.mesh);
  return "<not decided>";
}

int64_t Count(const Evaluation& e, const std::string& kind) {
  auto it = e.collectives_by_kind.find(kind);
  return it == e.collectives_by_kind.end() ? 0 : it->second;
}

SearchOptions QuietOptions() {
  SearchOptions o;
  o.max_seconds = 0;  // evaluation budget only: deterministic
  return o;
}

TEST(AutoshardOptions, EnumeratesDivisibleSplitsUnsplitFirst) {
  Mesh mesh = MakeMesh("data=2,model=4");
  auto opts = EnumerateOptions({8, 8}, mesh);
  // none; data or model on either dim; both dims with different axes.
  ASSERT_EQ(opts.size(), 7u);
  EXPECT_EQ(OptionToString(opts[0], mesh), "[_, _]");
  auto two = EnumerateOptions({8, 8}, mesh, /*max_axes_per_dim=*/2);
  // ... plus (data,model) and (model,data) on either dim.
  EXPECT_EQ(two.size(), 11u);
  // Dim 0 of size 2 cannot take model=4; a size-1 axis is never used.
  EXPECT_EQ(EnumerateOptions({2, 8}, mesh).size(), 5u);  // [_,_] [data,_] [_,data] [_,model] [data,model]
  EXPECT_EQ(EnumerateOptions({8}, MakeMesh("a=1,b=2")).size(), 2u);
  EXPECT_EQ(EnumerateOptions({3}, mesh).size(), 1u);
}

TEST(AutoshardSpace, GroupsLayersAndLowersToASpec) {
  auto module = ParseModuleText(R"(
HloModule m
ENTRY e {
  a = f32[64,64] parameter(0)
  h.0.w = f32[64,64] parameter(1)
  h.1.w = f32[64,64] parameter(2)
  h.1.b = f32[64] parameter(3)
  small = f32[4] parameter(4)
  d0 = f32[64,64] dot(a, h.0.w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d1 = f32[64,64] dot(d0, h.1.w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[64,64], f32[64], f32[4]) tuple(d1, h.1.b, small)
})");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  DecisionSpaceOptions opts;
  opts.min_bytes = 64;
  auto space = BuildDecisionSpace(**module, MakeMesh("model=4"), opts);
  ASSERT_TRUE(space.ok());
  ASSERT_EQ(space->groups.size(), 3u);  // h.*.w (2 tensors), a, h.1.b
  EXPECT_EQ(space->groups[0].label, "h.*.w");
  EXPECT_EQ(space->groups[0].members.size(), 2u);
  EXPECT_TRUE(space->groups[0].label_is_exact_glob);
  EXPECT_EQ(space->groups[1].label, "a");
  EXPECT_EQ(space->decided_tensors, 4);
  Choice c = InitialChoice(*space);
  EXPECT_EQ(c, (Choice{0, 0, 0}));
  c[0] = 1;
  ASSERT_EQ(OptionToString(space->groups[0].options[1], space->mesh), "[_, model]");
  ShardSpec spec = ChoiceToSpec(*space, c);
  ASSERT_EQ(spec.rules.size(), 1u);
  EXPECT_EQ(spec.rules[0].match, "h.*.w");
  // The JSON parses back to the same rule and applies.
  auto back = ParseShardSpec(SpecToJson(spec, "test"), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->mesh.ToString(), "model=4");
  ASSERT_EQ(back->rules.size(), 1u);
  EXPECT_EQ(back->rules[0].dims, (std::vector<std::vector<std::string>>{{}, {"model"}}));
  ASSERT_TRUE(ApplyShardSpec(**module, *back).ok());
  EXPECT_EQ((*module)->entry()->Find("h.1.w")->sharding()->ToString(false),
            "{devices=[1,4]<=[4]}");

  opts.group_layers = false;
  auto alone = BuildDecisionSpace(**module, MakeMesh("model=4"), opts);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->groups.size(), 4u);
}

TEST(AutoshardSpace, ExistingShardingsStartTheSearchOrAreKept) {
  auto module = ParseModuleText(R"(
HloModule m
ENTRY e {
  a = f32[64,64] parameter(0), sharding={devices=[1,4]<=[4]}
  b = f32[64,64] parameter(1), sharding={replicated}
  c = f32[64,64] parameter(2), sharding={maximal device=1}
  ROOT d = f32[64,64] add(a, b)
})");
  ASSERT_TRUE(module.ok());
  DecisionSpaceOptions opts;
  auto space = BuildDecisionSpace(**module, MakeMesh("model=4"), opts);
  ASSERT_TRUE(space.ok());
  ASSERT_EQ(space->groups.size(), 2u);  // c is not a mesh_split: kept
  EXPECT_EQ(OptionToString(space->groups[0].options[space->groups[0].initial], space->mesh),
            "[_, model]");
  EXPECT_TRUE(space->groups[1].had_sharding);
  EXPECT_EQ(space->groups[1].initial, 0);
  // Choosing "unsplit" for an annotated tensor overrides it explicitly.
  Choice c = InitialChoice(*space);
  c[0] = 0;
  ShardSpec spec = ChoiceToSpec(*space, c);
  ASSERT_EQ(spec.rules.size(), 1u);  // b keeps its own {replicated}: no rule
  EXPECT_EQ(spec.rules[0].match, "a");
  EXPECT_TRUE(spec.rules[0].replicated);
  EXPECT_TRUE(ChoiceToSpec(*space, InitialChoice(*space)).rules.empty());
  opts.keep_existing = true;
  auto kept = BuildDecisionSpace(**module, MakeMesh("model=4"), opts);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->groups.empty());
  EXPECT_EQ(kept->not_decided.size(), 3u);
}

TEST(AutoshardObjective, BetterOrdersFailedInfeasibleAndTime) {
  Evaluation failed, big, fast, slow;
  big.ok = true;
  big.peak_memory_bytes = 100;
  fast.ok = fast.feasible = true;
  fast.time_seconds = 1;
  slow.ok = slow.feasible = true;
  slow.time_seconds = 2;
  EXPECT_TRUE(Better(big, failed));
  EXPECT_TRUE(Better(slow, big));
  EXPECT_TRUE(Better(fast, slow));
  EXPECT_FALSE(Better(slow, fast));
  EXPECT_FALSE(Better(failed, failed));
}

TEST(AutoshardObjective, BadSpecIsAFailedCandidateNotACrash) {
  auto module = Load("mlp_megatron.hlo");
  Mesh mesh = MakeMesh("model=4");
  auto space = BuildDecisionSpace(*module, mesh, {});
  ASSERT_TRUE(space.ok());
  Evaluator ev(*module, *space, MachineModel{});
  ShardSpec spec;
  spec.mesh = mesh;
  spec.has_mesh = true;
  spec.rules.push_back(ShardRule{"w1", false, {{"model"}}});  // rank 1 for a rank-2 tensor
  Evaluation e = ev.EvaluateSpec(spec);
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.error.find("spec"), std::string::npos) << e.error;
}

TEST(AutoshardSearch, FindsMegatronOnAnUnannotatedMlp) {
  auto module = Load("mlp_megatron.hlo");
  auto space = BuildDecisionSpace(*module, MakeMesh("model=4"), {});
  ASSERT_TRUE(space.ok());
  Evaluator ev(*module, *space, MachineModel{});
  SearchResult r = Search(ev, *space, QuietOptions());
  ASSERT_TRUE(r.best_eval.ok) << r.best_eval.error;
  EXPECT_EQ(Chosen(*space, r.best, "w1"), "[_, model]");
  EXPECT_EQ(Chosen(*space, r.best, "w2"), "[model, _]");
  EXPECT_EQ(Chosen(*space, r.best, "x"), "[_, _]");
  EXPECT_EQ(r.best_eval.num_collectives, 1);
  EXPECT_EQ(Count(r.best_eval, "all-reduce"), 1);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.stop_reason, "converged");
  // Better than leaving everything replicated, and than every other choice
  // for either weight (the "why").
  EXPECT_LT(r.best_eval.time_seconds, r.initial_eval.time_seconds);
  ASSERT_GE(r.why.size(), 2u);
  for (const Alternative& a : r.why) EXPECT_TRUE(Better(r.best_eval, a.eval));
  // A gather-heavy plan (both weights column-split) costs more.
  ShardSpec gather = LoadSpec("mlp_megatron_colcol.json");
  Evaluation g = ev.EvaluateSpec(gather);
  ASSERT_TRUE(g.ok) << g.error;
  EXPECT_GT(Count(g, "all-gather"), 0);
  EXPECT_TRUE(Better(r.best_eval, g));
}

TEST(AutoshardSearch, FindsDataParallelOnABatchHeavyMlp) {
  auto module = Load("mlp_batch.hlo");
  auto space = BuildDecisionSpace(*module, MakeMesh("data=4"), {});
  ASSERT_TRUE(space.ok());
  Evaluator ev(*module, *space, MachineModel{});
  SearchResult r = Search(ev, *space, QuietOptions());
  ASSERT_TRUE(r.best_eval.ok) << r.best_eval.error;
  EXPECT_EQ(Chosen(*space, r.best, "x"), "[data, _]");
  EXPECT_EQ(Chosen(*space, r.best, "w1"), "[_, _]");
  EXPECT_EQ(Chosen(*space, r.best, "w2"), "[_, _]");
  // Only the scalar loss is summed across the devices.
  EXPECT_EQ(r.best_eval.num_collectives, 1);
  EXPECT_EQ(Count(r.best_eval, "all-reduce"), 1);
  EXPECT_LT(r.best_eval.wire_bytes, 64);
}

TEST(AutoshardSearch, TrainStepIsAtLeastAsCheapAsTheHandWrittenPlans) {
  auto module = Load("mlp_train.hlo");
  auto space = BuildDecisionSpace(*module, MakeMesh("data=2,model=2"), {});
  ASSERT_TRUE(space.ok());
  Evaluator ev(*module, *space, MachineModel{});
  SearchResult r = Search(ev, *space, QuietOptions());
  ASSERT_TRUE(r.best_eval.ok) << r.best_eval.error;
  for (const char* plan : {"mlp_train_dp4.json", "mlp_train_2d.json"}) {
    Evaluation hand = ev.EvaluateSpec(LoadSpec(plan));
    ASSERT_TRUE(hand.ok) << plan << ": " << hand.error;
    EXPECT_LE(r.best_eval.time_seconds, hand.time_seconds * (1 + 1e-9))
        << plan << ": found " << r.best_eval.time_seconds << " s, hand-written "
        << hand.time_seconds << " s";
  }
  // Something is split: replicating everything is not the answer here.
  EXPECT_LT(r.best_eval.time_seconds, r.initial_eval.time_seconds);

  // With two axes per dim allowed, Megatron over all four devices.
  DecisionSpaceOptions two;
  two.max_axes_per_dim = 2;
  auto space2 = BuildDecisionSpace(*module, MakeMesh("data=2,model=2"), two);
  ASSERT_TRUE(space2.ok());
  Evaluator ev2(*module, *space2, MachineModel{});
  SearchResult r2 = Search(ev2, *space2, QuietOptions());
  ASSERT_TRUE(r2.best_eval.ok) << r2.best_eval.error;
  EXPECT_TRUE(Better(r2.best_eval, r.best_eval));
  EXPECT_EQ(Chosen(*space2, r2.best, "w1"), "[_, (data,model)]");
  EXPECT_EQ(Chosen(*space2, r2.best, "w2"), "[(data,model), _]");
  EXPECT_EQ(Count(r2.best_eval, "all-reduce"), 1);
}

// The search starts from whole-program leading-dim splits too, so its plan
// is never worse than splitting every tensor whose dim 0 has one size over
// one mesh axis (plain data parallelism when that size is the batch).
TEST(AutoshardSearch, NeverWorseThanAnyLeadingDimSplit) {
  auto module = Load("mlp_train.hlo");
  const Mesh mesh = MakeMesh("data=2,model=2");
  auto space = BuildDecisionSpace(*module, mesh, {});
  ASSERT_TRUE(space.ok());
  Evaluator ev(*module, *space, MachineModel{});
  SearchResult r = Search(ev, *space, QuietOptions());
  ASSERT_TRUE(r.best_eval.ok) << r.best_eval.error;
  EXPECT_GT(r.seeds_tried, 0);
  int checked = 0;
  for (int64_t axis = 0; axis < mesh.num_axes(); ++axis) {
    std::set<int64_t> sizes;
    for (const DecisionGroup& g : space->groups) sizes.insert(g.dims[0]);
    for (int64_t size : sizes) {
      Choice c = InitialChoice(*space);
      for (size_t g = 0; g < space->groups.size(); ++g) {
        if (space->groups[g].dims[0] != size) continue;
        for (size_t o = 0; o < space->groups[g].options.size(); ++o)
          if (OptionToString(space->groups[g].options[o], mesh) ==
              "[" + mesh.axes()[axis].name +
                  std::string(space->groups[g].dims.size() > 1 ? ", _" : "") + "]")
            c[g] = static_cast<int>(o);
      }
      Evaluation split = ev.Evaluate(c);
      if (!split.ok) continue;
      ++checked;
      EXPECT_LE(r.best_eval.time_seconds, split.time_seconds * (1 + 1e-9))
          << "dim-0 size " << size << " over " << mesh.axes()[axis].name;
    }
  }
  EXPECT_GT(checked, 1);
}

TEST(AutoshardSearch, RespectsTheMemoryCap) {
  auto module = Load("mlp_megatron.hlo");
  auto space = BuildDecisionSpace(*module, MakeMesh("model=4"), {});
  ASSERT_TRUE(space.ok());
  MachineModel machine;
  // Ignore the weights' traffic so that replication would be cheapest, and
  // cap memory below the replicated weights (2 x 16 MiB).
  machine.memory_bytes_per_second = 1e30;
  machine.flops_per_second = 1e30;
  Evaluator free_ev(*module, *space, machine);
  SearchResult free_r = Search(free_ev, *space, QuietOptions());
  EXPECT_EQ(free_r.best_eval.num_collectives, 0);
  EXPECT_GE(free_r.best_eval.peak_memory_bytes, 32 << 20);
  machine.memory_limit_bytes = 20 << 20;
  Evaluator capped_ev(*module, *space, machine);
  SearchResult capped = Search(capped_ev, *space, QuietOptions());
  ASSERT_TRUE(capped.best_eval.feasible);
  EXPECT_LE(capped.best_eval.peak_memory_bytes, 20 << 20);
  EXPECT_FALSE(capped.initial_eval.feasible);
}

TEST(AutoshardSearch, BudgetCacheAndSeedAreHonoured) {
  auto module = Load("mlp_train.hlo");
  auto space = BuildDecisionSpace(*module, MakeMesh("data=2,model=2"), {});
  ASSERT_TRUE(space.ok());
  Evaluator ev(*module, *space, MachineModel{});
  SearchOptions o = QuietOptions();
  o.max_evaluations = 5;
  o.why_groups = 0;
  SearchResult small = Search(ev, *space, o);
  EXPECT_EQ(small.evaluations, 5);
  EXPECT_EQ(small.stop_reason, "evaluation budget");
  EXPECT_FALSE(small.converged);

  o = QuietOptions();
  o.seed = 7;
  SearchResult a = Search(ev, *space, o);
  SearchResult b = Search(ev, *space, o);
  EXPECT_EQ(a.best, b.best);
  EXPECT_EQ(a.evaluations, b.evaluations);
  EXPECT_GT(a.cache_hits, 0);  // restarts meet plans already costed
  EXPECT_LE(a.evaluations, o.max_evaluations + 64);
}

}  // namespace
}  // namespace meshsplit::autoshard
