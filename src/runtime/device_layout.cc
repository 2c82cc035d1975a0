// Device placement for manual / unreduced shardings, consistent inputs for
// the reference and partitioned runs, and per-manual-group assembly.
#include "runtime/device_layout.h"

#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "collectives/collectives.h"
#include "ir/float8.h"
#include "runtime/executor.h"

namespace meshsplit {
namespace {

std::vector<int64_t> Extent(const DevicePlace& p) {
  std::vector<int64_t> e(p.offset.size());
  for (size_t i = 0; i < e.size(); ++i) e[i] = std::max<int64_t>(0, p.limit[i] - p.offset[i]);
  return e;
}

bool IsFloat(PrimitiveType t) {
  return t == PrimitiveType::F16 || t == PrimitiveType::BF16 || t == PrimitiveType::F32 ||
         t == PrimitiveType::F64;
}

// acc[i] += x[i] elementwise over arrays of the same shape (pred: or;
// integers wrap).
void AddInto(Literal& acc, const Literal& x) {
  PrimitiveType t = acc.element_type();
  int64_t n = acc.element_count();
  if (IsFloat(t)) {
    for (int64_t i = 0; i < n; ++i) acc.SetDouble(i, acc.GetDouble(i) + x.GetDouble(i));
  } else if (t == PrimitiveType::PRED) {
    for (int64_t i = 0; i < n; ++i) acc.SetInt(i, (acc.GetInt(i) | x.GetInt(i)) & 1);
  } else if (IsUnsignedInteger(t)) {
    for (int64_t i = 0; i < n; ++i)
      acc.SetInt(i, static_cast<int64_t>(acc.GetUint(i) + x.GetUint(i)));
  } else {
    for (int64_t i = 0; i < n; ++i)
      acc.SetInt(i, static_cast<int64_t>(static_cast<uint64_t>(acc.GetInt(i)) +
                                         static_cast<uint64_t>(x.GetInt(i))));
  }
}

Shape NoLayout(Shape s) {
  s.clear_layout();
  return s;
}

// Inputs for one array leaf.
Status MakeLeaf(const Shape& global_in, const Shape& local_in, const Sharding& s, int64_t n,
                uint64_t seed, std::vector<Literal>& ref, std::vector<Literal>& part) {
  Shape global = NoLayout(global_in), local = NoLayout(local_in);
  if (!global.IsArray()) {
    for (int64_t d = 0; d < n; ++d) {
      ref.push_back(Literal(global));
      part.push_back(Literal(local));
    }
    return Status::Ok();
  }
  if (local.element_type() != global.element_type())
    return Status::Error("local shape " + local.ToString(false) + " does not match " +
                         global.ToString(false));
  MS_ASSIGN_OR_RETURN(std::vector<DevicePlace> places, PlaceDevices(s, global.dimensions(), n));
  for (int64_t d = 0; d < n; ++d) {
    if (!places[d].holds) continue;
    std::vector<int64_t> want = global.dimensions();
    if (s.IsTiled()) want = s.TileShape(global.dimensions());
    if (want != local.dimensions())
      return Status::Error("per-device shape " + local.ToString(false) + " is not the tile of " +
                           global.ToString(false) + " under " + s.ToString(false));
  }
  auto rng_for = [&](uint64_t a, uint64_t b) {
    return std::mt19937_64(seed * 0x9E3779B97F4A7C15ull + a * 0xBF58476D1CE4E5B9ull + b + 1);
  };
  // Logical value per manual group.
  std::map<int64_t, Literal> whole;
  bool unreduced = false;
  for (const DevicePlace& p : places) unreduced |= p.unreduced_size > 1;
  for (const DevicePlace& p : places) {
    if (!p.holds || whole.count(p.manual_group)) continue;
    Literal w(global);
    if (!unreduced) {
      std::mt19937_64 rng = rng_for(static_cast<uint64_t>(p.manual_group), 0);
      FillRandomValues(w, rng);
    }
    whole.emplace(p.manual_group, std::move(w));
  }
  // Unreduced pieces, keyed by (tile, manual group, position).
  std::map<std::tuple<int64_t, int64_t, int64_t>, Literal> pieces;
  if (unreduced) {
    for (const DevicePlace& p : places) {
      if (!p.holds) continue;
      auto key = std::make_tuple(p.tile, p.manual_group, p.unreduced_index);
      if (pieces.count(key)) continue;
      Literal piece(local);
      FillPoison(piece);
      Literal valid(Shape(global.element_type(), Extent(p)));
      std::mt19937_64 rng = rng_for(static_cast<uint64_t>(p.manual_group),
                                    static_cast<uint64_t>(p.tile * 4099 + p.unreduced_index + 1));
      FillRandomValues(valid, rng);
      DevicePlace origin = p;
      std::fill(origin.offset.begin(), origin.offset.end(), 0);
      origin.limit = Extent(p);
      CopyTileIn(valid, origin.offset, origin.limit, piece);
      // The logical value's tile is the sum of the pieces.
      Literal& w = whole.at(p.manual_group);
      Literal current(valid.shape());
      CopyTileOut(w, p.offset, p.limit, current);
      AddInto(current, valid);
      CopyTileIn(current, p.offset, p.limit, w);
      pieces.emplace(key, std::move(piece));
    }
  }
  for (int64_t d = 0; d < n; ++d) {
    const DevicePlace& p = places[d];
    if (!p.holds) {
      // A maximal value lives on one device; the reference still sees it
      // whole everywhere.
      ref.push_back(whole.begin()->second);
      Literal l(local);
      FillPoison(l);
      part.push_back(std::move(l));
      continue;
    }
    ref.push_back(whole.at(p.manual_group));
    if (unreduced) {
      part.push_back(pieces.at(std::make_tuple(p.tile, p.manual_group, p.unreduced_index)));
    } else {
      Literal l(local);
      FillPoison(l);
      CopyTileOut(whole.at(p.manual_group), p.offset, p.limit, l);
      part.push_back(std::move(l));
    }
  }
  return Status::Ok();
}

Status MakeValue(const Shape& global, const Shape& local, const std::vector<Sharding>& leaves,
                 size_t& next_leaf, int64_t n, uint64_t seed, std::vector<Literal>& ref,
                 std::vector<Literal>& part) {
  if (global.IsTuple()) {
    if (!local.IsTuple() || local.tuple_size() != global.tuple_size())
      return Status::Error("tuple " + global.ToString(false) + " does not match local " +
                           local.ToString(false));
    std::vector<std::vector<Literal>> r(n), p(n);
    for (int i = 0; i < global.tuple_size(); ++i) {
      std::vector<Literal> er, ep;
      MS_RETURN_IF_ERROR(MakeValue(global.tuple_shapes(i), local.tuple_shapes(i), leaves,
                                   next_leaf, n, seed * 31 + static_cast<uint64_t>(i) + 7, er,
                                   ep));
      for (int64_t d = 0; d < n; ++d) {
        r[d].push_back(std::move(er[d]));
        p[d].push_back(std::move(ep[d]));
      }
    }
    for (int64_t d = 0; d < n; ++d) {
      ref.push_back(Literal::MakeTuple(std::move(r[d])));
      part.push_back(Literal::MakeTuple(std::move(p[d])));
    }
    return Status::Ok();
  }
  if (next_leaf >= leaves.size()) return Status::Error("sharding has too few leaves");
  return MakeLeaf(global, local, leaves[next_leaf++], n, seed, ref, part);
}

void CollectLeaves(const Shape& shape, const Sharding& s, size_t& next,
                   std::vector<Sharding>& out) {
  if (shape.IsTuple()) {
    for (const Shape& e : shape.tuple_shapes()) CollectLeaves(e, s, next, out);
    return;
  }
  if (s.IsTuple())
    out.push_back(next < s.tuple_elements().size() ? s.tuple_elements()[next] : Sharding::Unknown());
  else
    out.push_back(s);
  ++next;
}

}  // namespace

Status MakeDeviceValues(const Shape& global, const Shape& local, const Sharding& sharding,
                        int64_t n, uint64_t seed, std::vector<Literal>& reference,
                        std::vector<Literal>& partitioned) {
  std::vector<Sharding> leaves = LeafShardings(global, sharding);
  size_t next = 0;
  return MakeValue(global, local, leaves, next, n, seed, reference, partitioned);
}

Literal ExtractTile(const Literal& full, const DevicePlace& place, const Shape& local_shape,
                    bool poison) {
  Literal out(NoLayout(local_shape));
  if (poison) FillPoison(out);
  CopyTileOut(full, place.offset, place.limit, out);
  return out;
}

Literal FitToShape(const Literal& value, const Shape& shape_in) {
  Shape shape = NoLayout(shape_in);
  if (shape.IsTuple()) {
    std::vector<Literal> elems;
    for (int i = 0; i < shape.tuple_size(); ++i)
      elems.push_back(value.shape().IsTuple() && i < static_cast<int>(value.elements().size())
                          ? FitToShape(value.elements()[i], shape.tuple_shapes(i))
                          : Literal(shape.tuple_shapes(i)));
    return Literal::MakeTuple(std::move(elems));
  }
  Literal out(shape);
  if (!shape.IsArray()) return out;
  FillPoison(out);
  if (!value.shape().IsArray() || value.element_type() != shape.element_type() ||
      value.shape().rank() != shape.rank())
    return out;
  DevicePlace p;
  p.offset.assign(shape.rank(), 0);
  p.limit.resize(shape.rank());
  for (int64_t i = 0; i < shape.rank(); ++i)
    p.limit[i] = std::min(shape.dimensions()[i], value.shape().dimensions()[i]);
  CopyTileOut(value, p.offset, p.limit, out);
  return out;
}

StatusOr<std::vector<DevicePlace>> PlaceDevices(const Sharding& s,
                                                const std::vector<int64_t>& dims, int64_t n) {
  std::vector<DevicePlace> out(n);
  std::vector<int64_t> zero(dims.size(), 0);
  for (int64_t d = 0; d < n; ++d) {
    out[d].offset = zero;
    out[d].limit = dims;
  }
  if (s.IsTuple() || s.IsUnknown())
    return Status::Error("cannot place sharding " + s.ToString(false) + " on an array");
  if (s.IsManual()) {
    for (int64_t d = 0; d < n; ++d) out[d].manual_group = d;
    return out;
  }
  if (s.IsUnreduced()) {
    for (int64_t d = 0; d < n; ++d) {
      out[d].unreduced_index = d;
      out[d].unreduced_size = n;
    }
    return out;
  }
  if (s.IsMaximal()) {
    if (s.device() < 0 || s.device() >= n)
      return Status::Error("maximal sharding names device " + std::to_string(s.device()) +
                           " of " + std::to_string(n));
    for (int64_t d = 0; d < n; ++d) out[d].holds = d == s.device();
    return out;
  }
  if (!s.IsTiled()) return out;  // replicated
  MS_RETURN_IF_ERROR(s.Validate(static_cast<int64_t>(dims.size()), n));
  const TileAssignment& ta = s.tile_assignment();
  const int64_t data_rank = s.TiledDataRank();
  const std::vector<SubgroupType>& types = s.subgroup_types();
  for (int64_t d = 0; d < n; ++d) {
    std::optional<std::vector<int64_t>> index = ta.IndexOfDevice(d);
    if (!index.has_value()) {
      out[d].holds = false;
      continue;
    }
    out[d].offset = s.TileOffsetForDevice(dims, d);
    out[d].limit = s.TileLimitForDevice(dims, d);
    int64_t tile = 0, manual = 0, unred = 0, unred_size = 1;
    for (int64_t i = 0; i < data_rank; ++i) tile = tile * ta.dim(i) + (*index)[i];
    for (size_t j = 0; j < types.size(); ++j) {
      int64_t dim = data_rank + static_cast<int64_t>(j);
      if (types[j] == SubgroupType::kManual) manual = manual * ta.dim(dim) + (*index)[dim];
      if (types[j] == SubgroupType::kUnreduced) {
        unred = unred * ta.dim(dim) + (*index)[dim];
        unred_size *= ta.dim(dim);
      }
    }
    out[d].tile = tile;
    out[d].manual_group = manual;
    out[d].unreduced_index = unred;
    out[d].unreduced_size = unred_size;
  }
  return out;
}

bool HasManualOrUnreduced(const Sharding& s) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements())
      if (HasManualOrUnreduced(e)) return true;
    return false;
  }
  return s.IsManual() || s.IsUnreduced() ||
         (s.IsTiled() && (s.HasManualSubgroup() || s.SubgroupSize(SubgroupType::kUnreduced) > 1));
}

