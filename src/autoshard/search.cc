// Coordinate descent with perturbation restarts over the decision groups,
// with a cache and evaluation/time budgets.
#include "autoshard/search.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>

namespace meshsplit::autoshard {
namespace {

using Clock = std::chrono::steady_clock;

std::string Key(const Choice& c) {
  std::string k;
  for (int o : c) k += std::to_string(o) + ",";
  return k;
}

class Searcher {
 public:
  Searcher(const Evaluator& evaluator, const DecisionSpace& space, const SearchOptions& options)
      : evaluator_(evaluator), space_(space), options_(options), start_(Clock::now()),
        last_progress_(start_) {}

  SearchResult Run() {
    result_.initial = InitialChoice(space_);
    auto init = Eval(result_.initial, /*budgeted=*/false);
    result_.initial_eval = *init;
    result_.best = result_.initial;
    result_.best_eval = *init;
    Choice cur = result_.initial;
    Evaluation cur_eval = *init;
    // Whole-program starts a descent of one group at a time cannot reach:
    // a batch split moves every batch-shaped input at once (moving one alone
    // only adds a reshard), so the search is never worse than plain data
    // parallelism over any mesh axis.
    for (const Choice& seed : LeadingDimSeeds()) {
      auto e = Eval(seed, /*budgeted=*/true);
      if (!e) break;
      ++result_.seeds_tried;
      if (Better(*e, cur_eval)) cur = seed, cur_eval = *e;
    }
    result_.converged = Descend(cur, cur_eval);
    if (result_.converged) {
      std::mt19937_64 rng(options_.seed);
      for (int r = 0; r < options_.restarts && !Exhausted() && !space_.groups.empty(); ++r) {
        Choice start = result_.best;
        const int n = static_cast<int>(space_.groups.size());
        for (int k = 0; k < options_.perturb_groups && k < n; ++k) {
          const int g = static_cast<int>(rng() % n);
          const int num_opts = static_cast<int>(space_.groups[g].options.size());
          start[g] = static_cast<int>(rng() % num_opts);
        }
        auto e = Eval(start, /*budgeted=*/true);
        if (!e) break;
        ++result_.restarts_done;
        Evaluation start_eval = *e;
        if (!Descend(start, start_eval)) break;
      }
    }
    result_.stop_reason = stop_reason_.empty() ? "converged" : stop_reason_;
    Explain();
    result_.seconds = Elapsed();
    return result_;
  }

 private:
  double Elapsed() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }

  // For each size B of a leading dim and each mesh axis a: every group whose
  // dim 0 has size B split on a along dim 0 (where that is one of its
  // options), the rest as they start. The starts that split something.
  std::vector<Choice> LeadingDimSeeds() const {
    std::set<int64_t> sizes;
    for (const DecisionGroup& g : space_.groups)
      if (!g.dims.empty()) sizes.insert(g.dims[0]);
    std::vector<Choice> seeds;
    for (int64_t size : sizes)
      for (int64_t axis = 0; axis < static_cast<int64_t>(space_.mesh.axes().size()); ++axis) {
        Choice c = result_.initial;
        bool split = false;
        for (size_t g = 0; g < space_.groups.size(); ++g) {
          const DecisionGroup& group = space_.groups[g];
          if (group.dims.empty() || group.dims[0] != size) continue;
          for (size_t o = 0; o < group.options.size(); ++o) {
            const DimsMapping& m = group.options[o];
            bool only_dim0 = m[0] == std::vector<int64_t>{axis};
            for (size_t d = 1; d < m.size() && only_dim0; ++d) only_dim0 = m[d].empty();
            if (only_dim0) {
              split |= c[g] != static_cast<int>(o);
              c[g] = static_cast<int>(o);
              break;
            }
          }
        }
        if (split) seeds.push_back(std::move(c));
      }
    return seeds;
  }

  bool Exhausted() {
    if (result_.evaluations >= options_.max_evaluations) {
      stop_reason_ = "evaluation budget";
      return true;
    }
    if (options_.max_seconds > 0 && Elapsed() >= options_.max_seconds) {
      stop_reason_ = "time budget";
      return true;
    }
    return false;
  }

