// Sharding algebra for the partitioner (see sharding_helpers.h).
#include "partitioner/sharding_helpers.h"

namespace meshsplit::spmd {

bool HasUnreduced(const Sharding& s) {
  return s.kind() == Sharding::Kind::kUnreduced ||
         s.SubgroupDim(SubgroupType::kUnreduced) >= 0;
}

Sharding ReduceUnreduced(const Sharding& s) {
  if (s.kind() == Sharding::Kind::kUnreduced) return Sharding::Replicate();
  if (!s.IsTiled()) return s;
  std::vector<SubgroupType> types = s.subgroup_types();
  for (SubgroupType& t : types)
    if (t == SubgroupType::kUnreduced) t = SubgroupType::kReplicated;
  return Sharding::Subgroup(s.tile_assignment(), types);
}

Sharding NormalizeForPartitioning(const Sharding& s) {
  if (s.IsTuple()) {
    std::vector<Sharding> elems;
    for (const Sharding& e : s.tuple_elements())
      elems.push_back(NormalizeForPartitioning(e));
    return Sharding::Tuple(std::move(elems));
  }
  if (s.IsMaximal() || s.IsUnknown()) return Sharding::Replicate();
  Sharding out = s;
  out.set_metadata("");
  out.set_shard_group(std::nullopt);
  return out;
}

namespace {

int64_t CountLeaves(const Shape& shape) {
  if (!shape.IsTuple()) return 1;
  int64_t n = 0;
  for (const Shape& e : shape.tuple_shapes()) n += CountLeaves(e);
  return n;
}

// Builds the nested form of `shape`'s sharding from its flat leaf list,
// consuming leaves from `next`.
Sharding NestLeaves(const std::vector<Sharding>& leaves, size_t& next, const Shape& shape) {
  if (!shape.IsTuple()) return next < leaves.size() ? leaves[next++] : Sharding::Replicate();
  std::vector<Sharding> elems;
  for (const Shape& e : shape.tuple_shapes()) elems.push_back(NestLeaves(leaves, next, e));
  return Sharding::Tuple(std::move(elems));
}

void FlattenInto(const Sharding& s, std::vector<Sharding>& out) {
  if (!s.IsTuple()) {
    out.push_back(s);
    return;
  }
  for (const Sharding& e : s.tuple_elements()) FlattenInto(e, out);
}

}  // namespace

Sharding NestTupleSharding(const Sharding& s, const Shape& shape) {
  if (!s.IsTuple() || !shape.IsTuple()) return s;
  const size_t n = s.tuple_elements().size();
  if (n == static_cast<size_t>(shape.tuple_size())) return s;
  bool flat = true;
  for (const Sharding& e : s.tuple_elements()) flat &= !e.IsTuple();
  if (!flat || static_cast<int64_t>(n) != CountLeaves(shape)) return s;
  size_t next = 0;
  return NestLeaves(s.tuple_elements(), next, shape);
}

Sharding FlattenTupleSharding(const Sharding& s) {
  if (!s.IsTuple()) return s;
  bool nested = false;
  for (const Sharding& e : s.tuple_elements()) nested |= e.IsTuple();
  if (!nested) return s;
  std::vector<Sharding> leaves;
  FlattenInto(s, leaves);
  return Sharding::Tuple(std::move(leaves));
}

Sharding ElementSharding(const Sharding& s_in, const Shape& shape, int64_t index) {
  if (!s_in.IsTuple()) return s_in;
  const Sharding s = NestTupleSharding(s_in, shape);
  if (index < static_cast<int64_t>(s.tuple_elements().size()))
    return s.tuple_elements()[index];
  return Sharding::Replicate();
}

Shape LocalShape(const Shape& global, const Sharding& s) {
  if (global.IsTuple()) {
    std::vector<Shape> elems;
    for (int i = 0; i < global.tuple_size(); ++i)
      elems.push_back(LocalShape(global.tuple_shapes(i), ElementSharding(s, global, i)));
    return Shape::Tuple(std::move(elems));
  }
  if (!global.IsArray() || s.IsTuple()) return global;
  Shape out(global.element_type(), s.TileShape(global.dimensions()));
  return out;
}

}  // namespace meshsplit::spmd
