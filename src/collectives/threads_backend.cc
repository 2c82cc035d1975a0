// The `threads` backend. Every collective runs the same protocol:
//   1. each device publishes its arguments and buffer pointers in its slot,
//   2. rendezvous; every device checks that all slots agree (same op, type,
//      sizes, groups) and that no device reported a bad argument, so all
//      devices reach the same verdict without further communication,
//   3. each device reads what it needs from the others' buffers and writes
//      only its own output,
//   4. rendezvous, so that no buffer is reused while someone still reads it.
// Large all-reduces split the work: each device reduces its own 1/G slice of
// the result (reading every contribution in group order) and writes it into
// every member's output, so the whole costs about one memcpy of the result
// per device.
#include "collectives/threads_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <thread>

#include <pthread.h>

#include "collectives/reduction.h"
#include "support/check.h"

namespace meshsplit {
namespace {

using Clock = std::chrono::steady_clock;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

enum class OpCode : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kAllToAllTuple,
  kCollectivePermute,
  kBarrier,
};

const char* OpName(OpCode op) {
  switch (op) {
    case OpCode::kAllReduce:
      return "all-reduce";
    case OpCode::kAllGather:
      return "all-gather";
    case OpCode::kReduceScatter:
      return "reduce-scatter";
    case OpCode::kAllToAll:
      return "all-to-all";
    case OpCode::kAllToAllTuple:
      return "all-to-all (tuple)";
    case OpCode::kCollectivePermute:
      return "collective-permute";
    case OpCode::kBarrier:
      return "barrier";
  }
  return "?";
}

// What every device must agree on for one collective. Spans and pointers
// refer to the caller's arguments, alive while the call blocks.
struct OpDesc {
  OpCode op = OpCode::kBarrier;
  PrimitiveType type = PrimitiveType::F32;
  ReductionKind kind = ReductionKind::kAdd;
  int64_t count = 0;
  int64_t dim_a = 0;  // gather/scatter/split dimension; tuple arity
  int64_t dim_b = 0;  // concat dimension
  std::span<const int64_t> dims;
  const CommGroups* groups = nullptr;
  const SourceTargetPairs* pairs = nullptr;
};

bool SameDesc(const OpDesc& a, const OpDesc& b) {
  if (a.op != b.op || a.type != b.type || a.kind != b.kind ||
      a.count != b.count || a.dim_a != b.dim_a || a.dim_b != b.dim_b)
    return false;
  if (!std::equal(a.dims.begin(), a.dims.end(), b.dims.begin(), b.dims.end()))
    return false;
  if ((a.groups == nullptr) != (b.groups == nullptr)) return false;
  if (a.groups && *a.groups != *b.groups) return false;
  if ((a.pairs == nullptr) != (b.pairs == nullptr)) return false;
  if (a.pairs && *a.pairs != *b.pairs) return false;
  return true;
}

std::string Describe(const OpDesc& d) {
  std::string s = OpName(d.op);
  if (d.op == OpCode::kBarrier) return s;
  s += " ";
  s += PrimitiveTypeName(d.type);
  s += "[";
  if (d.dims.empty()) {
    s += std::to_string(d.count);
  } else {
    for (size_t i = 0; i < d.dims.size(); ++i)
      s += (i ? "," : "") + std::to_string(d.dims[i]);
  }
  s += "]";
  if (d.op == OpCode::kAllReduce || d.op == OpCode::kReduceScatter)
    s += " " + std::string(ReductionKindName(d.kind));
  if (d.op == OpCode::kAllGather || d.op == OpCode::kReduceScatter ||
      d.op == OpCode::kAllToAll)
    s += " dim=" + std::to_string(d.dim_a);
  if (d.op == OpCode::kAllToAll) s += "," + std::to_string(d.dim_b);
  if (d.groups) {
    s += " groups={";
    for (size_t g = 0; g < d.groups->size(); ++g) {
      s += g ? ",{" : "{";
      for (size_t i = 0; i < (*d.groups)[g].size(); ++i)
        s += (i ? "," : "") + std::to_string((*d.groups)[g][i]);
      s += "}";
    }
    s += "}";
  }
  if (d.pairs) s += " pairs=" + std::to_string(d.pairs->size());
  return s;
}

bool Overlaps(const void* a, int64_t na, const void* b, int64_t nb) {
  if (na <= 0 || nb <= 0) return false;
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + static_cast<uintptr_t>(nb) &&
         pb < pa + static_cast<uintptr_t>(na);
}

const unsigned char* Bytes(const void* p) {
  return static_cast<const unsigned char*>(p);
}
unsigned char* Bytes(void* p) { return static_cast<unsigned char*>(p); }

// All-reduces of at least this many bytes use the sliced algorithm; below,
// local writes beat spreading the (tiny) work.
constexpr int64_t kSlicedAllReduceBytes = 32 * 1024;

// [begin, end) of the slice of `count` elements owned by group position p,
// cut at cache-line multiples so that no two devices write one line.
std::pair<int64_t, int64_t> SliceBounds(int64_t count, int64_t elem_bytes,
                                        int64_t num_slices, int64_t p) {
  int64_t unit = std::max<int64_t>(1, 64 / std::max<int64_t>(1, elem_bytes));
  int64_t units = (count + unit - 1) / unit;
  int64_t per = (units + num_slices - 1) / num_slices * unit;
  return {std::min(count, p * per), std::min(count, (p + 1) * per)};
}

}  // namespace

