// Differential check of the mpi collectives backend, run under
// `mpirun -np N`: every rank runs each case on its MpiCommunicator and, in
// process, on a threads-backend world of N devices, and compares its own
// device's output bit for bit. Prints "mpi check: C cases, M mismatches" on
// rank 0; exits 1 on any mismatch.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/mpi_backend.h"
#include "collectives/threads_backend.h"
#include "support/float16.h"

namespace meshsplit {
namespace {

using Bytes = std::vector<uint8_t>;
// Runs one collective as `device` of `n` and leaves its output in `out`.
using CaseFn = std::function<Status(Communicator& c, int device, int n, Bytes& out)>;

uint32_t Mix(uint64_t device, uint64_t i, uint64_t salt) {
  uint64_t z = device * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + salt;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint32_t>((z ^ (z >> 31)) >> 16);
}

// Elements whose sums depend on the order (mixed magnitudes).
Bytes Values(PrimitiveType type, int device, int64_t count, uint64_t salt) {
  const int64_t w = ByteWidth(type);
  Bytes b(count * w);
  for (int64_t i = 0; i < count; ++i) {
    uint32_t r = Mix(device, i, salt);
    uint32_t v = r;
    if (type == PrimitiveType::F32 || type == PrimitiveType::BF16) {
      float f = std::ldexp(1.0f + (r % 100000) / 100000.0f, static_cast<int>(r % 23) - 11);
      if (r & 0x100000) f = -f;
      if (type == PrimitiveType::BF16) {
        v = F32ToBf16(f);
      } else {
        std::memcpy(&v, &f, 4);
      }
    } else if (type == PrimitiveType::PRED) {
      v = r & 1;
    }
    std::memcpy(b.data() + i * w, &v, w);
  }
  return b;
}

CommGroups Reversed(int n) {
  CommGroups g(1);
  for (int d = n - 1; d >= 0; --d) g[0].push_back(d);
  return g;
}

CommGroups Pairs(int n) {  // {1,0},{3,2},... for even n, else all reversed
  if (n % 2) return Reversed(n);
  CommGroups g;
  for (int d = 0; d < n; d += 2) g.push_back({d + 1, d});
  return g;
}

int64_t GroupSize(const CommGroups& g, int n) {
  return g.empty() ? n : static_cast<int64_t>(g[0].size());
}

std::vector<std::pair<std::string, CaseFn>> Cases(int n) {
  std::vector<std::pair<std::string, CaseFn>> cases;
  std::vector<std::pair<std::string, CommGroups>> layouts = {
      {"all", {}}, {"reversed", Reversed(n)}, {"pairs", Pairs(n)}};
  struct TK {
    PrimitiveType type;
    ReductionKind kind;
  };
  std::vector<TK> reductions = {
      {PrimitiveType::F32, ReductionKind::kAdd}, {PrimitiveType::F32, ReductionKind::kMul},
      {PrimitiveType::F32, ReductionKind::kMax}, {PrimitiveType::BF16, ReductionKind::kAdd},
      {PrimitiveType::BF16, ReductionKind::kMin}, {PrimitiveType::S32, ReductionKind::kAdd},
      {PrimitiveType::S32, ReductionKind::kMul}, {PrimitiveType::S32, ReductionKind::kMin},
      {PrimitiveType::S32, ReductionKind::kXor}, {PrimitiveType::PRED, ReductionKind::kAnd},
      {PrimitiveType::PRED, ReductionKind::kOr}};
  for (const auto& [lname, groups] : layouts) {
    for (const TK& tk : reductions) {
      // Up to 2 f32 (8 bytes) travel inside the agreement envelope; 3 and 7
      // are gathered whole; 5000 f32 (20000 bytes) is gathered whole at 2-4
      // ranks (at most 64 KiB received); 16384 (64 KiB) is gathered whole at
      // 2 ranks and sliced (reduce-scatter, fold, all-gather) at 3 and 4;
      // 40000 and 70001 are sliced for 4-byte types.
      for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{5000},
                            int64_t{16384}, int64_t{40000}, int64_t{70001}}) {
        for (bool in_place : {false, true}) {
          std::string name = "all-reduce " + std::string(PrimitiveTypeName(tk.type)) + " " +
                             std::string(ReductionKindName(tk.kind)) + " n=" +
                             std::to_string(count) + " " + lname + (in_place ? " in-place" : "");
          cases.push_back({name, [=](Communicator& c, int d, int, Bytes& out) {
                             Bytes in = Values(tk.type, d, count, 1);
                             out.assign(in.size(), 0xEE);
                             if (in_place) out = in;
                             return c.AllReduce(in_place ? out.data() : in.data(), out.data(),
                                                tk.type, count, tk.kind, groups);
                           }});
        }
      }
    }
    // Large enough that each member's slice is sent and folded in several
    // 1 MiB pieces (the last one partial) at 2-4 ranks: the pipelined path.
    for (const TK& tk : {reductions[0], reductions[3]}) {  // f32 add, bf16 add
      for (bool in_place : {false, true}) {
        constexpr int64_t count = 1100003;
        cases.push_back({"all-reduce " + std::string(PrimitiveTypeName(tk.type)) + " " +
                             std::string(ReductionKindName(tk.kind)) + " n=" +
                             std::to_string(count) + " " + lname +
                             (in_place ? " in-place" : ""),
                         [=](Communicator& c, int d, int, Bytes& out) {
                           Bytes in = Values(tk.type, d, count, 7);
                           out.assign(in.size(), 0xEE);
                           if (in_place) out = in;
                           return c.AllReduce(in_place ? out.data() : in.data(), out.data(),
                                              tk.type, count, tk.kind, groups);
                         }});
      }
    }
    const int64_t g = GroupSize(groups, n);
    for (int64_t dim = 0; dim < 3; ++dim) {
      // {1,3,2} s32 (24 bytes): inside the agreement envelope; {2,3,4} and
      // {2,300,40}: MPI_Allgather.
      for (int64_t scale : {0, 1, 100}) {
        cases.push_back({"all-gather dim=" + std::to_string(dim) + " x" +
                             std::to_string(scale) + " " + lname,
                         [=](Communicator& c, int d, int, Bytes& out) {
                           std::vector<int64_t> dims =
                               scale == 0 ? std::vector<int64_t>{1, 3, 2}
                                          : std::vector<int64_t>{2, 3 * scale,
                                                                 4 * (scale > 1 ? 10 : 1)};
                           const int64_t elems = dims[0] * dims[1] * dims[2];
                           Bytes in = Values(PrimitiveType::S32, d, elems, 2);
                           out.assign(in.size() * g, 0xEE);
                           return c.AllGather(in.data(), out.data(), PrimitiveType::S32, dims,
                                              dim, groups);
                         }});
      }
      cases.push_back({"reduce-scatter f32 dim=" + std::to_string(dim) + " " + lname,
                       [=](Communicator& c, int d, int, Bytes& out) {
                         std::vector<int64_t> dims = {2, 3, 2};
                         dims[dim] *= g;
                         int64_t elems = 12 * g;
                         Bytes in = Values(PrimitiveType::F32, d, elems, 3);
                         out.assign(12 * 4, 0xEE);
                         return c.ReduceScatter(in.data(), out.data(), PrimitiveType::F32,
                                                dims, dim, ReductionKind::kAdd, groups);
                       }});
      for (int64_t concat = 0; concat < 3; ++concat) {
        cases.push_back({"all-to-all split=" + std::to_string(dim) + " concat=" +
                             std::to_string(concat) + " " + lname,
                         [=](Communicator& c, int d, int, Bytes& out) {
                           std::vector<int64_t> dims = {2, 3, 2};
                           dims[dim] *= g;
                           Bytes in = Values(PrimitiveType::BF16, d, 12 * g, 4);
                           out.assign(in.size(), 0xEE);
                           return c.AllToAll(in.data(), out.data(), PrimitiveType::BF16, dims,
                                             dim, concat, groups);
                         }});
      }
    }
    // Parts of at most 8 bytes per destination ride in the agreement's
    // envelopes at 2-8 ranks (one per destination): contiguous and packed
    // parts, in place too.
    struct SmallScatter {
      std::vector<int64_t> dims;  // dims[dim] is multiplied by the group size
      int64_t dim;
      PrimitiveType type;
      ReductionKind kind;
    };
    for (const SmallScatter& sc :
         {SmallScatter{{2}, 0, PrimitiveType::F32, ReductionKind::kAdd},
          SmallScatter{{2, 1, 1}, 1, PrimitiveType::F32, ReductionKind::kAdd},
          SmallScatter{{1}, 0, PrimitiveType::BF16, ReductionKind::kAdd},
          SmallScatter{{3, 1, 2}, 1, PrimitiveType::S32, ReductionKind::kMax},
          SmallScatter{{1, 8}, 0, PrimitiveType::PRED, ReductionKind::kOr}}) {
      for (bool in_place : {false, true}) {
        std::string shape;
        for (int64_t x : sc.dims) shape += (shape.empty() ? "" : ",") + std::to_string(x);
        cases.push_back({"reduce-scatter small " + std::string(PrimitiveTypeName(sc.type)) +
                             " [" + shape + "] dim=" + std::to_string(sc.dim) + " " + lname +
                             (in_place ? " in-place" : ""),
                         [=](Communicator& c, int d, int, Bytes& out) {
                           std::vector<int64_t> dims = sc.dims;
                           dims[sc.dim] *= g;
                           int64_t elems = 1;
                           for (int64_t x : dims) elems *= x;
                           Bytes in = Values(sc.type, d, elems, 11);
                           Bytes result(in.size() / g, 0xEE);
                           Status s = c.ReduceScatter(in.data(), in_place ? in.data()
                                                                          : result.data(),
                                                      sc.type, dims, sc.dim, sc.kind, groups);
                           out.assign(in_place ? in.begin() : result.begin(),
                                      (in_place ? in.begin() : result.begin()) +
                                          result.size());
                           return s;
                         }});
      }
    }
    struct SmallAllToAll {
      std::vector<int64_t> dims;  // dims[split] is multiplied by the group size
      int64_t split, concat;
      PrimitiveType type;
    };
    for (const SmallAllToAll& sc :
         {SmallAllToAll{{2}, 0, 0, PrimitiveType::F32},
          SmallAllToAll{{2, 1, 2}, 1, 2, PrimitiveType::BF16},
          SmallAllToAll{{2, 1}, 1, 0, PrimitiveType::S32},
          SmallAllToAll{{1, 3}, 0, 1, PrimitiveType::BF16}}) {
      for (bool in_place : {false, true}) {
        std::string shape;
        for (int64_t x : sc.dims) shape += (shape.empty() ? "" : ",") + std::to_string(x);
        cases.push_back({"all-to-all small " + std::string(PrimitiveTypeName(sc.type)) + " [" +
                             shape + "] split=" + std::to_string(sc.split) + " concat=" +
                             std::to_string(sc.concat) + " " + lname +
                             (in_place ? " in-place" : ""),
                         [=](Communicator& c, int d, int, Bytes& out) {
                           std::vector<int64_t> dims = sc.dims;
                           dims[sc.split] *= g;
                           int64_t elems = 1;
                           for (int64_t x : dims) elems *= x;
                           Bytes in = Values(sc.type, d, elems, 12);
                           out.assign(in.size(), 0xEE);
                           if (in_place) out = in;
                           return c.AllToAll(in_place ? out.data() : in.data(), out.data(),
                                             sc.type, dims, sc.split, sc.concat, groups);
                         }});
      }
    }
    cases.push_back({"all-to-all tuple " + lname, [=](Communicator& c, int d, int, Bytes& out) {
                       std::vector<Bytes> ins, outs(g, Bytes(5 * 4, 0xEE));
                       std::vector<const void*> in_ptrs;
                       std::vector<void*> out_ptrs;
                       for (int64_t k = 0; k < g; ++k) {
                         ins.push_back(Values(PrimitiveType::S32, d, 5, 10 + k));
                         in_ptrs.push_back(ins.back().data());
                       }
                       for (auto& o : outs) out_ptrs.push_back(o.data());
                       Status s = c.AllToAllTuple(in_ptrs, out_ptrs, PrimitiveType::S32, 5, groups);
                       out.clear();
                       for (auto& o : outs) out.insert(out.end(), o.begin(), o.end());
                       return s;
                     }});
  }
  SourceTargetPairs ring, partial;
  for (int d = 0; d < n; ++d) ring.push_back({d, (d + 1) % n});
  for (int d = 0; d + 1 < n; d += 2) partial.push_back({d, d + 1});
  for (const auto& [pname, pairs] :
       std::vector<std::pair<std::string, SourceTargetPairs>>{{"ring", ring},
                                                              {"partial", partial}}) {
    for (int64_t count : {5, 9, 5000})  // inside the agreement envelope, and not
      for (bool in_place : {false, true})
        cases.push_back({"collective-permute " + pname + " n=" + std::to_string(count) +
                             (in_place ? " in-place" : ""),
                         [=](Communicator& c, int d, int, Bytes& out) {
                           Bytes in = Values(PrimitiveType::F32, d, count, 5);
                           out.assign(in.size(), 0xEE);
                           if (in_place) out = in;
                           return c.CollectivePermute(in_place ? out.data() : in.data(),
                                                      out.data(), PrimitiveType::F32, count,
                                                      pairs);
                         }});
  }
  // A mismatch between devices must be an error on every device, on both
  // backends (the output is the error flag).
  if (n > 1)
    cases.push_back({"count mismatch is an error", [=](Communicator& c, int d, int, Bytes& out) {
                       float v[4] = {};
                       Status s = c.AllReduce(v, v, PrimitiveType::F32, d == 1 ? 2 : 4,
                                              ReductionKind::kAdd, {});
                       out.assign(1, s.ok() ? 0 : 1);
                       return Status::Ok();
                     }});
  // Both small enough to be inlined: the envelope compares 14 bits of the
  // argument history, so the mismatch is caught here or (with probability
  // 2^-14) by the next check of the whole history, never missed.
  if (n > 1)
    cases.push_back({"inlined count mismatch is an error",
                     [=](Communicator& c, int d, int, Bytes& out) {
                       float v[2] = {};
                       Status s = c.AllReduce(v, v, PrimitiveType::F32, d == 1 ? 1 : 2,
                                              ReductionKind::kAdd, {});
                       if (auto* mpi = dynamic_cast<MpiCommunicator*>(&c); mpi && s.ok())
                         s = mpi->CheckHistory();
                       out.assign(1, s.ok() ? 0 : 1);
                       return Status::Ok();
                     }});
  // Small on one device, large on the others: the ranks would take different
  // paths (envelope vs MPI_Allreduce) if the agreement did not stop them.
  if (n > 1)
    cases.push_back({"small vs large count mismatch is an error",
                     [=](Communicator& c, int d, int, Bytes& out) {
                       std::vector<float> v(40000);
                       Status s = c.AllReduce(v.data(), v.data(), PrimitiveType::F32,
                                              d == 1 ? 2 : 40000, ReductionKind::kAdd, {});
                       out.assign(1, s.ok() ? 0 : 1);
                       return Status::Ok();
                     }});
  return cases;
}

