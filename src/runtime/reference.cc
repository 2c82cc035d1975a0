// The N-device reference run of an unpartitioned module: hooks for the SPMD
// custom-calls, deterministic infeed data and outfeed records.
#include "runtime/reference.h"

#include <cstring>
#include <functional>

#include "ir/computation.h"
#include "runtime/device_layout.h"

namespace meshsplit {
namespace {

Sharding OrReplicated(const Instruction& instr) {
  return instr.has_sharding() ? *instr.sharding() : Sharding::Replicate();
}

// Per-device shape of a value of `global` shape under `sharding` (tile
// shapes leaf by leaf; manual / replicated / maximal leaves keep theirs).
Shape LocalShapeOf(const Shape& global, const std::vector<Sharding>& leaves, size_t& next) {
  if (global.IsTuple()) {
    std::vector<Shape> elems;
    for (const Shape& e : global.tuple_shapes()) elems.push_back(LocalShapeOf(e, leaves, next));
    return Shape::Tuple(std::move(elems));
  }
  Shape out = global;
  out.clear_layout();
  if (next < leaves.size()) {
    const Sharding& s = leaves[next];
    if (global.IsArray() && s.IsTiled()) out = Shape(global.element_type(), s.TileShape(global.dimensions()));
  }
  ++next;
  return out;
}

int64_t LeafCount(const Shape& s) {
  if (!s.IsTuple()) return 1;
  int64_t n = 0;
  for (const Shape& e : s.tuple_shapes()) n += LeafCount(e);
  return n;
}

// The sharding of the data part (tuple element 0) of an infeed / outfeed
// whose own sharding covers (data leaves..., token).
Sharding DataSharding(const Shape& data, const Sharding& s) {
  if (!s.IsTuple()) return s;
  std::vector<Sharding> leaves;
  int64_t want = LeafCount(data);
  for (int64_t i = 0; i < want && i < static_cast<int64_t>(s.tuple_elements().size()); ++i)
    leaves.push_back(s.tuple_elements()[i]);
  if (!data.IsTuple()) return leaves.empty() ? Sharding::Replicate() : leaves[0];
  return Sharding::Tuple(std::move(leaves));
}

class RunHooks : public DeviceHooks {
 public:
  RunHooks(int64_t device, Communicator& comm, FeedState* feeds, bool reference)
      : device_(device), comm_(comm), feeds_(feeds), reference_(reference) {}

  std::optional<StatusOr<Literal>> CustomCall(const Instruction& instr,
                                              const std::vector<const Literal*>& operands,
                                              const EvalContext&) override {
    if (!reference_) return std::nullopt;
    const std::string& target = instr.attrs().custom_call_target;
    if (target != "SPMDFullToShardShape" && target != "SPMDShardToFullShape")
      return std::nullopt;
    if (operands.size() != 1 || !instr.shape().IsArray() || !operands[0]->shape().IsArray())
      return StatusOr<Literal>(Status::Error("custom-call " + target + " takes one array"));
    return Relayout(instr, *operands[0]);
  }

  StatusOr<Literal> Infeed(const Instruction& instr, const EvalContext&) override {
    if (feeds_ == nullptr) return Status::Error("infeed has no data source");
    return feeds_->Infeed(instr, device_);
  }

  Status Outfeed(const Instruction& instr, const Literal& data, const EvalContext&) override {
    if (feeds_ == nullptr) return Status::Error("outfeed has no data sink");
    feeds_->RecordOutfeed(instr, device_, data);
    return Status::Ok();
  }

 private:
  // Both SPMD custom-calls keep the data where it is: device d's local
  // value in the partitioned program is its tile of the operand under the
  // operand's sharding, and that same buffer is its tile of the result
  // under the result's sharding. So the result's whole value for d's manual
  // group is assembled (by the result's sharding) from the operand tiles of
  // the devices of that group.
  StatusOr<Literal> Relayout(const Instruction& instr, const Literal& whole) {
    const int64_t n = comm_.num_devices();
    Sharding so = OrReplicated(*instr.operand(0));
    Sharding sr = OrReplicated(instr);
    if (so.IsTuple() || sr.IsTuple()) return Status::Error("tuple shardings are not supported here");
    Literal piece = whole;
    if (so.IsTiled()) {
      MS_ASSIGN_OR_RETURN(std::vector<DevicePlace> places,
                          PlaceDevices(so, whole.shape().dimensions(), n));
      if (!places[device_].holds)
        return Status::Error("device " + std::to_string(device_) +
                             " holds no piece of the operand (" + so.ToString(false) + ")");
      piece = ExtractTile(whole, places[device_],
                          Shape(whole.element_type(), so.TileShape(whole.shape().dimensions())),
                          /*poison=*/false);
    }
    std::vector<uint8_t> all(static_cast<size_t>(piece.size_bytes() * n));
    std::vector<int64_t> dims = {1, piece.size_bytes()};
    MS_RETURN_IF_ERROR(comm_.AllGather(piece.raw(), all.data(), PrimitiveType::U8, dims, 0, {}));
    std::vector<Literal> pieces;
    std::vector<const Literal*> ptrs;
    Shape ps = piece.shape();
    ps.clear_layout();
    for (int64_t d = 0; d < n; ++d) {
      Literal l(ps);
      if (l.size_bytes() > 0)
        std::memcpy(l.raw(), all.data() + d * piece.size_bytes(), piece.size_bytes());
      pieces.push_back(std::move(l));
    }
    for (const Literal& l : pieces) ptrs.push_back(&l);
    StatusOr<GroupValues> g = AssembleGroups(ptrs, instr.shape(), sr);
    if (!g.ok())
      return Status::Error(instr.attrs().custom_call_target + " cannot lay the operand's tiles (" +
                           so.ToString(false) + ") out by " + sr.ToString(false) + ": " +
                           g.status().message());
    int64_t group = g->group_of_device[device_];
    if (group < 0)
      return Status::Error("device " + std::to_string(device_) + " holds no piece of " +
                           sr.ToString(false));
    return std::move(g->values[group]);
  }

