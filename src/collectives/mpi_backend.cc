// The `mpi` backend (see mpi_backend.h). Data moves with MPI_Allgather,
// MPI_Alltoall(v) and point-to-point messages as raw bytes; every reduction
// is folded locally by ReduceInOrder in group order, so its bits match the
// threads backend's. This file is compiled into ms_collectives as an empty
// unit and for real only into ms_collectives_mpi, which defines
// MESHSPLIT_BUILD_MPI_BACKEND and has MPI's include path.
#ifdef MESHSPLIT_BUILD_MPI_BACKEND

#include "collectives/mpi_backend.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "collectives/reduction.h"
#include "support/check.h"

namespace meshsplit {
namespace {

enum OpTag : uint64_t {
  kTagAllReduce = 1,
  kTagAllGather,
  kTagReduceScatter,
  kTagAllToAll,
  kTagAllToAllTuple,
  kTagPermute,
  kTagBarrier,
  kTagHistory,
};

// A hash of the arguments every rank must agree on, one 64-bit word at a
// time (a multiply and a shift per word: it runs on every collective, so it
// must cost nanoseconds; it only has to tell argument lists apart, not resist
// an adversary).
class Signature {
 public:
  explicit Signature(uint64_t op) { Add(op); }
  Signature& Add(uint64_t v) {
    h_ = (h_ ^ v) * 0x9e3779b97f4a7c15ull;
    h_ ^= h_ >> 29;
    return *this;
  }
  Signature& Add(std::span<const int64_t> v) {
    Add(v.size());
    for (int64_t x : v) Add(static_cast<uint64_t>(x));
    return *this;
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0x243f6a8885a308d3ull;
};

// The part of a signature that names the replica groups, computed once per
// distinct group list (it is O(devices)).
uint64_t GroupsHash(const CommGroups& groups) {
  Signature sig(groups.size());
  for (const auto& g : groups) sig.Add(std::span<const int64_t>(g));
  return sig.value();
}

// Row-major strides (in elements) of `dims`, written into `strides` so that
// its capacity is reused; returns `strides`.
const std::vector<int64_t>& StridesInto(std::span<const int64_t> dims,
                                        std::vector<int64_t>& strides) {
  strides.resize(dims.size());
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

const unsigned char* Bytes(const void* p) {
  return static_cast<const unsigned char*>(p);
}
unsigned char* Bytes(void* p) { return static_cast<unsigned char*>(p); }

Status CheckBytes(int64_t bytes, std::string_view op) {
  if (bytes > INT_MAX)
    return Status::Error(std::string(op) +
                         ": messages over 2 GiB are not supported by the mpi "
                         "backend yet");
  return Status::Ok();
}

// MPI_Allreduce gives the same bits as the fixed order only where the
// combination is exactly associative and commutative: integer min/max,
// bitwise ops, and add/mul modulo 2^n (done on the unsigned type so that
// wrap-around is defined). Floats and pred take the gather path.
MPI_Datatype OrderFreeType(PrimitiveType type, ReductionKind kind, MPI_Op* op) {
  const bool wrap = kind == ReductionKind::kAdd || kind == ReductionKind::kMul;
  switch (kind) {
    case ReductionKind::kAdd: *op = MPI_SUM; break;
    case ReductionKind::kMul: *op = MPI_PROD; break;
    case ReductionKind::kMin: *op = MPI_MIN; break;
    case ReductionKind::kMax: *op = MPI_MAX; break;
    case ReductionKind::kAnd: *op = MPI_BAND; break;
    case ReductionKind::kOr: *op = MPI_BOR; break;
    case ReductionKind::kXor: *op = MPI_BXOR; break;
  }
  switch (type) {
    case PrimitiveType::S8: return wrap ? MPI_UINT8_T : MPI_INT8_T;
    case PrimitiveType::S16: return wrap ? MPI_UINT16_T : MPI_INT16_T;
    case PrimitiveType::S32: return wrap ? MPI_UINT32_T : MPI_INT32_T;
    case PrimitiveType::S64: return wrap ? MPI_UINT64_T : MPI_INT64_T;
    case PrimitiveType::U8: return MPI_UINT8_T;
    case PrimitiveType::U16: return MPI_UINT16_T;
    case PrimitiveType::U32: return MPI_UINT32_T;
    case PrimitiveType::U64: return MPI_UINT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

// An all-reduce gathers every contribution whole (one exchange; each rank
// receives (G-1) x bytes and folds all G) while that stays under this many
// received bytes, else it goes sliced: reduce-scatter by hand (an
// all-to-all of 1/G slices), fold 1/G in group order, all-gather the folded
// slices (two exchanges of 1/G slices). Both fold in the same order as the
// threads backend, so the bits do not depend on the choice. Measured
// (bench_mpi_collectives and a raw-MPI sketch of both forms, Open MPI 4.1,
// shared memory): at 2 ranks whole gathering wins up to 64 KiB (about 12 us
// against 22 us for MPI_Allreduce); at 4 ranks (oversubscribed on 2 cores)
// at 64 KiB the whole form took 2-3x as long as the sliced one, which is
// on par with MPI_Allreduce; at 16 KiB the two were within the noise.
constexpr int64_t kWholeGatherAllReduceBytes = 64 * 1024;

// Groups up to this size exchange data in one step of point-to-point
// messages (every member posts all its receives and sends at once) instead
// of MPI_Allgather(v) / MPI_Alltoallv, whose schedules (ring, pairwise,
// recursive doubling) take several dependent steps. Measured at 4 ranks
// oversubscribed on 2 cores, where each dependent step costs a trip through
// the scheduler: the sliced all-reduce of 64 KiB went from 0.57-0.65x of
// MPI_Allreduce to 0.75-0.83x, and 1 MiB from 0.82-1.0x to 0.89-1.57x. The
// number of messages per member grows with the group, so larger groups keep
// MPI's schedules (not measured: no machine here has more than 2 cores).
constexpr int64_t kLinearMaxGroup = 8;

// The sliced all-reduce of a small group sends, receives, folds and sends on
// its slices in pieces of this many bytes, so that a piece is folded while
// later ones still arrive and is still in cache when it is folded and when
// the others read it back.
constexpr int64_t kPipelineChunkBytes = 1 << 20;

// Slice q of `count` elements cut into slices of `per` (the last ones
// shorter or empty): {first element, length}. The sliced all-reduce's cut,
// the same on every member.
std::pair<int64_t, int64_t> SliceOf(int64_t count, int64_t per, int64_t q) {
  const int64_t b = std::min(count, q * per), e = std::min(count, (q + 1) * per);
  return {b, e - b};
}

// Point-to-point tags on our own group communicators (MPI's collectives on
// them use a separate tag space, so they cannot match these).
constexpr int kTagGather = 1;
constexpr int kTagSlices = 2;
constexpr int kTagFolded = 3;
constexpr int kTagEnvelope = 4;  // on the agreement's own duplicate of the world
constexpr int kTagScatterParts = 5;
constexpr int kTagAllToAllBlocks = 6;

// One step of point-to-point messages among the members of `comm` (ranks =
// group positions): this member, at position p, receives recv(q) = {pointer,
// bytes} from and sends send(q) to every other member q, all in flight at
// once. REQUIRES: the arguments were agreed, so the messages match.
template <typename Send, typename Recv>
void ExchangeLinear(MPI_Comm comm, int64_t g, int64_t p, int tag,
                    std::vector<MPI_Request>& requests, Send send, Recv recv) {
  requests.resize(2 * g);
  int n = 0;
  for (int64_t q = 0; q < g; ++q) {
    if (q == p) continue;
    auto [data, bytes] = recv(q);
    MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, static_cast<int>(q), tag, comm,
              &requests[n++]);
  }
  for (int64_t q = 0; q < g; ++q) {
    if (q == p) continue;
    auto [data, bytes] = send(q);
    MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, static_cast<int>(q), tag, comm,
              &requests[n++]);
  }
  MPI_Waitall(n, requests.data(), MPI_STATUSES_IGNORE);
}

// Shared state of MpiWait and its watchdog thread. Leaked on purpose: the
// watchdog must keep watching MPI_Finalize, which runs during static
// destruction. Only the MPI thread writes depth, epoch and what, and MpiWait
// is on the path of every collective, so it uses relaxed loads and stores
// (plain moves on x86) and reads no clock: the watchdog times a wait from
// the first poll that sees it, by its epoch.
struct WatchdogState {
  std::atomic<int> depth{0};
  std::atomic<uint64_t> epoch{0};  // +1 whenever an outermost wait begins
  std::atomic<const char*> what{nullptr};
  std::atomic<double> timeout{-1};  // < 0: not read from the environment yet
  std::atomic<bool> thread_started{false};
  std::atomic<int> rank{-1};
};

WatchdogState& Watchdog() {
  static WatchdogState* state = new WatchdogState;
  return *state;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double TimeoutFromEnvironment() {
  const char* env = std::getenv("MESHSPLIT_MPI_TIMEOUT");
  if (env == nullptr || *env == '\0') return 300;
  char* end = nullptr;
  double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v >= 0)) {
    std::fprintf(stderr,
                 "warning: MESHSPLIT_MPI_TIMEOUT='%s' is not a number of seconds; using "
                 "300\n",
                 env);
    return 300;
  }
  return v;
}

// Polls ten times per timeout. A wait is timed from the first poll that saw
// its epoch, so a stuck rank is reported between `timeout` and `timeout` plus
// one poll after its wait began (the message rounds down by up to one poll).
void WatchdogLoop() {
  WatchdogState& w = Watchdog();
  uint64_t seen_epoch = 0;
  int64_t seen_ns = 0;
  bool watching = false;
  for (;;) {
    const double timeout = w.timeout.load();
    const double poll = timeout > 0 ? std::clamp(timeout / 10, 0.01, 0.5) : 0.5;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll));
    if (timeout <= 0 || w.depth.load(std::memory_order_acquire) == 0) {
      watching = false;
      continue;
    }
    const uint64_t epoch = w.epoch.load(std::memory_order_relaxed);
    if (!watching || epoch != seen_epoch) {  // a wait this poll has not seen yet
      watching = true;
      seen_epoch = epoch;
      seen_ns = NowNs();
      continue;
    }
    const double waited = (NowNs() - seen_ns) * 1e-9;
    if (waited <= timeout) continue;
    const char* what = w.what.load(std::memory_order_relaxed);
    std::fprintf(stderr,
                 "error: rank %d: waited %.1f s in %s for the other ranks (one is stuck, "
                 "stopped or unreachable); ending the job (timeout MESHSPLIT_MPI_TIMEOUT=%g s)\n",
                 w.rank.load(), waited, what != nullptr ? what : "an MPI call", timeout);
    std::fflush(stderr);
    // Not MPI_Abort: MPI is initialised for one calling thread only. An exit
    // without MPI_Finalize makes mpirun end every other rank.
    _exit(1);
  }
}

void MpiErrorHandler(MPI_Comm* comm, int* code, ...) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(*code, text, &len);
  const char* what = Watchdog().what.load();
  std::fprintf(stderr,
               "error: rank %d: MPI error in %s: %s (another rank probably failed); "
               "aborting all ranks\n",
               Watchdog().rank.load(), what != nullptr ? what : "an MPI call", text);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace

MpiWait::MpiWait(const char* what) {
  WatchdogState& w = Watchdog();
  if (!w.thread_started.load(std::memory_order_relaxed) && timeout_seconds() > 0 &&
      !w.thread_started.exchange(true))
    std::thread(WatchdogLoop).detach();
  previous_ = w.what.load(std::memory_order_relaxed);
  w.what.store(what, std::memory_order_relaxed);
  const int depth = w.depth.load(std::memory_order_relaxed);
  if (depth == 0)
    w.epoch.store(w.epoch.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  w.depth.store(depth + 1, std::memory_order_release);
}

MpiWait::~MpiWait() {
  WatchdogState& w = Watchdog();
  w.depth.store(w.depth.load(std::memory_order_relaxed) - 1, std::memory_order_release);
  w.what.store(previous_, std::memory_order_relaxed);
}

double MpiWait::timeout_seconds() {
  WatchdogState& w = Watchdog();
  double t = w.timeout.load();
  if (t < 0) {
    t = TimeoutFromEnvironment();
    w.timeout.store(t);
  }
  return t;
}

void MpiWait::set_timeout_seconds(double seconds) {
  Watchdog().timeout.store(seconds < 0 ? 0 : seconds);
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // The rank is not known before MPI_Init; launchers export it.
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
      if (const char* env = std::getenv(var); env != nullptr && Watchdog().rank.load() < 0)
        Watchdog().rank.store(std::atoi(env));
    MpiWait wait("MPI_Init");
    // MPI_THREAD_SINGLE, not FUNNELED, although the watchdog (and BLAS) run
    // threads of their own: none of them ever calls MPI (the watchdog reads
    // atomics and ends the process with _exit). Open MPI 4.1 switches on its
    // internal locking for any level above SINGLE, which made an 8-byte
    // MPI_Allgather at np 2 about 35% slower here (0.52 us against 0.38 us,
    // docs/mpi.md).
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
    owns_ = true;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Watchdog().rank.store(rank);
  MPI_Errhandler handler;
  MPI_Comm_create_errhandler(&MpiErrorHandler, &handler);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler);
  MPI_Errhandler_free(&handler);
}

MpiSession::~MpiSession() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // MPI_Finalize waits for every rank; one that never comes must not hang us.
  MpiWait wait("MPI_Finalize");
  MPI_Finalize();
}