int Main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  MpiCommunicator mpi;
  const int n = static_cast<int>(mpi.num_devices());
  const int rank = static_cast<int>(mpi.device());
  int64_t mismatches = 0, num_cases = 0;
  // Every case with the per-collective agreement (the default), then again
  // without it (MESHSPLIT_MPI_CHECK=0): the data paths differ (no envelope).
  // Not the argument mismatches, which only the agreement can catch, and of
  // the all-reduces only f32 and s32 add (the kernels are the same).
  std::vector<std::pair<std::string, CaseFn>> all_cases;
  for (auto& c : Cases(n)) all_cases.push_back(c);
  for (auto& [name, fn] : Cases(n)) {
    if (name.find("mismatch") != std::string::npos) continue;
    if (name.rfind("all-reduce", 0) == 0 && name.find("f32 add") == std::string::npos &&
        name.find("s32 add") == std::string::npos)
      continue;
    all_cases.push_back({"unchecked " + name, fn});
  }
  for (auto& [name, fn] : all_cases) {
    ++num_cases;
    mpi.set_check_agreement(name.rfind("unchecked ", 0) != 0);
    Bytes mine;
    Status s = fn(mpi, rank, n, mine);
    std::vector<Bytes> reference(n);
    Status t = RunOnThreads(n, [&](int d, Communicator& c) { return fn(c, d, n, reference[d]); });
    if (!s.ok() || !t.ok()) {
      ++mismatches;
      std::fprintf(stderr, "rank %d: %s: mpi: %s, threads: %s\n", rank, name.c_str(),
                   s.ok() ? "ok" : s.message().c_str(), t.ok() ? "ok" : t.message().c_str());
    } else if (mine != reference[rank]) {
      ++mismatches;
      size_t i = 0;
      while (i < mine.size() && i < reference[rank].size() && mine[i] == reference[rank][i]) ++i;
      std::fprintf(stderr, "rank %d: %s: differs from the threads backend at byte %zu\n",
                   rank, name.c_str(), i);
    }
  }
  long long total = 0, local = mismatches;
  MPI_Allreduce(&local, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("mpi check (np=%d): %lld cases, %lld mismatches\n", n,
                static_cast<long long>(num_cases), total);
  return total == 0 ? 0 : 1;
}

}  // namespace
}  // namespace meshsplit

int main(int argc, char** argv) { return meshsplit::Main(argc, argv); }
