// The 1F1B and zero-bubble tables (schedule.h), by simulating the stages
// tick by tick.
#include "pipeline/schedule.h"

#include <algorithm>
#include <limits>

namespace meshsplit {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// Each microbatch m occupies a buffer from the end of tick `held[m].first`
// (written) to the start of tick `held[m].second` (last read), on one stage.
// The fewest slots with which microbatches sharing slot m % slots are never
// held at once.
int64_t SlotsFor(const std::vector<std::pair<int64_t, int64_t>>& held) {
  const int64_t n = static_cast<int64_t>(held.size());
  for (int64_t slots = 1; slots < n; ++slots) {
    bool clash = false;
    for (int64_t a = 0; a < n && !clash; ++a)
      for (int64_t b = a + slots; b < n && !clash; b += slots)
        clash = held[a].first < held[b].second && held[b].first < held[a].second;
    if (!clash) return slots;
  }
  return std::max<int64_t>(n, 1);
}

// Both tables, by one simulation. `split`: the backward is B then W.
InterleavedTable Simulate(int64_t stages, int64_t microbatches, bool paired, bool split) {
  InterleavedTable t;
  t.stages = stages;
  t.microbatches = microbatches;
  t.paired = paired;
  const int64_t S = stages, M = microbatches;
  // The tick at which stage s ran microbatch m forward / backward / W.
  std::vector<std::vector<int64_t>> fwd(S, std::vector<int64_t>(M, kNever));
  std::vector<std::vector<int64_t>> bwd = fwd, wgt = fwd;
  std::vector<int64_t> next_f(S, 0), next_b(S, 0), next_w(S, split ? 0 : M);
  t.forward.assign(S, {});
  t.backward.assign(S, {});
  if (split) t.weight.assign(S, {});
  auto done = [&] {
    for (int64_t s = 0; s < S; ++s)
      if (next_b[s] < M || next_w[s] < M) return false;
    return true;
  };
  // Every tick at least one stage moves (the lowest stage with work left
  // can always run a forward, the backward its successor sent or a W), so
  // this ends within 3 * M * S ticks.
  for (int64_t tick = 0; !done() && tick < 3 * M * S + 3; ++tick) {
    for (int64_t s = 0; s < S; ++s) {
      const int64_t b = next_b[s], f = next_f[s], w = next_w[s];
      const bool b_ready = b < f && fwd[s][b] < tick && (s == S - 1 || bwd[s + 1][b] < tick);
      const bool arrived = f < M && (s == 0 || fwd[s - 1][f] < tick);
      const bool w_ready = split && w < b && bwd[s][w] < tick;
      bool run_f = false, run_b = false, run_w = false;
      if (paired) {
        run_f = arrived;
        run_b = b_ready;
        run_w = w_ready;
      } else if (split) {
        // H1's order: forward (within its memory), else B, else W.
        run_f = arrived && f - w < S && f - b < S - s;
        run_b = !run_f && b_ready;
        run_w = !run_f && !run_b && w_ready;
      } else {
        // 1F1B's: a ready backward first, forwards at most S - s ahead.
        run_b = b_ready;
        run_f = !run_b && arrived && f - b < S - s;
      }
      t.forward[s].push_back(run_f ? f : -1);
      t.backward[s].push_back(run_b ? b : -1);
      if (split) t.weight[s].push_back(run_w ? w : -1);
      if (run_b) bwd[s][next_b[s]++] = tick;
      if (run_f) fwd[s][next_f[s]++] = tick;
      if (run_w) wgt[s][next_w[s]++] = tick;
    }
  }
  t.ticks = static_cast<int64_t>(t.forward[0].size());

  for (int64_t s = 0; s < S; ++s) {
    std::vector<std::pair<int64_t, int64_t>> residual(M), forward(M), backward(M), weight(M);
    for (int64_t m = 0; m < M; ++m) {
      residual[m] = {fwd[s][m], split ? wgt[s][m] : bwd[s][m]};
      weight[m] = {bwd[s][m], wgt[s][m]};
      // Stage 0 reads its inputs from the whole batch, not a buffer.
      forward[m] = s == 0 ? std::make_pair(int64_t{0}, int64_t{0})
                          : std::make_pair(fwd[s - 1][m], fwd[s][m]);
      backward[m] = s == S - 1 ? std::make_pair(fwd[s][m], bwd[s][m])
                               : std::make_pair(bwd[s + 1][m], bwd[s][m]);
    }
    t.residual_slots = std::max(t.residual_slots, SlotsFor(residual));
    t.forward_slots = std::max(t.forward_slots, SlotsFor(forward));
    t.backward_slots = std::max(t.backward_slots, SlotsFor(backward));
    if (split) t.weight_slots = std::max(t.weight_slots, SlotsFor(weight));
  }
  return t;
}

}  // namespace

InterleavedTable PlanOneFOneB(int64_t stages, int64_t microbatches, bool paired) {
  return Simulate(stages, microbatches, paired, /*split=*/false);
}

InterleavedTable PlanZeroBubbleH1(int64_t stages, int64_t microbatches, bool paired) {
  return Simulate(stages, microbatches, paired, /*split=*/true);
}

}  // namespace meshsplit