MpiCommunicator::MpiCommunicator() {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rank_ = rank;
  size_ = size;
  inline_.resize(size_);
  envelopes_.resize(size_ * kEnvelopeBytes);
  if (UsesPointToPointAgreement()) outgoing_.resize(size_ * kEnvelopeBytes);
  // The agreement's own duplicate of the world, for its point-to-point form
  // (so its messages cannot match a program's). Made here, where every rank
  // is at the same point, not on first use: ranks that later diverge must
  // not make different collective calls on the world.
  if (UsesPointToPointAgreement()) MPI_Comm_dup(MPI_COMM_WORLD, &agreement_comm_);
}

bool MpiCommunicator::UsesPointToPointAgreement() const {
  return size_ >= 2 && size_ <= kLinearMaxGroup;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& [groups, group] : groups_)
    if (group->comm != MPI_COMM_NULL) MPI_Comm_free(&group->comm);
  if (agreement_comm_ != MPI_COMM_NULL) MPI_Comm_free(&agreement_comm_);
}

Status MpiCommunicator::Agree(uint64_t signature, const Status& local,
                              const void* payload, int64_t inline_bytes,
                              bool per_destination) {
  if (!check_agreement_) return local;  // a local error then stops only us
  // Chain this collective into the history (splitmix64's finaliser as mixer).
  uint64_t h = (history_ ^ signature) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  history_ = h ^ (h >> 31);
  const bool inlined = inline_bytes >= 0;
  unsigned char mine[kEnvelopeBytes] = {};
  if (!inlined) {
    std::memcpy(mine, &history_, 8);
  } else if (payload != nullptr) {
    std::memcpy(mine, payload, std::min(inline_bytes, kInlineBytes));
  }
  const uint16_t word =
      local.ok() ? static_cast<uint16_t>(kWordOk | (inlined ? kWordInline : 0) |
                                         ((history_ >> 50) & kWordHashMask))
                 : 0;
  std::memcpy(mine + kInlineBytes, &word, 2);
  // With a payload per destination, the envelope to rank q carries
  // payload[q]; only the point-to-point forms can send different envelopes.
  MS_CHECK(!per_destination || (inlined && UsesPointToPointAgreement()));
  const unsigned char* to_rank = mine;  // envelope q is to_rank + q * step
  int64_t step = 0;
  if (per_destination) {
    for (int64_t q = 0; q < size_; ++q) {
      unsigned char* e = outgoing_.data() + q * kEnvelopeBytes;
      std::memcpy(e, mine, kEnvelopeBytes);
      if (payload != nullptr) std::memcpy(e, Bytes(payload) + q * kInlineBytes, kInlineBytes);
    }
    to_rank = outgoing_.data();
    step = kEnvelopeBytes;
  }
  if (size_ == 2) {
    // One MPI_Sendrecv: at np 2 it is 10-20 ns cheaper than MPI_Allgather
    // or a pair of nonblocking calls (0.37 us against 0.39 us for 10 bytes
    // here, best of 300 rounds), and that is a third of what the agreement
    // adds to a small collective.
    const int peer = 1 - static_cast<int>(rank_);
    std::memcpy(envelopes_.data() + rank_ * kEnvelopeBytes, to_rank + rank_ * step,
                kEnvelopeBytes);
    MPI_Sendrecv(to_rank + peer * step, kEnvelopeBytes, MPI_BYTE, peer, kTagEnvelope,
                 envelopes_.data() + peer * kEnvelopeBytes, kEnvelopeBytes, MPI_BYTE, peer,
                 kTagEnvelope, agreement_comm_, MPI_STATUS_IGNORE);
  } else if (UsesPointToPointAgreement()) {
    // One step of point-to-point messages instead of MPI_Allgather's two or
    // more dependent steps (recursive doubling, ring): each step is a trip
    // through the scheduler when ranks share cores. Own envelope included.
    std::memcpy(envelopes_.data() + rank_ * kEnvelopeBytes, to_rank + rank_ * step,
                kEnvelopeBytes);
    ExchangeLinear(
        agreement_comm_, size_, rank_, kTagEnvelope, requests_,
        [&](int64_t q) {
          return std::pair{static_cast<const void*>(to_rank + q * step), kEnvelopeBytes};
        },
        [&](int64_t q) { return std::pair{envelopes_.data() + q * kEnvelopeBytes, kEnvelopeBytes}; });
  } else {
    MPI_Allgather(mine, kEnvelopeBytes, MPI_BYTE, envelopes_.data(), kEnvelopeBytes, MPI_BYTE,
                  MPI_COMM_WORLD);
  }
  // The verdict depends only on the gathered envelopes, so it is the same on
  // every rank. One pass decides it on the common path (everyone agrees);
  // the messages are built only when something is wrong.
  const unsigned char* env = envelopes_.data();
  bool all_agree = local.ok();
  for (int64_t d = 0; d < size_; ++d, env += kEnvelopeBytes) {
    uint16_t w = 0;
    std::memcpy(&w, env + kInlineBytes, 2);
    all_agree &= w == word && (inlined || std::memcmp(env, mine, kInlineBytes) == 0);
    if (inlined) std::memcpy(&inline_[d], env, kInlineBytes);
  }
  if (all_agree) return Status::Ok();
  // Every rank fails this agreement; start the history afresh so that ranks
  // that carry on after the error (tests do) agree again.
  history_ = kHistorySeed;
  return Disagreement(local, word, mine, inlined);
}