struct ThreadsWorld::Slot {
  alignas(64) OpDesc desc;
  const void* input = nullptr;
  void* output = nullptr;
  std::span<const void* const> inputs;  // tuple all-to-all
  std::string error;                    // this device's argument error
  alignas(64) int64_t spin_budget_ns = 0;  // Rendezvous's adaptive spin time
};

// One device's endpoint; see the protocol at the top of the file.
class ThreadsCommunicator final : public Communicator {
 public:
  ThreadsCommunicator(ThreadsWorld& world, int64_t device)
      : world_(world), device_(device) {
    for (int64_t d = 0; d < world.num_devices_; ++d)
      all_devices_.members.push_back(d);
    all_devices_.position = device;
  }

  int64_t device() const override { return device_; }
  int64_t num_devices() const override { return world_.num_devices_; }

  Status AllReduce(const void* input, void* output, PrimitiveType type,
                   int64_t count, ReductionKind kind,
                   const CommGroups& groups) override;
  Status AllGather(const void* input, void* output, PrimitiveType type,
                   std::span<const int64_t> dims, int64_t dimension,
                   const CommGroups& groups) override;
  Status ReduceScatter(const void* input, void* output, PrimitiveType type,
                       std::span<const int64_t> dims, int64_t dimension,
                       ReductionKind kind, const CommGroups& groups) override;
  Status AllToAll(const void* input, void* output, PrimitiveType type,
                  std::span<const int64_t> dims, int64_t split_dimension,
                  int64_t concat_dimension,
                  const CommGroups& groups) override;
  Status AllToAllTuple(std::span<const void* const> inputs,
                       std::span<void* const> outputs, PrimitiveType type,
                       int64_t count, const CommGroups& groups) override;
  Status CollectivePermute(const void* input, void* output, PrimitiveType type,
                           int64_t count,
                           const SourceTargetPairs& pairs) override;
  Status Barrier() override;
  void Abort(const std::string& message) override {
    world_.Abort(device_, message);
  }

 private:
  ThreadsWorld::Slot& slot(int64_t device) { return world_.slots_[device]; }

  // Steps 1-2 of the protocol: `local` is this device's verdict on its own
  // arguments. Returns OK only if every device's arguments were fine and all
  // agree; otherwise every device returns an error (after a closing
  // rendezvous, so the slots stay untouched while others still read them).
  Status Start(const OpDesc& desc, const void* input, void* output,
               const Status& local);
  // Step 4.
  Status Finish() { return world_.Rendezvous(device_); }

  // Publishes a private copy of `bytes` bytes of `input` when it overlaps
  // this device's output, so that writing the output cannot corrupt what the
  // others read.
  const void* Detach(const void* input, int64_t bytes, const void* output,
                     int64_t out_bytes);