void FillRandomValues(Literal& lit, std::mt19937_64& rng) {
  if (lit.shape().IsTuple()) {
    for (Literal& e : lit.elements()) FillRandomValues(e, rng);
    return;
  }
  if (!lit.shape().IsArray()) return;
  PrimitiveType t = lit.element_type();
  int64_t n = lit.element_count();
  if (t == PrimitiveType::F32 || t == PrimitiveType::F64) {
    // Typed stores instead of SetDouble's per-element type switch; the draws
    // and their rounding are the same, so the inputs do not change.
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    if (t == PrimitiveType::F32) {
      float* p = lit.data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(d(rng));
    } else {
      double* p = lit.data<double>();
      for (int64_t i = 0; i < n; ++i) p[i] = d(rng);
    }
  } else if (IsFloat(t)) {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (int64_t i = 0; i < n; ++i) lit.SetDouble(i, d(rng));
  } else if (t == PrimitiveType::PRED) {
    for (int64_t i = 0; i < n; ++i) lit.SetInt(i, static_cast<int64_t>(rng() & 1));
  } else if (IsSignedInteger(t) && ByteWidth(t) >= 1 && t != PrimitiveType::S2 &&
             t != PrimitiveType::S4) {
    std::uniform_int_distribution<int64_t> d(-4, 4);
    for (int64_t i = 0; i < n; ++i) lit.SetInt(i, d(rng));
  } else if (IsUnsignedInteger(t) && t != PrimitiveType::U2 && t != PrimitiveType::U4) {
    std::uniform_int_distribution<int64_t> d(0, 8);
    for (int64_t i = 0; i < n; ++i) lit.SetInt(i, d(rng));
  } else if (t == PrimitiveType::F8E8M0FNU) {
    // An exponent-only scale type: random powers of two around 1.
    std::uniform_int_distribution<int> d(-3, 3);
    for (int64_t i = 0; i < n; ++i) lit.SetDouble(i, std::ldexp(1.0, d(rng)));
  } else if (IsF8Type(t)) {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (int64_t i = 0; i < n; ++i) lit.SetDouble(i, d(rng));
  } else if (t == PrimitiveType::C64 || t == PrimitiveType::C128) {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (int64_t i = 0; i < 2 * n; ++i) {
      if (t == PrimitiveType::C64) lit.data<float>()[i] = static_cast<float>(d(rng));
      else lit.data<double>()[i] = d(rng);
    }
  }
  // Other types (sub-byte) stay zero.
}