Status MpiCommunicator::Disagreement(const Status& local, uint16_t word,
                                     const unsigned char* mine, bool inlined) const {
  auto word_of = [&](int64_t d) {
    uint16_t w = 0;
    std::memcpy(&w, envelopes_.data() + d * kEnvelopeBytes + kInlineBytes, 2);
    return w;
  };
  if (!local.ok()) return local;
  for (int64_t d = 0; d < size_; ++d)
    if (word_of(d) == 0)
      return Status::Error("a collective failed on device " + std::to_string(d) +
                           " (bad arguments there)");
  for (int64_t d = 0; d < size_; ++d)
    if (word_of(d) != word ||
        (!inlined &&
         std::memcmp(envelopes_.data() + d * kEnvelopeBytes, mine, kInlineBytes) != 0))
      return Status::Error(
          "devices disagree on a collective: device " + std::to_string(d) +
          "'s arguments (of this collective or an earlier one) differ from device " +
          std::to_string(rank_) + "'s");
  MS_CHECK_MSG(false, "Disagreement called although every envelope agrees");
  return Status::Ok();
}

Status MpiCommunicator::CheckHistory() {
  MpiWait wait("the check of every collective's arguments");
  Status s = Agree(Signature(kTagHistory).value(), Status::Ok());
  if (s.ok()) return s;
  return Status::Error("the end-of-run check of every collective's arguments failed (the "
                       "ranks ran different collectives): " + s.message());
}