  // FindGroup with a one-entry cache: a program repeats the same few group
  // lists, and checking them afresh costs allocations on every small
  // collective. Sets *group on success.
  Status LookupGroup(const CommGroups& groups, std::string_view op,
                     bool require_equal_sizes, const GroupMembership** group);

  ThreadsWorld& world_;
  const int64_t device_;
  GroupMembership all_devices_;  // the group of `replica_groups={}`
  CommGroups cached_groups_;
  bool cached_equal_sizes_ = false;
  std::optional<GroupMembership> cached_membership_;
  std::vector<unsigned char> scratch_;
  std::vector<const void*> tuple_inputs_;
  std::vector<const void*> reduce_inputs_;
  std::vector<void*> reduce_outputs_;
};

Status ThreadsCommunicator::Start(const OpDesc& desc, const void* input,
                                  void* output, const Status& local) {
  ThreadsWorld::Slot& me = slot(device_);
  me.desc = desc;
  me.input = input;
  me.output = output;
  me.error = local.ok() ? std::string() : local.message();
  MS_RETURN_IF_ERROR(world_.Rendezvous(device_));

  std::string verdict;
  if (!me.error.empty()) {
    verdict = me.error;
  } else {
    const int64_t n = world_.num_devices_;
    for (int64_t d = 0; d < n && verdict.empty(); ++d) {
      const ThreadsWorld::Slot& other = slot(d);
      if (!other.error.empty())
        verdict = other.error + " (reported by device " + std::to_string(d) + ")";
    }
    for (int64_t d = 0; d < n && verdict.empty(); ++d) {
      if (!SameDesc(slot(d).desc, desc))
        verdict = "devices disagree on a collective: device " +
                  std::to_string(device_) + " calls " + Describe(desc) +
                  ", device " + std::to_string(d) + " calls " +
                  Describe(slot(d).desc);
    }
  }
  if (verdict.empty()) return Status::Ok();
  MS_RETURN_IF_ERROR(world_.Rendezvous(device_));
  return Status::Error(verdict);
}

Status ThreadsCommunicator::LookupGroup(const CommGroups& groups,
                                        std::string_view op,
                                        bool require_equal_sizes,
                                        const GroupMembership** group) {
  if (groups.empty()) {
    *group = &all_devices_;
    return Status::Ok();
  }
  // Equal sizes is the stricter check, so a list that passed it also passes
  // without it.
  if (!cached_membership_ || groups != cached_groups_ ||
      (require_equal_sizes && !cached_equal_sizes_)) {
    StatusOr<GroupMembership> found =
        FindGroup(groups, num_devices(), device_, op, require_equal_sizes);
    if (!found.ok()) return found.status();
    cached_groups_ = groups;
    cached_equal_sizes_ = require_equal_sizes;
    cached_membership_ = std::move(found).value();
  }
  *group = &*cached_membership_;
  return Status::Ok();
}

const void* ThreadsCommunicator::Detach(const void* input, int64_t bytes,
                                        const void* output,
                                        int64_t out_bytes) {
  if (!Overlaps(input, bytes, output, out_bytes)) return input;
  if (static_cast<int64_t>(scratch_.size()) < bytes) scratch_.resize(bytes);
  std::memcpy(scratch_.data(), input, bytes);
  return scratch_.data();
}

