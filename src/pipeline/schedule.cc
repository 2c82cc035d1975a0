// The 1F1B table (schedule.h), by simulating the stages tick by tick.
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

}  // namespace

InterleavedTable PlanOneFOneB(int64_t stages, int64_t microbatches, bool paired) {
  InterleavedTable t;
  t.stages = stages;
  t.microbatches = microbatches;
  t.paired = paired;
  const int64_t S = stages, M = microbatches;
  // The tick at which stage s ran microbatch m forward / backward.
  std::vector<std::vector<int64_t>> fwd(S, std::vector<int64_t>(M, kNever));
  std::vector<std::vector<int64_t>> bwd(S, std::vector<int64_t>(M, kNever));
  std::vector<int64_t> next_f(S, 0), next_b(S, 0);
  t.forward.assign(S, {});
  t.backward.assign(S, {});
  // Every tick at least one stage moves (the lowest stage with work left
  // can always run a forward or the backward its successor sent), so this
  // ends within 2 * M * S ticks.
  for (int64_t tick = 0; next_b[0] < M && tick < 2 * M * S + 2; ++tick) {
    for (int64_t s = 0; s < S; ++s) {
      const int64_t b = next_b[s], f = next_f[s];
      const bool b_ready = b < f && fwd[s][b] < tick && (s == S - 1 || bwd[s + 1][b] < tick);
      const bool f_ready = f < M && (paired || f - b < S - s) && (s == 0 || fwd[s - 1][f] < tick);
      const bool run_b = b_ready;
      const bool run_f = f_ready && (paired || !run_b);
      t.forward[s].push_back(run_f ? f : -1);
      t.backward[s].push_back(run_b ? b : -1);
      if (run_b) bwd[s][next_b[s]++] = tick;
      if (run_f) fwd[s][next_f[s]++] = tick;
    }
  }
  t.ticks = static_cast<int64_t>(t.forward[0].size());

  for (int64_t s = 0; s < S; ++s) {
    std::vector<std::pair<int64_t, int64_t>> residual(M), forward(M), backward(M);
    for (int64_t m = 0; m < M; ++m) {
      residual[m] = {fwd[s][m], bwd[s][m]};
      // Stage 0 reads its inputs from the whole batch, not a buffer.
      forward[m] = s == 0 ? std::make_pair(int64_t{0}, int64_t{0})
                          : std::make_pair(fwd[s - 1][m], fwd[s][m]);
      backward[m] = s == S - 1 ? std::make_pair(fwd[s][m], bwd[s][m])
                               : std::make_pair(bwd[s + 1][m], bwd[s][m]);
    }
    t.residual_slots = std::max(t.residual_slots, SlotsFor(residual));
    t.forward_slots = std::max(t.forward_slots, SlotsFor(forward));
    t.backward_slots = std::max(t.backward_slots, SlotsFor(backward));
  }
  return t;
}

}  // namespace meshsplit