Status MpiCommunicator::Lookup(const CommGroups& groups, std::string_view op,
                              bool require_equal_sizes, Group** out) {
  Group* group = nullptr;
  if (last_key_ != nullptr && *last_key_ == groups) {
    group = last_group_;
  } else if (auto it = groups_.find(groups); it != groups_.end()) {
    group = it->second.get();
    last_key_ = &it->first;
    last_group_ = group;
  }
  if (group == nullptr || (require_equal_sizes && !group->equal_sizes)) {
    // First use (or a size check this list has not passed): validate. With
    // unequal sizes and require_equal_sizes, FindGroup fails.
    MS_ASSIGN_OR_RETURN(GroupMembership m,
                        FindGroup(groups, size_, rank_, op, require_equal_sizes));
    if (group == nullptr) {
      auto fresh = std::make_unique<Group>();
      fresh->membership = std::move(m);
      for (const auto& g : groups)
        fresh->equal_sizes = fresh->equal_sizes && g.size() == groups[0].size();
      fresh->hash = GroupsHash(groups);
      auto it = groups_.emplace(groups, std::move(fresh)).first;
      group = it->second.get();
      last_key_ = &it->first;
      last_group_ = group;
    }
  }
  *out = group;
  return Status::Ok();
}

const MpiCommunicator::Group* MpiCommunicator::Comm(Group* group) {
  if (group->comm != MPI_COMM_NULL) return group;
  const auto& m = group->membership.members;
  bool world_order = static_cast<int64_t>(m.size()) == size_;
  for (size_t i = 0; world_order && i < m.size(); ++i) world_order = m[i] == static_cast<int64_t>(i);
  if (world_order) {
    MPI_Comm_dup(MPI_COMM_WORLD, &group->comm);
  } else {
    // Groups are disjoint, so the smallest member id names the group; the
    // key orders ranks in the new communicator by group position.
    int color = static_cast<int>(*std::min_element(m.begin(), m.end()));
    MPI_Comm_split(MPI_COMM_WORLD, color, static_cast<int>(group->membership.position),
                   &group->comm);
  }
  return group;
}

Status MpiCommunicator::AllReduce(const void* input, void* output,
                                  PrimitiveType type, int64_t count,
                                  ReductionKind kind, const CommGroups& groups) {
  MpiWait wait("all-reduce");
  const int64_t w = ByteWidth(type);
  Status local = CheckReduction(type, kind);
  if (local.ok() && count < 0) local = Status::Error("all-reduce: negative element count");
  Group* found = nullptr;
  if (local.ok()) local = Lookup(groups, "all-reduce", false, &found);
  const int64_t g = local.ok() ? static_cast<int64_t>(found->membership.members.size()) : 1;
  if (local.ok()) local = CheckBytes(count * w * g, "all-reduce");
  const int64_t bytes = local.ok() ? count * w : 0;
  const bool inlined = Inlined(bytes);
  MS_RETURN_IF_ERROR(Agree(Signature(kTagAllReduce)
                               .Add(static_cast<uint64_t>(type))
                               .Add(static_cast<uint64_t>(kind))
                               .Add(count)
                               .Add(found != nullptr ? found->hash : 0)
                               .value(),
                           local, local.ok() ? input : nullptr, inlined ? bytes : -1));
  const Group* group = Comm(found);
  if (g == 1) {
    if (input != output) std::memmove(output, input, bytes);
    return Status::Ok();
  }
  std::vector<const void*>& inputs = inputs_;
  inputs.resize(g);
  if (inlined) {  // every contribution came with the agreement
    for (int64_t k = 0; k < g; ++k) inputs[k] = Inline(found->membership.members[k]);
    ReduceInOrder(kind, type, inputs, output, count);
    return Status::Ok();
  }
  MPI_Op op;
  MPI_Datatype dt = OrderFreeType(type, kind, &op);
  if (dt != MPI_DATATYPE_NULL) {
    MPI_Allreduce(input == output ? MPI_IN_PLACE : input, output,
                  static_cast<int>(count), dt, op, group->comm);
    return Status::Ok();
  }
  if (bytes * (g - 1) <= kWholeGatherAllReduceBytes) {
    recv_.resize(bytes * g);
    const int64_t p = found->membership.position;
    if (g <= kLinearMaxGroup) {
      ExchangeLinear(
          group->comm, g, p, kTagGather, requests_,
          [&](int64_t) { return std::pair{input, bytes}; },
          [&](int64_t q) { return std::pair{recv_.data() + q * bytes, bytes}; });
    } else {
      MPI_Allgather(input, static_cast<int>(bytes), MPI_BYTE, recv_.data(),
                    static_cast<int>(bytes), MPI_BYTE, group->comm);
    }
    for (int64_t k = 0; k < g; ++k) inputs[k] = recv_.data() + k * bytes;
    inputs[p] = input;  // `output` may alias it exactly, as ReduceInOrder allows
    ReduceInOrder(kind, type, inputs, output, count);
    return Status::Ok();
  }
  // Reduce-scatter by hand (position p gathers slice p of every
  // contribution), fold, then all-gather the folded slices.
  const int64_t per = (count + g - 1) / g;
  const int64_t p = found->membership.position;
  if (g <= kLinearMaxGroup) {
    AllReduceSlicedLinear(input, output, type, kind, group->comm, g, p, per, count);
    return Status::Ok();
  }
  const auto [my_begin, my_len] = SliceOf(count, per, p);
  std::vector<int> counts(g), displs(g), recv_counts(g), recv_displs(g);
  for (int64_t q = 0; q < g; ++q) {
    auto [b, len] = SliceOf(count, per, q);
    counts[q] = static_cast<int>(len * w);
    displs[q] = static_cast<int>(b * w);
    recv_counts[q] = static_cast<int>(my_len * w);
    recv_displs[q] = static_cast<int>(q * my_len * w);
  }
  recv_.resize(std::max<int64_t>(1, my_len * w * g));
  MPI_Alltoallv(input, counts.data(), displs.data(), MPI_BYTE, recv_.data(),
                recv_counts.data(), recv_displs.data(), MPI_BYTE, group->comm);
  for (int64_t k = 0; k < g; ++k) inputs[k] = recv_.data() + k * my_len * w;
  ReduceInOrder(kind, type, inputs, Bytes(output) + my_begin * w, my_len);
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, output, counts.data(), displs.data(), MPI_BYTE,
                 group->comm);
  return Status::Ok();
}