Status ThreadsCommunicator::AllReduce(const void* input, void* output,
                                      PrimitiveType type, int64_t count,
                                      ReductionKind kind,
                                      const CommGroups& groups) {
  OpDesc desc;
  desc.op = OpCode::kAllReduce;
  desc.type = type;
  desc.kind = kind;
  desc.count = count;
  desc.groups = &groups;
  Status local = CheckReduction(type, kind);
  if (local.ok() && count < 0)
    local = Status::Error("all-reduce: negative element count");
  const GroupMembership* group = nullptr;
  if (local.ok()) {
    local = LookupGroup(groups, "all-reduce", /*require_equal_sizes=*/false, &group);
  }
  const int64_t w = ByteWidth(type);
  const int64_t bytes = local.ok() ? count * w : 0;
  const int64_t g = local.ok() ? static_cast<int64_t>(group->members.size()) : 1;
  // Large: each member reduces its own 1/G slice of the result and writes it
  // straight into every member's output, so no data is read twice and no
  // extra rendezvous is needed. Safe in place: a slice of any buffer is only
  // touched by its owner, which reads a chunk of every input before writing
  // that chunk of the outputs. Small: every member reduces everything into
  // its own output (no remote writes), which needs its input kept apart from
  // its output. With G == 1 nobody else reads the input. A partial overlap
  // (neither apart nor the same buffer) is always copied aside.
  const bool sliced = g > 1 && bytes >= kSlicedAllReduceBytes;
  const void* published = input;
  if (local.ok() && (input != output || (!sliced && g > 1)))
    published = Detach(input, bytes, output, bytes);
  MS_RETURN_IF_ERROR(Start(desc, published, output, local));

  const std::vector<int64_t>& members = group->members;
  auto [begin, end] =
      sliced ? SliceBounds(count, w, g, group->position) : std::pair{int64_t{0}, count};
  reduce_inputs_.resize(g);
  for (int64_t k = 0; k < g; ++k)
    reduce_inputs_[k] = Bytes(slot(members[k]).input) + begin * w;
  reduce_outputs_.clear();
  if (sliced) {
    for (int64_t m : members)
      reduce_outputs_.push_back(Bytes(slot(m).output) + begin * w);
  } else {
    reduce_outputs_.push_back(Bytes(output));
  }
  ReduceInOrder(kind, type, reduce_inputs_, reduce_outputs_, end - begin);
  return Finish();
}

Status ThreadsCommunicator::AllGather(const void* input, void* output,
                                      PrimitiveType type,
                                      std::span<const int64_t> dims,
                                      int64_t dimension,
                                      const CommGroups& groups) {
  OpDesc desc;
  desc.op = OpCode::kAllGather;
  desc.type = type;
  desc.dims = dims;
  desc.dim_a = dimension;
  desc.groups = &groups;
  Status local = CheckDims(dims, dimension, "all-gather", "all_gather_dimension");
  const GroupMembership* group = nullptr;
  if (local.ok()) {
    local = LookupGroup(groups, "all-gather", /*require_equal_sizes=*/true, &group);
  }
  const int64_t w = ByteWidth(type);
  const int64_t g = local.ok() ? static_cast<int64_t>(group->members.size()) : 1;
  const int64_t in_elems = local.ok() ? Product(dims, 0, dims.size()) : 0;
  const void* published =
      local.ok() ? Detach(input, in_elems * w, output, in_elems * g * w) : input;
  MS_RETURN_IF_ERROR(Start(desc, published, output, local));

  // View the output as [outer, G, inner]: member q fills [:, q, :].
  const int64_t outer = Product(dims, 0, dimension);
  const int64_t inner_bytes = Product(dims, dimension, dims.size()) * w;
  for (int64_t q = 0; q < g; ++q) {
    const unsigned char* src = Bytes(slot(group->members[q]).input);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(Bytes(output) + (o * g + q) * inner_bytes,
                  src + o * inner_bytes, inner_bytes);
  }
  return Finish();
}

