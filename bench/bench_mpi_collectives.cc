// Collective throughput through the mpi backend (MpiCommunicator, the
// interface the SPMD executor calls) against raw MPI_Allreduce /
// MPI_Allgather / MPI_Reduce_scatter_block / MPI_Alltoall on the same
// buffers, measured in the same run. Run it under
// mpirun, e.g.
//   mpirun -np 2 build/bench/bench_mpi_collectives
//   mpirun -np 4 --oversubscribe build/bench/bench_mpi_collectives --rounds 25
// Flags: --rounds R (default 15; cheap cases run more rounds, up to 20R,
// until they have taken a second), --max-bytes B (skip larger sizes),
// --no-check (our backend without the per-collective agreement check),
// --json (one JSON document instead of the table).
// Each case alternates ours and raw for several rounds (so that load from
// other processes hits both alike) and keeps the fastest round of each; a
// round's time is the slowest rank's. Rank 0 prints one line per case with
// ratio = raw time / our time (throughput ours / raw; target >= 0.9), from
// the fastest rounds and as the median over back-to-back round pairs.
// A small driver rather than Google Benchmark: every rank must run exactly
// the same iterations in the same order.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/mpi_backend.h"

namespace meshsplit {
namespace {

// Seconds per operation of `op` run `iterations` times, the slowest rank's.
double TimeRound(const std::function<void()>& op, int iterations) {
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) op();
  double mine = (MPI_Wtime() - start) / iterations, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

struct Result {
  std::string name;
  int64_t bytes;
  double ours, raw;     // fastest round of each, seconds per operation
  double median_ratio;  // median over rounds of raw / ours, back to back
  int rounds;
};

int Main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  int rounds = 15;
  bool check = true;
  bool json = false;  // one JSON document on rank 0's stdout instead of the table
  int64_t max_bytes = 16 << 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--no-check") == 0) check = false;
    else if (std::strcmp(argv[i], "--json") == 0) json = true;
    else if (std::strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc)
      max_bytes = std::atoll(argv[++i]);
  }
  MpiCommunicator comm;
  comm.set_check_agreement(check);
  const int n = static_cast<int>(comm.num_devices());
  const int rank = static_cast<int>(comm.device());
  const std::vector<int64_t> sizes = {8, 64 << 10, 1 << 20, 16 << 20};
  std::vector<Result> results;
  for (int64_t bytes : sizes) {
    if (bytes > max_bytes) break;
    const int64_t count = bytes / 4;
    // `in` holds n blocks of `count` for reduce-scatter and all-to-all (their
    // `bytes` is the result per rank, resp. one block per destination).
    std::vector<float> in(count * n), out(count * n);
    for (int64_t i = 0; i < count * n; ++i) in[i] = static_cast<float>((i + rank) % 97) * 0.25f;
    // Short rounds (about 1 MiB of traffic, 2 to 250 operations: about 0.1 ms
    // for the smallest), many of them: on a loaded machine the fastest of many
    // short rounds is the one least disturbed by other processes. With 2000
    // operations per round (1 ms) the best 8-byte rounds of either side
    // varied by 10-20% between runs.
    const int iterations = static_cast<int>(std::clamp<int64_t>((1 << 20) / bytes / n, 2, 250));
    const std::vector<int64_t> dims = {count};
    const std::vector<int64_t> blocks = {count * n};
    Status status = Status::Ok();
    auto note = [&](Status s) {
      if (!s.ok() && status.ok()) status = s;
    };
    std::function<void()> ours_ar = [&] {
      note(comm.AllReduce(in.data(), out.data(), PrimitiveType::F32, count, ReductionKind::kAdd,
                          {}));
    };
    std::function<void()> raw_ar = [&] {
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    };
    std::function<void()> ours_ag = [&] {
      note(comm.AllGather(in.data(), out.data(), PrimitiveType::F32, dims, 0, {}));
    };
    std::function<void()> raw_ag = [&] {
      MPI_Allgather(in.data(), static_cast<int>(count), MPI_FLOAT, out.data(),
                    static_cast<int>(count), MPI_FLOAT, MPI_COMM_WORLD);
    };
    std::function<void()> ours_rs = [&] {
      note(comm.ReduceScatter(in.data(), out.data(), PrimitiveType::F32, blocks, 0,
                              ReductionKind::kAdd, {}));
    };
    std::function<void()> raw_rs = [&] {
      MPI_Reduce_scatter_block(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD);
    };
    std::function<void()> ours_a2a = [&] {
      note(comm.AllToAll(in.data(), out.data(), PrimitiveType::F32, blocks, 0, 0, {}));
    };
    std::function<void()> raw_a2a = [&] {
      MPI_Alltoall(in.data(), static_cast<int>(count), MPI_FLOAT, out.data(),
                   static_cast<int>(count), MPI_FLOAT, MPI_COMM_WORLD);
    };
    for (auto [name, ours, raw] :
         {std::tuple{"all-reduce f32 add", &ours_ar, &raw_ar},
          std::tuple{"all-gather f32", &ours_ag, &raw_ag},
          std::tuple{"reduce-scatter f32", &ours_rs, &raw_rs},
          std::tuple{"all-to-all f32", &ours_a2a, &raw_a2a}}) {
      (*ours)();  // warm-up: communicator split, buffer growth
      (*raw)();
      double best_ours = 1e30, best_raw = 1e30;
      std::vector<double> paired;  // raw / ours of back-to-back rounds
      // At least `rounds` rounds; cheap cases keep going (up to 20x as many)
      // until they have spent kCaseSeconds, since the fastest of a few short
      // rounds on a loaded, oversubscribed machine says more about the
      // scheduler than about either side. The spent time is the slowest
      // rank's, the same on every rank, so every rank stops after the same
      // round.
      constexpr double kCaseSeconds = 1.0;
      double spent = 0;
      for (int r = 0; r < rounds || (spent < kCaseSeconds && r < 20 * rounds); ++r) {
        double t_raw = 0;  // alternate which goes first
        if (r % 2) t_raw = TimeRound(*raw, iterations);
        const double t_ours = TimeRound(*ours, iterations);
        if (r % 2 == 0) t_raw = TimeRound(*raw, iterations);
        best_ours = std::min(best_ours, t_ours);
        best_raw = std::min(best_raw, t_raw);
        paired.push_back(t_raw / t_ours);
        spent += (t_ours + t_raw) * iterations;
      }
      std::sort(paired.begin(), paired.end());
      results.push_back({name, bytes, best_ours, best_raw, paired[paired.size() / 2],
                         static_cast<int>(paired.size())});
    }
    if (!status.ok()) {
      std::fprintf(stderr, "error: rank %d: %s\n", rank, status.message().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  // The floor of our small collectives: the agreement alone, one raw
  // MPI_Allgather of the fixed-size envelope.
  double envelope = 1e30;
  {
    std::vector<unsigned char> mine(MpiCommunicator::kEnvelopeBytes),
        all(MpiCommunicator::kEnvelopeBytes * n);
    auto op = [&] {
      MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                    static_cast<int>(mine.size()), MPI_BYTE, MPI_COMM_WORLD);
    };
    for (int r = 0; r < 10 * rounds; ++r) envelope = std::min(envelope, TimeRound(op, 250));
  }
  // The same exchange as point-to-point messages, which is how the agreement
  // exchanges it at 2 to 8 ranks: one MPI_Sendrecv at 2, else every rank
  // posts all its receives and sends at once (see docs/mpi.md).
  double envelope_p2p = 1e30;
  if (n > 1 && n <= 8) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    const int e = static_cast<int>(MpiCommunicator::kEnvelopeBytes);
    std::vector<unsigned char> mine(e), all(e * n);
    std::vector<MPI_Request> requests(2 * n);
    auto op = [&] {
      if (n == 2) {
        MPI_Sendrecv(mine.data(), e, MPI_BYTE, 1 - rank, 0, all.data() + (1 - rank) * e, e,
                     MPI_BYTE, 1 - rank, 0, comm, MPI_STATUS_IGNORE);
        return;
      }
      int k = 0;
      for (int q = 0; q < n; ++q)
        if (q != rank) MPI_Irecv(all.data() + q * e, e, MPI_BYTE, q, 0, comm, &requests[k++]);
      for (int q = 0; q < n; ++q)
        if (q != rank) MPI_Isend(mine.data(), e, MPI_BYTE, q, 0, comm, &requests[k++]);
      MPI_Waitall(k, requests.data(), MPI_STATUSES_IGNORE);
    };
    for (int r = 0; r < 10 * rounds; ++r)
      envelope_p2p = std::min(envelope_p2p, TimeRound(op, 250));
    MPI_Comm_free(&comm);
  }
  if (rank == 0) {
    // The machine's load at the end of the run: on a shared machine the
    // numbers mean little without it.
    char load[64] = "?";
    if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fgets(load, sizeof(load), f) == nullptr) std::snprintf(load, sizeof(load), "?");
      std::fclose(f);
      load[std::strcspn(load, "\n")] = '\0';
    }
    if (json) {
      std::printf("{\"np\": %d, \"min_rounds\": %d, \"agreement_check\": %s, \"loadavg\": \"%s\", "
                  "\"envelope_allgather_us\": %.4f, \"envelope_p2p_us\": %.4f, \"results\": [",
                  n, rounds, check ? "true" : "false", load, envelope * 1e6,
                  envelope_p2p < 1e30 ? envelope_p2p * 1e6 : -1.0);
      for (size_t i = 0; i < results.size(); ++i) {
        const Result& r = results[i];
        std::printf("%s{\"op\": \"%s\", \"bytes_per_rank\": %lld, \"ours_us\": %.4f, "
                    "\"raw_us\": %.4f, \"best_ratio\": %.4f, \"median_ratio\": %.4f, "
                    "\"rounds\": %d}",
                    i ? ", " : "", r.name.c_str(), static_cast<long long>(r.bytes), r.ours * 1e6,
                    r.raw * 1e6, r.raw / r.ours, r.median_ratio, r.rounds);
      }
      std::printf("]}\n");
      return 0;
    }
    std::printf("mpi collectives, np=%d, at least %d rounds, agreement check %s, loadavg %s\n", n,
                rounds, check ? "on" : "off", load);
    std::printf("raw MPI_Allgather of the %lld-byte agreement envelope: %.2f us\n",
                static_cast<long long>(MpiCommunicator::kEnvelopeBytes), envelope * 1e6);
    if (envelope_p2p < 1e30)
      std::printf("raw point-to-point exchange of the envelope (the agreement's form at 2-8 "
                  "ranks): %.2f us\n",
                  envelope_p2p * 1e6);
    std::printf("%-20s %10s %12s %12s %10s %7s %7s %7s\n", "op", "bytes/rank", "ours us",
                "raw us", "ours GB/s", "best", "median", "rounds");
    double worst = 1e30;
    for (const Result& r : results) {
      const double ratio = r.raw / r.ours;
      worst = std::min(worst, ratio);
      std::printf("%-20s %10lld %12.2f %12.2f %10.3f %6.2fx %6.2fx %7d\n", r.name.c_str(),
                  static_cast<long long>(r.bytes), r.ours * 1e6, r.raw * 1e6,
                  r.bytes / r.ours / 1e9, ratio, r.median_ratio, r.rounds);
    }
    std::printf("ratio = raw time / our time (throughput ours/raw). best: fastest round of "
                "each; median: of back-to-back round pairs\n");
    std::printf("worst best-round ratio: %.2fx (target >= 0.9x)\n", worst);
  }
  return 0;
}

}  // namespace
}  // namespace meshsplit

int main(int argc, char** argv) { return meshsplit::Main(argc, argv); }