void MpiCommunicator::AllReduceSlicedLinear(const void* input, void* output,
                                            PrimitiveType type, ReductionKind kind,
                                            MPI_Comm comm, int64_t g, int64_t p, int64_t per,
                                            int64_t count) {
  const int64_t w = ByteWidth(type);
  // Every slice is cut into chunks of the same element count, so sender and
  // receiver agree on the pieces; chunk c of a slice starting at b covers
  // [b + c * chunk, min(b + (c + 1) * chunk, end)).
  const int64_t chunk = std::max<int64_t>(1, kPipelineChunkBytes / w);
  auto chunks = [&](int64_t len) { return (len + chunk - 1) / chunk; };
  const auto [my_begin, my_len] = SliceOf(count, per, p);
  const int64_t my_chunks = chunks(my_len);
  // Contributions to our slice land in recv_ at k * my_len (our own slot is
  // never written: our own part is read from `input` in place).
  recv_.resize(std::max<int64_t>(1, my_len * w * g));
  int64_t total = 2 * (g - 1) * my_chunks;
  for (int64_t q = 0; q < g; ++q)
    if (q != p) total += 2 * chunks(SliceOf(count, per, q).second);
  requests_.resize(total);
  MPI_Request* slice_recvs = requests_.data();            // [c * (g - 1) + j]
  MPI_Request* folded_sends = slice_recvs + (g - 1) * my_chunks;
  MPI_Request* other = folded_sends + (g - 1) * my_chunks;  // slice sends, folded recvs
  int n_other = 0;
  auto post_folded_recvs = [&] {
    for (int64_t q = 0; q < g; ++q) {
      if (q == p) continue;
      auto [b, len] = SliceOf(count, per, q);
      for (int64_t c = 0, n = chunks(len); c < n; ++c) {
        const int64_t e0 = b + c * chunk, e1 = std::min(b + len, e0 + chunk);
        MPI_Irecv(Bytes(output) + e0 * w, static_cast<int>((e1 - e0) * w), MPI_BYTE,
                  static_cast<int>(q), kTagFolded, comm, &other[n_other++]);
      }
    }
  };
  for (int64_t c = 0; c < my_chunks; ++c) {
    const int64_t e0 = c * chunk, e1 = std::min(my_len, e0 + chunk);
    int j = 0;
    for (int64_t q = 0; q < g; ++q) {
      if (q == p) continue;
      MPI_Irecv(recv_.data() + (q * my_len + e0) * w, static_cast<int>((e1 - e0) * w),
                MPI_BYTE, static_cast<int>(q), kTagSlices, comm,
                &slice_recvs[c * (g - 1) + j++]);
    }
  }
  // With `output` == `input` the folded slices from the others land where
  // our sends of their slices read from, so those receives wait until the
  // sends are done.
  const bool aliased = input == output;
  if (!aliased) post_folded_recvs();
  // Chunk by chunk, so that the first chunks are folded while the later
  // ones are still arriving, and are still in cache when folded and sent on.
  const int64_t max_chunks = [&] {
    int64_t m = 0;
    for (int64_t q = 0; q < g; ++q) m = std::max(m, chunks(SliceOf(count, per, q).second));
    return m;
  }();
  const int slice_sends_begin = n_other;
  for (int64_t c = 0; c < max_chunks; ++c) {
    for (int64_t q = 0; q < g; ++q) {
      if (q == p) continue;
      auto [b, len] = SliceOf(count, per, q);
      if (c >= chunks(len)) continue;
      const int64_t e0 = b + c * chunk, e1 = std::min(b + len, e0 + chunk);
      MPI_Isend(Bytes(input) + e0 * w, static_cast<int>((e1 - e0) * w), MPI_BYTE,
                static_cast<int>(q), kTagSlices, comm, &other[n_other++]);
    }
  }
  const int slice_sends_end = n_other;
  std::vector<const void*>& inputs = inputs_;
  inputs.resize(g);
  for (int64_t c = 0; c < my_chunks; ++c) {
    const int64_t e0 = c * chunk, e1 = std::min(my_len, e0 + chunk);
    MPI_Waitall(static_cast<int>(g - 1), &slice_recvs[c * (g - 1)], MPI_STATUSES_IGNORE);
    for (int64_t k = 0; k < g; ++k) inputs[k] = recv_.data() + (k * my_len + e0) * w;
    // `output` may alias `input` exactly, as ReduceInOrder allows.
    inputs[p] = Bytes(input) + (my_begin + e0) * w;
    unsigned char* folded = Bytes(output) + (my_begin + e0) * w;
    ReduceInOrder(kind, type, inputs, folded, e1 - e0);
    int j = 0;
    for (int64_t q = 0; q < g; ++q) {
      if (q == p) continue;
      MPI_Isend(folded, static_cast<int>((e1 - e0) * w), MPI_BYTE, static_cast<int>(q),
                kTagFolded, comm, &folded_sends[c * (g - 1) + j++]);
    }
  }
  if (aliased) {
    MPI_Waitall(slice_sends_end - slice_sends_begin, &other[slice_sends_begin],
                MPI_STATUSES_IGNORE);
    post_folded_recvs();
  }
  MPI_Waitall(static_cast<int>(total - (g - 1) * my_chunks), folded_sends,
              MPI_STATUSES_IGNORE);
}