std::vector<Sharding> LeafShardings(const Shape& shape, const Sharding& sharding) {
  std::vector<Sharding> out;
  size_t next = 0;
  CollectLeaves(shape, sharding, next, out);
  return out;
}

StatusOr<DeviceInputs> MakeDeviceInputs(const Computation& original_entry,
                                        const Computation& partitioned_entry, int64_t n,
                                        uint64_t seed) {
  if (original_entry.parameter_count() != partitioned_entry.parameter_count())
    return Status::Error("the partitioned entry takes " +
                         std::to_string(partitioned_entry.parameter_count()) +
                         " parameters but the original takes " +
                         std::to_string(original_entry.parameter_count()));
  DeviceInputs in;
  in.reference.resize(n);
  in.partitioned.resize(n);
  for (int p = 0; p < original_entry.parameter_count(); ++p) {
    const Instruction* op = original_entry.parameter(p);
    const Instruction* pp = partitioned_entry.parameter(p);
    if (op == nullptr || pp == nullptr)
      return Status::Error("parameter " + std::to_string(p) + " is missing");
    Sharding s = ShardingOrReplicated(*pp);
    std::vector<Sharding> leaves = LeafShardings(op->shape(), s);
    std::vector<Literal> ref, part;
    size_t next = 0;
    Status st = MakeValue(op->shape(), pp->shape(), leaves, next, n,
                          seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(p) + 1, ref, part);
    if (!st.ok())
      return Status::Error("parameter " + std::to_string(p) + " (%" + op->name() +
                           "): " + st.message());
    for (int64_t d = 0; d < n; ++d) {
      in.reference[d].push_back(std::move(ref[d]));
      in.partitioned[d].push_back(std::move(part[d]));
    }
  }
  return in;
}