Status ThreadsCommunicator::ReduceScatter(const void* input, void* output,
                                          PrimitiveType type,
                                          std::span<const int64_t> dims,
                                          int64_t dimension,
                                          ReductionKind kind,
                                          const CommGroups& groups) {
  OpDesc desc;
  desc.op = OpCode::kReduceScatter;
  desc.type = type;
  desc.kind = kind;
  desc.dims = dims;
  desc.dim_a = dimension;
  desc.groups = &groups;
  Status local = CheckReduction(type, kind);
  if (local.ok()) local = CheckDims(dims, dimension, "reduce-scatter", "scatter_dimension");
  const GroupMembership* group = nullptr;
  if (local.ok()) {
    local = LookupGroup(groups, "reduce-scatter", /*require_equal_sizes=*/true, &group);
  }
  const int64_t g = local.ok() ? static_cast<int64_t>(group->members.size()) : 1;
  if (local.ok() && dims[dimension] % g != 0)
    local = Status::Error("reduce-scatter: dimension " +
                          std::to_string(dimension) + " of size " +
                          std::to_string(dims[dimension]) +
                          " is not divisible by the group size " +
                          std::to_string(g));
  const int64_t w = ByteWidth(type);
  const int64_t in_elems = local.ok() ? Product(dims, 0, dims.size()) : 0;
  const void* published =
      local.ok() ? Detach(input, in_elems * w, output, in_elems / g * w) : input;
  MS_RETURN_IF_ERROR(Start(desc, published, output, local));

  // View the input as [outer, G, block]: position p reduces [:, p, :].
  const int64_t outer = Product(dims, 0, dimension);
  const int64_t block = dims[dimension] / g * Product(dims, dimension + 1, dims.size());
  const int64_t p = group->position;
  reduce_inputs_.resize(g);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < g; ++k)
      reduce_inputs_[k] =
          Bytes(slot(group->members[k]).input) + ((o * g + p) * block) * w;
    ReduceInOrder(kind, type, reduce_inputs_, Bytes(output) + o * block * w,
                  block);
  }
  return Finish();
}

Status ThreadsCommunicator::AllToAll(const void* input, void* output,
                                     PrimitiveType type,
                                     std::span<const int64_t> dims,
                                     int64_t split_dimension,
                                     int64_t concat_dimension,
                                     const CommGroups& groups) {
  OpDesc desc;
  desc.op = OpCode::kAllToAll;
  desc.type = type;
  desc.dims = dims;
  desc.dim_a = split_dimension;
  desc.dim_b = concat_dimension;
  desc.groups = &groups;
  Status local = CheckDims(dims, split_dimension, "all-to-all", "split_dimension");
  if (local.ok())
    local = CheckDims(dims, concat_dimension, "all-to-all", "concat_dimension");
  const GroupMembership* group = nullptr;
  if (local.ok()) {
    local = LookupGroup(groups, "all-to-all", /*require_equal_sizes=*/true, &group);
  }
  const int64_t g = local.ok() ? static_cast<int64_t>(group->members.size()) : 1;
  if (local.ok() && dims[split_dimension] % g != 0)
    local = Status::Error("all-to-all: split dimension " +
                          std::to_string(split_dimension) + " of size " +
                          std::to_string(dims[split_dimension]) +
                          " is not divisible by the group size " +
                          std::to_string(g));
  const int64_t w = ByteWidth(type);
  const int64_t bytes = local.ok() ? Product(dims, 0, dims.size()) * w : 0;
  const void* published = local.ok() ? Detach(input, bytes, output, bytes) : input;
  MS_RETURN_IF_ERROR(Start(desc, published, output, local));

  std::vector<int64_t> block(dims.begin(), dims.end());
  block[split_dimension] /= g;
  std::vector<int64_t> out_dims = block;
  out_dims[concat_dimension] *= g;
  const std::vector<int64_t> in_dims(dims.begin(), dims.end());
  const std::vector<int64_t> src_strides = RowMajorStrides(in_dims);
  const std::vector<int64_t> dst_strides = RowMajorStrides(out_dims);
  const int64_t p = group->position;
  for (int64_t k = 0; k < g; ++k) {
    const unsigned char* src =
        Bytes(slot(group->members[k]).input) +
        p * block[split_dimension] * src_strides[split_dimension] * w;
    unsigned char* dst = Bytes(output) + k * block[concat_dimension] *
                                             dst_strides[concat_dimension] * w;
    CopyStridedBlock(src, src_strides, dst, dst_strides, block, w);
  }
  return Finish();
}