Status MpiCommunicator::AllGather(const void* input, void* output,
                                  PrimitiveType type,
                                  std::span<const int64_t> dims,
                                  int64_t dimension, const CommGroups& groups) {
  MpiWait wait("all-gather");
  const int64_t w = ByteWidth(type);
  Status local = CheckDims(dims, dimension, "all-gather", "all_gather_dimension");
  Group* found = nullptr;
  if (local.ok()) local = Lookup(groups, "all-gather", true, &found);
  const int64_t g = local.ok() ? static_cast<int64_t>(found->membership.members.size()) : 1;
  const int64_t elems = local.ok() ? Product(dims, 0, dims.size()) : 0;
  if (local.ok()) local = CheckBytes(elems * w * g, "all-gather");
  const int64_t bytes = elems * w;
  const bool inlined = Inlined(bytes);
  MS_RETURN_IF_ERROR(Agree(Signature(kTagAllGather)
                               .Add(static_cast<uint64_t>(type))
                               .Add(dims)
                               .Add(dimension)
                               .Add(found != nullptr ? found->hash : 0)
                               .value(),
                           local, local.ok() ? input : nullptr, inlined ? bytes : -1));
  const Group* group = Comm(found);
  const int64_t outer = Product(dims, 0, dimension);
  const int64_t inner = Product(dims, dimension, dims.size()) * w;
  // Member q's block o goes to row o, column q of the output.
  auto place = [&](int64_t q, const unsigned char* from) {
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(Bytes(output) + (o * g + q) * inner, from + o * inner, inner);
  };
  if (inlined) {
    for (int64_t q = 0; q < g; ++q) place(q, Inline(found->membership.members[q]));
    return Status::Ok();
  }
  // Gathering along the outermost dimension is plain concatenation: the
  // blocks land straight in the output.
  const bool direct = outer == 1 && input != output;
  unsigned char* to = Bytes(output);
  if (!direct) {
    recv_.resize(std::max<int64_t>(1, bytes * g));
    to = recv_.data();
  }
  const int64_t p = found->membership.position;
  if (g <= kLinearMaxGroup) {
    ExchangeLinear(
        group->comm, g, p, kTagGather, requests_,
        [&](int64_t) { return std::pair{input, bytes}; },
        [&](int64_t q) { return std::pair{to + q * bytes, bytes}; });
    std::memcpy(to + p * bytes, input, bytes);  // `input` may be `output`
  } else {
    MPI_Allgather(input, static_cast<int>(bytes), MPI_BYTE, to, static_cast<int>(bytes),
                  MPI_BYTE, group->comm);
  }
  if (direct) return Status::Ok();
  for (int64_t q = 0; q < g; ++q) place(q, to + q * bytes);
  return Status::Ok();
}

Status MpiCommunicator::ReduceScatter(const void* input, void* output,
                                      PrimitiveType type,
                                      std::span<const int64_t> dims,
                                      int64_t dimension, ReductionKind kind,
                                      const CommGroups& groups) {
  MpiWait wait("reduce-scatter");
  const int64_t w = ByteWidth(type);
  Status local = CheckReduction(type, kind);
  if (local.ok()) local = CheckDims(dims, dimension, "reduce-scatter", "scatter_dimension");
  Group* found = nullptr;
  if (local.ok()) local = Lookup(groups, "reduce-scatter", true, &found);
  const int64_t g = local.ok() ? static_cast<int64_t>(found->membership.members.size()) : 1;
  if (local.ok() && dims[dimension] % g != 0)
    local = Status::Error("reduce-scatter: dimension " + std::to_string(dimension) +
                          " of size " + std::to_string(dims[dimension]) +
                          " is not divisible by the group size " + std::to_string(g));
  const int64_t elems = local.ok() ? Product(dims, 0, dims.size()) : 0;
  if (local.ok()) local = CheckBytes(elems * w, "reduce-scatter");
  const int64_t outer = local.ok() ? Product(dims, 0, dimension) : 0;
  const int64_t block =
      local.ok() ? dims[dimension] / g * Product(dims, dimension + 1, dims.size()) : 0;
  const int64_t part = outer * block * w;  // bytes for one destination
  // parts + q * part: what goes to the member at position q (block q of
  // every outer row). Scattering the outermost dim (outer 1), the parts are
  // contiguous in `input` and are sent from there; otherwise they are packed.
  const unsigned char* parts = Bytes(input);
  if (local.ok() && outer != 1) {
    send_.resize(std::max<int64_t>(1, part * g));
    for (int64_t q = 0; q < g; ++q)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(send_.data() + q * part + o * block * w,
                    Bytes(input) + (o * g + q) * block * w, block * w);
    parts = send_.data();
  }
  // Small parts ride in the agreement's envelopes, one exchange instead of
  // two.
  const bool inlined = InlinedPerDestination(part);
  if (local.ok() && inlined) {
    per_destination_.resize(size_ * kInlineBytes);
    for (int64_t k = 0; k < g; ++k)
      std::memcpy(per_destination_.data() + found->membership.members[k] * kInlineBytes,
                  parts + k * part, part);
  }
  MS_RETURN_IF_ERROR(Agree(Signature(kTagReduceScatter)
                               .Add(static_cast<uint64_t>(type))
                               .Add(static_cast<uint64_t>(kind))
                               .Add(dims)
                               .Add(dimension)
                               .Add(found != nullptr ? found->hash : 0)
                               .value(),
                           local, local.ok() && inlined ? per_destination_.data() : nullptr,
                           inlined ? part : -1, inlined));
  const Group* group = Comm(found);
  const int64_t p = found->membership.position;
  std::vector<const void*>& inputs = inputs_;
  inputs.resize(g);
  if (inlined) {  // every part for us, our own included, came with the agreement
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < g; ++k)
        inputs[k] = Inline(found->membership.members[k]) + o * block * w;
      ReduceInOrder(kind, type, inputs, Bytes(output) + o * block * w, block);
    }
    return Status::Ok();
  }
  recv_.resize(std::max<int64_t>(1, part * g));
  if (g <= kLinearMaxGroup) {
    ExchangeLinear(
        group->comm, g, p, kTagScatterParts, requests_,
        [&](int64_t q) { return std::pair{parts + q * part, part}; },
        [&](int64_t q) { return std::pair{recv_.data() + q * part, part}; });
  } else {
    MPI_Alltoall(parts, static_cast<int>(part), MPI_BYTE, recv_.data(), static_cast<int>(part),
                 MPI_BYTE, group->comm);
  }
  // Our own part is folded from `parts`. Every exchange is done before the
  // fold writes `output`; if `output` is `input` (outer 1), it is either
  // exactly our part (p = 0), which ReduceInOrder allows, or part 0, which
  // is no longer read.
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < g; ++k) inputs[k] = recv_.data() + k * part + o * block * w;
    inputs[p] = parts + p * part + o * block * w;
    ReduceInOrder(kind, type, inputs, Bytes(output) + o * block * w, block);
  }
  return Status::Ok();
}