StatusOr<GroupValues> AssembleGroups(const std::vector<const Literal*>& per_device,
                                     const Shape& global_in, const Sharding& s) {
  const int64_t n = static_cast<int64_t>(per_device.size());
  Shape global = NoLayout(global_in);
  if (!global.IsArray()) return Status::Error("AssembleGroups: not an array");
  MS_ASSIGN_OR_RETURN(std::vector<DevicePlace> places, PlaceDevices(s, global.dimensions(), n));
  std::vector<int64_t> tile_dims =
      s.IsTiled() ? s.TileShape(global.dimensions()) : global.dimensions();
  GroupValues out;
  out.group_of_device.assign(n, -1);
  std::map<int64_t, int64_t> group_index;  // manual group -> index in out.values
  // First holder of each (group, tile, unreduced position).
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> holder;
  for (int64_t d = 0; d < n; ++d) {
    const DevicePlace& p = places[d];
    if (!p.holds) continue;
    const Literal& l = *per_device[d];
    if (!l.shape().IsArray() || l.element_type() != global.element_type() ||
        l.shape().dimensions() != tile_dims)
      return Status::Error("device " + std::to_string(d) + " holds " + l.shape().ToString(false) +
                           ", expected the tile " + Shape(global.element_type(), tile_dims).ToString(false) +
                           " of " + global.ToString(false) + " under " + s.ToString(false));
    auto [git, new_group] =
        group_index.emplace(p.manual_group, static_cast<int64_t>(out.values.size()));
    if (new_group) {
      out.values.push_back(Literal(global));
      out.first_device.push_back(d);
    }
    out.group_of_device[d] = git->second;
    auto key = std::make_tuple(p.manual_group, p.tile, p.unreduced_index);
    auto [hit, first] = holder.emplace(key, d);
    std::vector<int64_t> extent = Extent(p);
    if (!first) {
      if (PackedBlock(l, extent) != PackedBlock(*per_device[hit->second], extent))
        return Status::Error("devices " + std::to_string(hit->second) + " and " +
                             std::to_string(d) + " hold the same piece (tile " +
                             std::to_string(p.tile) + ") with different values");
      continue;
    }
    if (p.unreduced_size > 1) continue;  // summed below, in position order
    CopyTileIn(l, p.offset, p.limit, out.values[git->second]);
  }
  // Partial values of an unreduced group add up: per (group, tile), the
  // holders of positions 0, 1, ... in that order.
  std::map<std::pair<int64_t, int64_t>, std::map<int64_t, int64_t>> partials;
  for (const auto& [key, d] : holder)
    if (places[d].unreduced_size > 1)
      partials[{std::get<0>(key), std::get<1>(key)}][std::get<2>(key)] = d;
  for (const auto& [gt, by_position] : partials) {
    const DevicePlace& p = places[by_position.begin()->second];
    if (static_cast<int64_t>(by_position.size()) != p.unreduced_size)
      return Status::Error("only " + std::to_string(by_position.size()) + " of " +
                           std::to_string(p.unreduced_size) +
                           " members of an unreduced group hold tile " + std::to_string(p.tile));
    std::vector<int64_t> extent = Extent(p);
    DevicePlace origin = p;
    std::fill(origin.offset.begin(), origin.offset.end(), 0);
    origin.limit = extent;
    Literal sum(Shape(global.element_type(), extent));
    bool first = true;
    for (const auto& [position, d] : by_position) {
      Literal mine(Shape(global.element_type(), extent));
      CopyTileOut(*per_device[d], origin.offset, origin.limit, mine);
      if (first) sum = std::move(mine);
      else AddInto(sum, mine);
      first = false;
    }
    CopyTileIn(sum, p.offset, p.limit, out.values[group_index.at(gt.first)]);
  }
  if (out.values.empty()) return Status::Error("no device holds the value");
  return out;
}

}  // namespace meshsplit