Status ThreadsCommunicator::AllToAllTuple(std::span<const void* const> inputs,
                                          std::span<void* const> outputs,
                                          PrimitiveType type, int64_t count,
                                          const CommGroups& groups) {
  OpDesc desc;
  desc.op = OpCode::kAllToAllTuple;
  desc.type = type;
  desc.count = count;
  desc.dim_a = static_cast<int64_t>(inputs.size());
  desc.groups = &groups;
  Status local;
  if (count < 0) local = Status::Error("all-to-all: negative element count");
  const GroupMembership* group = nullptr;
  if (local.ok()) {
    local = LookupGroup(groups, "all-to-all", /*require_equal_sizes=*/true, &group);
  }
  const int64_t g = local.ok() ? static_cast<int64_t>(group->members.size()) : 1;
  if (local.ok() && (static_cast<int64_t>(inputs.size()) != g ||
                     static_cast<int64_t>(outputs.size()) != g))
    local = Status::Error("all-to-all: " + std::to_string(inputs.size()) +
                          " operands and " + std::to_string(outputs.size()) +
                          " results for a group of " + std::to_string(g) +
                          " devices");
  const int64_t bytes = count * ByteWidth(type);
  // Copy every operand aside if any of them overlaps any result.
  tuple_inputs_.assign(inputs.begin(), inputs.end());
  if (local.ok()) {
    bool overlap = false;
    for (const void* in : inputs)
      for (void* out : outputs) overlap = overlap || Overlaps(in, bytes, out, bytes);
    if (overlap) {
      scratch_.resize(bytes * g);
      for (int64_t k = 0; k < g; ++k) {
        std::memcpy(scratch_.data() + k * bytes, inputs[k], bytes);
        tuple_inputs_[k] = scratch_.data() + k * bytes;
      }
    }
  }
  slot(device_).inputs = tuple_inputs_;
  MS_RETURN_IF_ERROR(Start(desc, nullptr, nullptr, local));

  const int64_t p = group->position;
  for (int64_t k = 0; k < g; ++k)
    std::memcpy(outputs[k], slot(group->members[k]).inputs[p], bytes);
  return Finish();
}

Status ThreadsCommunicator::CollectivePermute(const void* input, void* output,
                                              PrimitiveType type,
                                              int64_t count,
                                              const SourceTargetPairs& pairs) {
  OpDesc desc;
  desc.op = OpCode::kCollectivePermute;
  desc.type = type;
  desc.count = count;
  desc.pairs = &pairs;
  Status local = CheckSourceTargetPairs(pairs, num_devices());
  if (local.ok() && count < 0)
    local = Status::Error("collective-permute: negative element count");
  const int64_t bytes = local.ok() ? count * ByteWidth(type) : 0;
  const void* published = local.ok() ? Detach(input, bytes, output, bytes) : input;
  MS_RETURN_IF_ERROR(Start(desc, published, output, local));

  const std::pair<int64_t, int64_t>* mine = nullptr;
  for (const auto& pair : pairs)
    if (pair.second == device_) mine = &pair;
  if (mine)
    std::memcpy(output, slot(mine->first).input, bytes);
  else if (bytes > 0)
    std::memset(output, 0, bytes);
  return Finish();
}

Status ThreadsCommunicator::Barrier() {
  OpDesc desc;
  desc.op = OpCode::kBarrier;
  MS_RETURN_IF_ERROR(Start(desc, nullptr, nullptr, Status::Ok()));
  return Finish();
}

// ---------------------------------------------------------------------------

ThreadsWorld::ThreadsWorld(int64_t num_devices)
    : num_devices_(std::max<int64_t>(1, num_devices)),
      slots_(new Slot[std::max<int64_t>(1, num_devices)]) {
  // With a core per device a waiter's partner is usually running, so
  // spinning a while wins; with more devices than cores the partner may need
  // our core, so give it up almost at once. Either way a long wait ends in a
  // futex sleep, which on an overloaded machine (other processes competing
  // for the cores) is what gets the waiter scheduled again promptly.
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  if (num_devices_ <= static_cast<int64_t>(hw)) {
    spin_microseconds_ = 20;
    yield_microseconds_ = 100;
  } else {
    spin_microseconds_ = 2;
    yield_microseconds_ = 30;
  }
  for (int64_t d = 0; d < num_devices_; ++d) {
    communicators_.push_back(std::make_unique<ThreadsCommunicator>(*this, d));
    slots_[d].spin_budget_ns = spin_microseconds_ * 1000;
  }
}