Status MpiCommunicator::AllToAll(const void* input, void* output,
                                 PrimitiveType type,
                                 std::span<const int64_t> dims,
                                 int64_t split_dimension,
                                 int64_t concat_dimension,
                                 const CommGroups& groups) {
  MpiWait wait("all-to-all");
  const int64_t w = ByteWidth(type);
  Status local = CheckDims(dims, split_dimension, "all-to-all", "split_dimension");
  if (local.ok()) local = CheckDims(dims, concat_dimension, "all-to-all", "concat_dimension");
  Group* found = nullptr;
  if (local.ok()) local = Lookup(groups, "all-to-all", true, &found);
  const int64_t g = local.ok() ? static_cast<int64_t>(found->membership.members.size()) : 1;
  if (local.ok() && dims[split_dimension] % g != 0)
    local = Status::Error("all-to-all: split dimension " + std::to_string(split_dimension) +
                          " of size " + std::to_string(dims[split_dimension]) +
                          " is not divisible by the group size " + std::to_string(g));
  const int64_t elems = local.ok() ? Product(dims, 0, dims.size()) : 0;
  if (local.ok()) local = CheckBytes(elems * w, "all-to-all");
  // The geometry lives in reused vectors: small all-to-alls run on every
  // step and should not allocate.
  std::vector<int64_t>& block = a2a_.block;
  block.assign(dims.begin(), dims.end());
  if (local.ok()) block[split_dimension] /= g;
  std::vector<int64_t>& out_dims = a2a_.out_dims;
  out_dims.assign(block.begin(), block.end());
  if (local.ok()) out_dims[concat_dimension] *= g;
  const std::vector<int64_t>& in_strides = StridesInto(dims, a2a_.in_strides);
  const std::vector<int64_t>& block_strides = StridesInto(block, a2a_.block_strides);
  const std::vector<int64_t>& out_strides = StridesInto(out_dims, a2a_.out_strides);
  const int64_t part = elems / g * w;
  // Block q of the input (sent to member q) and block k of the output
  // (received from member k).
  auto in_block = [&](int64_t q) {
    return Bytes(input) + q * block[split_dimension] * in_strides[split_dimension] * w;
  };
  auto out_block = [&](int64_t k) {
    return Bytes(output) + k * block[concat_dimension] * out_strides[concat_dimension] * w;
  };
  // Small blocks ride in the agreement's envelopes, one exchange instead of
  // two.
  const bool inlined = InlinedPerDestination(part);
  if (local.ok() && inlined) {
    per_destination_.resize(size_ * kInlineBytes);
    for (int64_t q = 0; q < g; ++q)
      CopyStridedBlock(in_block(q), in_strides,
                       per_destination_.data() + found->membership.members[q] * kInlineBytes,
                       block_strides, block, w);
  }
  MS_RETURN_IF_ERROR(Agree(Signature(kTagAllToAll)
                               .Add(static_cast<uint64_t>(type))
                               .Add(dims)
                               .Add(split_dimension)
                               .Add(concat_dimension)
                               .Add(found != nullptr ? found->hash : 0)
                               .value(),
                           local, local.ok() && inlined ? per_destination_.data() : nullptr,
                           inlined ? part : -1, inlined));
  const Group* group = Comm(found);
  if (inlined) {  // every block for us, our own included, came with the agreement
    for (int64_t k = 0; k < g; ++k)
      CopyStridedBlock(Inline(found->membership.members[k]), block_strides, out_block(k),
                       out_strides, block, w);
    return Status::Ok();
  }
  if (g <= kLinearMaxGroup && input != output) {
    // One step of point-to-point messages. A block is contiguous when every
    // dim outside the split (concat) dim is 1; then it is sent from the
    // input (received into the output) without a packing copy.
    const int64_t p = found->membership.position;
    const bool send_direct = Product(dims, 0, split_dimension) == 1;
    const bool recv_direct = Product(out_dims, 0, concat_dimension) == 1;
    if (!send_direct) {
      send_.resize(std::max<int64_t>(1, part * g));
      for (int64_t q = 0; q < g; ++q)
        if (q != p)
          CopyStridedBlock(in_block(q), in_strides, send_.data() + q * part, block_strides,
                           block, w);
    }
    if (!recv_direct) recv_.resize(std::max<int64_t>(1, part * g));
    ExchangeLinear(
        group->comm, g, p, kTagAllToAllBlocks, requests_,
        [&](int64_t q) {
          return std::pair{send_direct ? in_block(q) : send_.data() + q * part, part};
        },
        [&](int64_t q) {
          return std::pair{recv_direct ? out_block(q) : recv_.data() + q * part, part};
        });
    CopyStridedBlock(in_block(p), in_strides, out_block(p), out_strides, block, w);
    if (!recv_direct)
      for (int64_t k = 0; k < g; ++k)
        if (k != p)
          CopyStridedBlock(recv_.data() + k * part, block_strides, out_block(k), out_strides,
                           block, w);
    return Status::Ok();
  }
  send_.resize(std::max<int64_t>(1, part * g));
  recv_.resize(std::max<int64_t>(1, part * g));
  for (int64_t q = 0; q < g; ++q)
    CopyStridedBlock(in_block(q), in_strides, send_.data() + q * part, block_strides, block, w);
  MPI_Alltoall(send_.data(), static_cast<int>(part), MPI_BYTE, recv_.data(),
               static_cast<int>(part), MPI_BYTE, group->comm);
  for (int64_t k = 0; k < g; ++k)
    CopyStridedBlock(recv_.data() + k * part, block_strides, out_block(k), out_strides, block,
                     w);
  return Status::Ok();
}