  // The cached or fresh evaluation of `c`; nullopt when a budgeted
  // evaluation would exceed the budget.
  std::optional<Evaluation> Eval(const Choice& c, bool budgeted) {
    const std::string key = Key(c);
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++result_.cache_hits;
      return it->second;
    }
    if (budgeted && Exhausted()) return std::nullopt;
    Evaluation e = evaluator_.Evaluate(c);
    ++result_.evaluations;
    if (!e.ok) ++result_.failed;
    cache_.emplace(key, e);
    if (!freeze_best_ && Better(e, result_.best_eval)) {
      result_.best = c;
      result_.best_eval = e;
    }
    if (options_.progress &&
        std::chrono::duration<double>(Clock::now() - last_progress_).count() >=
            options_.progress_seconds) {
      last_progress_ = Clock::now();
      char limit[32] = "";
      if (options_.max_seconds > 0) std::snprintf(limit, sizeof(limit), " / %.0f", options_.max_seconds);
      char line[240];
      std::snprintf(line, sizeof(line),
                    "autoshard: %lld / %lld evaluations (%lld failed), best %.6g us, %.1f%s s",
                    static_cast<long long>(result_.evaluations),
                    static_cast<long long>(options_.max_evaluations),
                    static_cast<long long>(result_.failed),
                    result_.best_eval.time_seconds * 1e6, Elapsed(), limit);
      options_.progress(line);
    }
    return e;
  }

  // Coordinate descent from `cur` until a full pass changes nothing.
  // Returns false when the budget ran out first.
  bool Descend(Choice& cur, Evaluation& cur_eval) {
    bool changed = true;
    while (changed) {
      changed = false;
      ++result_.descent_passes;
      for (size_t g = 0; g < space_.groups.size(); ++g) {
        int best_o = cur[g];
        Evaluation best_e = cur_eval;
        for (int o = 0; o < static_cast<int>(space_.groups[g].options.size()); ++o) {
          if (o == cur[g]) continue;
          Choice cand = cur;
          cand[g] = o;
          auto e = Eval(cand, /*budgeted=*/true);
          if (!e) return false;
          if (Better(*e, best_e)) {
            best_o = o;
            best_e = *e;
          }
        }
        if (best_o != cur[g]) {
          cur[g] = best_o;
          cur_eval = best_e;
          changed = true;
        }
      }
    }
    return true;
  }

  // The best single-group alternative for the largest groups: cached
  // candidates first, then fresh ones within their own small budget (not the
  // search's) and the time budget.
  void Explain() {
    freeze_best_ = true;  // the alternatives are relative to the final plan
    const int64_t before = result_.evaluations, failed_before = result_.failed;
    const int64_t why_budget = options_.max_why_evaluations >= 0
                                   ? options_.max_why_evaluations
                                   : std::max<int64_t>(10, options_.max_evaluations / 4);
    const int num_groups = std::min<int>(options_.why_groups, space_.groups.size());
    std::vector<std::optional<Alternative>> best(num_groups);
    for (bool fresh : {false, true}) {
      for (int g = 0; g < num_groups; ++g) {
        const int num_opts = static_cast<int>(space_.groups[g].options.size());
        for (int o = 0; o < num_opts; ++o) {
          if (o == result_.best[g]) continue;
          Choice cand = result_.best;
          cand[g] = o;
          if (cache_.count(Key(cand)) > 0 ? fresh : !fresh) continue;
          if (fresh && (result_.evaluations - before >= why_budget ||
                        (options_.max_seconds > 0 && Elapsed() >= options_.max_seconds)))
            continue;
          Evaluation e = *Eval(cand, /*budgeted=*/false);
          if (!best[g]) best[g] = Alternative{g, o, e, 0, num_opts - 1};
          ++best[g]->costed;
          if (Better(e, best[g]->eval)) {
            best[g]->option = o;
            best[g]->eval = e;
          }
        }
      }
    }
    for (auto& a : best)
      if (a) result_.why.push_back(*a);
    // Reported apart so that `evaluations` stays within the search budget.
    result_.why_evaluations = result_.evaluations - before;
    result_.evaluations = before;
    result_.failed = failed_before;
  }

  const Evaluator& evaluator_;
  const DecisionSpace& space_;
  const SearchOptions& options_;
  Clock::time_point start_;
  Clock::time_point last_progress_;
  std::map<std::string, Evaluation> cache_;
  SearchResult result_;
  std::string stop_reason_;
  bool freeze_best_ = false;
};

}  // namespace

SearchResult Search(const Evaluator& evaluator, const DecisionSpace& space,
                    const SearchOptions& options) {
  return Searcher(evaluator, space, options).Run();
}

}  // namespace meshsplit::autoshard