ThreadsWorld::~ThreadsWorld() = default;

void ThreadsWorld::set_wait_policy(int64_t spin_microseconds,
                                   int64_t yield_microseconds) {
  spin_microseconds_ = std::max<int64_t>(0, spin_microseconds);
  yield_microseconds_ = std::max<int64_t>(0, yield_microseconds);
  for (int64_t d = 0; d < num_devices_; ++d)
    slots_[d].spin_budget_ns = spin_microseconds_ * 1000;
}

Communicator& ThreadsWorld::communicator(int64_t device) {
  MS_CHECK(device >= 0 && device < num_devices_);
  return *communicators_[device];
}

void ThreadsWorld::Abort(int64_t device, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    abort_message_ = "device " + std::to_string(device) + " failed: " + message;
  }
  aborted_.store(true, std::memory_order_seq_cst);
  WakeSleepers();
}

void ThreadsWorld::MarkFinished(int64_t device) {
  int64_t expected = -1;
  finished_device_.compare_exchange_strong(expected, device,
                                           std::memory_order_seq_cst);
  WakeSleepers();
}

void ThreadsWorld::WakeSleepers() {
  wake_word_.fetch_add(1, std::memory_order_seq_cst);
  wake_word_.notify_all();
}

Status ThreadsWorld::AbortedStatus() const {
  std::lock_guard<std::mutex> lock(abort_mu_);
  return Status::Error("collective aborted: " + abort_message_);
}