Status MpiCommunicator::AllToAllTuple(std::span<const void* const> inputs,
                                      std::span<void* const> outputs,
                                      PrimitiveType type, int64_t count,
                                      const CommGroups& groups) {
  MpiWait wait("all-to-all (tuple)");
  const int64_t w = ByteWidth(type);
  Status local;
  if (count < 0) local = Status::Error("all-to-all: negative element count");
  Group* found = nullptr;
  if (local.ok()) local = Lookup(groups, "all-to-all", true, &found);
  const int64_t g = local.ok() ? static_cast<int64_t>(found->membership.members.size()) : 1;
  if (local.ok() && (static_cast<int64_t>(inputs.size()) != g ||
                     static_cast<int64_t>(outputs.size()) != g))
    local = Status::Error("all-to-all: " + std::to_string(inputs.size()) +
                          " operands and " + std::to_string(outputs.size()) +
                          " results for a group of " + std::to_string(g) + " devices");
  if (local.ok()) local = CheckBytes(count * w * g, "all-to-all");
  MS_RETURN_IF_ERROR(Agree(Signature(kTagAllToAllTuple)
                               .Add(static_cast<uint64_t>(type))
                               .Add(count)
                               .Add(inputs.size())
                               .Add(found != nullptr ? found->hash : 0)
                               .value(),
                           local));
  const Group* group = Comm(found);
  const int64_t bytes = count * w;
  send_.resize(std::max<int64_t>(1, bytes * g));
  recv_.resize(std::max<int64_t>(1, bytes * g));
  for (int64_t k = 0; k < g; ++k) std::memcpy(send_.data() + k * bytes, inputs[k], bytes);
  MPI_Alltoall(send_.data(), static_cast<int>(bytes), MPI_BYTE, recv_.data(),
               static_cast<int>(bytes), MPI_BYTE, group->comm);
  for (int64_t k = 0; k < g; ++k) std::memcpy(outputs[k], recv_.data() + k * bytes, bytes);
  return Status::Ok();
}

Status MpiCommunicator::CollectivePermute(const void* input, void* output,
                                          PrimitiveType type, int64_t count,
                                          const SourceTargetPairs& pairs) {
  MpiWait wait("collective-permute");
  const int64_t w = ByteWidth(type);
  Status local = CheckSourceTargetPairs(pairs, size_);
  if (local.ok() && count < 0)
    local = Status::Error("collective-permute: negative element count");
  if (local.ok()) local = CheckBytes(count * w, "collective-permute");
  Signature sig(kTagPermute);
  sig.Add(static_cast<uint64_t>(type)).Add(count).Add(pairs.size());
  for (const auto& [s, t] : pairs) sig.Add(s).Add(t);
  const int64_t bytes = local.ok() ? count * w : 0;
  const bool inlined = Inlined(bytes);
  MS_RETURN_IF_ERROR(Agree(sig.value(), local, local.ok() ? input : nullptr,
                           inlined ? bytes : -1));
  int64_t source = -1, target = -1;
  for (const auto& [s, t] : pairs) {
    if (t == rank_) source = s;
    if (s == rank_) target = t;
  }
  if (inlined) {
    if (source >= 0)
      std::memmove(output, source == rank_ ? input : Inline(source), bytes);
    else if (bytes > 0)
      std::memset(output, 0, bytes);
    return Status::Ok();
  }
  constexpr int kTag = 4242;
  recv_.resize(std::max<int64_t>(1, bytes));
  MPI_Request requests[2];
  int num_requests = 0;
  if (source >= 0 && source != rank_)
    MPI_Irecv(recv_.data(), static_cast<int>(bytes), MPI_BYTE, static_cast<int>(source),
              kTag, MPI_COMM_WORLD, &requests[num_requests++]);
  if (target >= 0 && target != rank_)
    MPI_Isend(input, static_cast<int>(bytes), MPI_BYTE, static_cast<int>(target), kTag,
              MPI_COMM_WORLD, &requests[num_requests++]);
  MPI_Waitall(num_requests, requests, MPI_STATUSES_IGNORE);
  if (source == rank_) {
    if (input != output) std::memmove(output, input, bytes);
  } else if (source >= 0) {
    std::memcpy(output, recv_.data(), bytes);
  } else if (bytes > 0) {
    std::memset(output, 0, bytes);
  }
  return Status::Ok();
}

Status MpiCommunicator::Barrier() {
  MpiWait wait("barrier");
  MS_RETURN_IF_ERROR(Agree(Signature(kTagBarrier).value(), Status::Ok()));
  // The agreement's all-gather already waited for every rank.
  if (!check_agreement_) MPI_Barrier(MPI_COMM_WORLD);
  return Status::Ok();
}

void MpiCommunicator::Abort(const std::string& message) {
  std::fprintf(stderr, "error: device %lld failed: %s\n",
               static_cast<long long>(rank_), message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace meshsplit

#endif  // MESHSPLIT_BUILD_MPI_BACKEND