  int64_t device_;
  Communicator& comm_;
  FeedState* feeds_;
  bool reference_;
};

}  // namespace

std::string DeviceReferenceReason(const Module& module) {
  for (const auto& c : module.computations()) {
    for (const auto& i : c->instructions()) {
      switch (i->opcode()) {
        case Opcode::kAllReduce: case Opcode::kAllGather: case Opcode::kReduceScatter:
        case Opcode::kAllToAll: case Opcode::kCollectivePermute: case Opcode::kPartitionId:
        case Opcode::kReplicaId: case Opcode::kInfeed: case Opcode::kOutfeed:
          return std::string(OpcodeName(i->opcode())) + " %" + i->name();
        // Transfers and group collectives exchange data between devices.
        case Opcode::kSend: case Opcode::kRecv: case Opcode::kCollectiveBroadcast:
        case Opcode::kRaggedAllToAll:
          return std::string(OpcodeName(i->opcode())) + " %" + i->name();
        // The async collective starts, likewise.
        case Opcode::kAllReduceStart: case Opcode::kAllGatherStart:
        case Opcode::kCollectivePermuteStart:
          return std::string(OpcodeName(i->opcode())) + " %" + i->name();
        case Opcode::kCustomCall:
          if (i->attrs().custom_call_target == "SPMDFullToShardShape" ||
              i->attrs().custom_call_target == "SPMDShardToFullShape")
            return i->attrs().custom_call_target + " %" + i->name();
          break;
        default:
          break;
      }
      if (i->has_sharding() && HasManualOrUnreduced(*i->sharding()))
        return "%" + i->name() + " with sharding " + i->sharding()->ToString(false);
    }
  }
  return "";
}

FeedState::FeedState(const Module& original, int64_t num_devices, uint64_t seed, bool reference)
    : n_(num_devices), seed_(seed), reference_(reference) {
  for (const auto& c : original.computations())
    for (const auto& i : c->instructions())
      if (i->opcode() == Opcode::kInfeed) infeeds_.emplace(i->name(), i.get());
  infeed_calls_.resize(n_);
  outfeeds_.resize(n_);
}

const Instruction* FeedState::OriginalInfeed(const std::string& name) const {
  auto it = infeeds_.find(name);
  if (it != infeeds_.end()) return it->second;
  // The partitioner may have renamed or split the infeed; with one infeed
  // in the original there is no ambiguity.
  return infeeds_.size() == 1 ? infeeds_.begin()->second : nullptr;
}

StatusOr<Literal> FeedState::Infeed(const Instruction& instr, int64_t device) {
  const Instruction* orig = OriginalInfeed(instr.name());
  if (orig == nullptr)
    return Status::Error("infeed %" + instr.name() + " has no counterpart in the original module");
  if (!orig->shape().IsTuple() || orig->shape().tuple_size() != 2 || !instr.shape().IsTuple() ||
      instr.shape().tuple_size() != 2)
    return Status::Error("infeed must return (data, token)");
  int64_t call = infeed_calls_[device][instr.name()]++;
  const Shape& global = orig->shape().tuple_shapes(0);
  Sharding s = DataSharding(global, OrReplicated(*orig));
  std::vector<Sharding> leaves = LeafShardings(global, s);
  size_t next = 0;
  Shape tile = LocalShapeOf(global, leaves, next);
  std::vector<Literal> ref, part;
  uint64_t key = seed_ * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>()(orig->name()) ^
                 (static_cast<uint64_t>(call) << 32);
  MS_RETURN_IF_ERROR(MakeDeviceValues(global, tile, s, n_, key, ref, part));
  // A partitioned infeed receives what it asks for: its piece when it has
  // the piece's shape (XLA's convention), the whole value when the
  // partitioner kept the global shape (a replicated infeed).
  const bool whole = reference_ || instr.shape().tuple_shapes(0).Compatible(global);
  Literal data = whole ? std::move(ref[device])
                       : FitToShape(part[device], instr.shape().tuple_shapes(0));
  std::vector<Literal> out;
  out.push_back(std::move(data));
  out.push_back(Literal(Shape::Token()));
  return Literal::MakeTuple(std::move(out));
}

void FeedState::RecordOutfeed(const Instruction& instr, int64_t device, Literal data) {
  outfeeds_[device].push_back({instr.name(), std::move(data)});
}

SpmdRunOptions ReferenceRunOptions(FeedState* feeds, bool reference) {
  SpmdRunOptions o;
  o.single_replica_collectives = true;
  o.make_hooks = [feeds, reference](int64_t device, Communicator& comm) {
    return std::unique_ptr<DeviceHooks>(new RunHooks(device, comm, feeds, reference));
  };
  return o;
}

}  // namespace meshsplit