Status ThreadsWorld::Rendezvous(int64_t device) {
  if (aborted_.load(std::memory_order_acquire)) return AbortedStatus();
  // The generation cannot move on before this device arrives, so reading it
  // first is race-free.
  const uint64_t gen = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == num_devices_) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.store(gen + 1, std::memory_order_seq_cst);
    // seq_cst pairs with the sleeper's increment-then-recheck below: either
    // it sees the new generation or we see it counted.
    if (sleepers_.load(std::memory_order_seq_cst) > 0) WakeSleepers();
    return Status::Ok();
  }
  // Adaptive budget: a wait that ended within the full spin time shows the
  // partners run alongside us, so the budget grows back towards the full
  // time; a longer wait (a partner descheduled by an overloaded machine, or
  // busy in a long computation) halves it. Under overload the budget thus
  // falls to nothing and waiters sleep at once, which is what lets the
  // scheduler run the partner they wait for; spinning would only delay it.
  int64_t& budget_ns = slots_[device].spin_budget_ns;
  const int64_t max_spin_ns = spin_microseconds_ * 1000;
  const Clock::time_point arrival = Clock::now();
  const Clock::time_point spin_end = arrival + std::chrono::nanoseconds(budget_ns);
  const Clock::time_point yield_end =
      spin_end + std::chrono::nanoseconds(
                     max_spin_ns > 0 ? budget_ns * yield_microseconds_ * 1000 / max_spin_ns
                                     : yield_microseconds_ * 1000);
  auto released = [&](bool within_spin) {
    if (!within_spin)
      within_spin = Clock::now() - arrival <= std::chrono::nanoseconds(max_spin_ns);
    budget_ns = within_spin ? std::min(max_spin_ns, 2 * budget_ns + 1000) : budget_ns / 2;
    return Status::Ok();
  };
  bool spinning = budget_ns > 0;
  for (int64_t i = 0;; ++i) {
    if (generation_.load(std::memory_order_acquire) != gen) return released(spinning);
    if (aborted_.load(std::memory_order_acquire)) return AbortedStatus();
    int64_t left = finished_device_.load(std::memory_order_acquire);
    if (left >= 0) {
      // The finished device may have left right after releasing the last
      // rendezvous; only a generation that is still ours is a real hang.
      if (generation_.load(std::memory_order_acquire) != gen)
        return released(false);
      Abort(left, "it returned while device " + std::to_string(device) +
                      " waits in a collective (the devices' collective "
                      "sequences differ)");
      return AbortedStatus();
    }
    if (spinning) {
      CpuRelax();
      // Reading the clock costs ~20 ns; every 64 pauses is plenty.
      if ((i & 63) == 63 && Clock::now() >= spin_end) spinning = false;
      continue;
    }
    if (Clock::now() < yield_end) {
      std::this_thread::yield();
      continue;
    }
    // Long wait: sleep on the futex until a releaser, an abort or a finishing
    // device bumps wake_word_; then loop to re-check everything.
    const uint32_t word = wake_word_.load(std::memory_order_seq_cst);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (generation_.load(std::memory_order_seq_cst) == gen &&
        !aborted_.load(std::memory_order_seq_cst) &&
        finished_device_.load(std::memory_order_seq_cst) < 0)
      wake_word_.wait(word, std::memory_order_seq_cst);
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

// ---------------------------------------------------------------------------

Status RunOnThreads(ThreadsWorld& world,
                    const std::function<Status(int device, Communicator&)>& fn) {
  const int64_t n = world.num_devices();
  // Devices that finished a previous run on this world are back.
  world.finished_device_.store(-1, std::memory_order_release);
  std::mutex mu;
  Status first_error;
  auto record = [&](int64_t d, const Status& s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) first_error = s;
    }
    world.Abort(d, s.message());
  };
  auto body = [&](int64_t d) {
    Status s;
    try {
      s = fn(static_cast<int>(d), world.communicator(d));
    } catch (const std::exception& e) {
      s = Status::Error(std::string("exception on device ") +
                        std::to_string(d) + ": " + e.what());
    } catch (...) {
      s = Status::Error("unknown exception on device " + std::to_string(d));
    }
    if (!s.ok())
      record(d, s);
    else
      world.MarkFinished(d);
  };
  // pthreads rather than std::thread, to choose the stack size.
  struct Start {
    decltype(body)* run;
    int64_t device;
  };
  std::vector<Start> starts(n > 0 ? n : 0);
  std::vector<pthread_t> threads;
  threads.reserve(n > 0 ? n - 1 : 0);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, static_cast<size_t>(DeviceThreadStackBytes(n)));
  for (int64_t d = 1; d < n; ++d) {
    starts[d] = {&body, d};
    pthread_t t;
    const int rc = pthread_create(
        &t, &attr,
        [](void* arg) -> void* {
          auto* start = static_cast<Start*>(arg);
          (*start->run)(start->device);
          return nullptr;
        },
        &starts[d]);
    if (rc != 0) {
      // Devices already started would wait forever for this one.
      record(d, Status::Error("cannot start the thread of virtual device " +
                              std::to_string(d) + " of " + std::to_string(n) + ": " +
                              std::strerror(rc)));
      break;
    }
    threads.push_back(t);
  }
  pthread_attr_destroy(&attr);
  if (static_cast<int64_t>(threads.size()) == n - 1) body(0);  // the calling thread is device 0
  for (pthread_t t : threads) pthread_join(t, nullptr);
  return first_error;
}

int64_t DeviceThreadStackBytes(int64_t num_devices) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  const int64_t budget = int64_t{1} << 30;
  if (num_devices <= 1) return 8 * kMiB;
  return std::clamp<int64_t>(budget / (num_devices - 1) / kMiB * kMiB, 1 * kMiB, 8 * kMiB);
}

Status CheckThreadsBackendDevices(int64_t num_devices) {
  if (num_devices < 1)
    return Status::Error("the threads backend needs at least one device, got " +
                         std::to_string(num_devices));
  if (num_devices > kMaxThreadsBackendDevices)
    return Status::Error(std::to_string(num_devices) +
                         " devices is over the threads backend's limit of " +
                         std::to_string(kMaxThreadsBackendDevices) +
                         " virtual devices (one thread each); the mpi backend runs more");
  return Status::Ok();
}

Status RunOnThreads(int num_devices,
                    const std::function<Status(int device, Communicator&)>& fn) {
  if (Status s = CheckThreadsBackendDevices(num_devices); !s.ok()) return s;
  ThreadsWorld world(num_devices);
  return RunOnThreads(world, fn);
}

}  // namespace meshsplit
