// PSharding: factories with XLA's normalisation rules, text parsing and
// printing, and the semantic normal form used to compare shardings.
#include "propagation/psharding.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <sstream>

#include "support/check.h"

namespace meshsplit::propagation {

namespace {

int64_t Product(const std::vector<int64_t>& v, size_t begin = 0,
                size_t end = std::string::npos) {
  int64_t p = 1;
  end = std::min(end, v.size());
  for (size_t i = begin; i < end; ++i) p *= v[i];
  return p;
}

}  // namespace

DeviceList DeviceList::Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  DeviceList d(std::move(v));
  d.iota_ = true;
  return d;
}

// --- TileArray ---------------------------------------------------------------

int64_t TileArray::num_elements() const { return Product(dims); }

TileArray TileArray::Reshape(std::vector<int64_t> new_dims) const {
  MS_CHECK_MSG(Product(new_dims) == num_elements(), "bad tile reshape");
  TileArray r;
  r.dims = std::move(new_dims);
  r.devices = devices;
  return r;
}

TileArray TileArray::Transpose(const std::vector<int64_t>& perm) const {
  MS_CHECK(perm.size() == dims.size());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == (int64_t)i;
  if (identity) return *this;
  TileArray r;
  r.dims.resize(dims.size());
  for (size_t i = 0; i < perm.size(); ++i) r.dims[i] = dims[perm[i]];
  // Moving only size-1 dims keeps the row-major order: share the list.
  bool order_kept = true;
  int64_t last = -1;
  for (size_t i = 0; i < perm.size() && order_kept; ++i) {
    if (dims[perm[i]] == 1) continue;
    order_kept = perm[i] > last;
    last = perm[i];
  }
  if (order_kept) {
    r.devices = devices;
    return r;
  }
  std::vector<int64_t>& out = r.devices.mut();
  out.resize(devices.size());
  std::vector<int64_t> src_strides(dims.size(), 1);
  for (int i = (int)dims.size() - 2; i >= 0; --i)
    src_strides[i] = src_strides[i + 1] * dims[i + 1];
  std::vector<int64_t> idx(dims.size(), 0);
  const int n = (int)dims.size();
  for (size_t k = 0; k < devices.size(); ++k) {
    int64_t src = 0;
    for (int i = 0; i < n; ++i) src += idx[i] * src_strides[perm[i]];
    out[k] = devices[src];
    for (int i = n - 1; i >= 0; --i) {
      if (++idx[i] < r.dims[i]) break;
      idx[i] = 0;
    }
  }
  return r;
}

TileArray TileArray::Slice(const std::vector<int64_t>& starts,
                           const std::vector<int64_t>& limits) const {
  TileArray r;
  const int n = (int)dims.size();
  r.dims.resize(n);
  for (int i = 0; i < n; ++i) r.dims[i] = limits[i] - starts[i];
  int64_t count = Product(r.dims);
  std::vector<int64_t> idx(n, 0);
  for (int64_t k = 0; k < count; ++k) {
    std::vector<int64_t> src(n);
    for (int i = 0; i < n; ++i) src[i] = idx[i] + starts[i];
    r.devices.push_back(At(src));
    for (int i = n - 1; i >= 0; --i) {
      if (++idx[i] < r.dims[i]) break;
      idx[i] = 0;
    }
  }
  return r;
}

int64_t TileArray::At(const std::vector<int64_t>& index) const {
  int64_t off = 0;
  for (size_t i = 0; i < dims.size(); ++i) off = off * dims[i] + index[i];
  return devices[off];
}

// --- factories -----------------------------------------------------------------

PSharding PSharding::Manual() {
  PSharding s;
  s.kind_ = Kind::kManual;
  return s;
}

PSharding PSharding::Unknown() {
  PSharding s;
  s.kind_ = Kind::kUnknown;
  return s;
}

PSharding PSharding::Maximal(int64_t device) {
  PSharding s;
  s.kind_ = Kind::kMaximal;
  s.tiles_.dims = {1};
  s.tiles_.devices = {device};
  return s;
}

PSharding PSharding::Tile(TileArray tiles) {
  PSharding s;
  s.kind_ = Kind::kTiled;
  s.tiles_ = std::move(tiles);
  return s;
}

PSharding PSharding::PartialTile(TileArray tiles) {
  if (tiles.num_dimensions() <= 1 || tiles.dims.back() == tiles.num_elements())
    return Replicate();
  if (tiles.dims.back() == 1) {
    std::vector<int64_t> d(tiles.dims.begin(), tiles.dims.end() - 1);
    return Tile(tiles.Reshape(d));
  }
  // Devices inside a replication group are interchangeable; keep them sorted
  // so equal placements print alike.
  const int64_t group = tiles.dims.back();
  bool sorted = tiles.devices.iota();
  for (size_t i = 0; !sorted && i < tiles.devices.size(); i += group)
    sorted = std::is_sorted(tiles.devices.begin() + i, tiles.devices.begin() + i + group);
  if (!sorted) {
    std::vector<int64_t>& d = tiles.devices.mut();
    for (size_t i = 0; i < d.size(); i += group)
      std::sort(d.begin() + i, d.begin() + i + group);
  }
  PSharding s = Tile(std::move(tiles));
  s.subgroup_ = {SubgroupType::kReplicated};
  return s;
}

PSharding PSharding::Subgroup(TileArray tiles, std::vector<SubgroupType> types) {
  if (types.empty()) return Tile(std::move(tiles));
  const int data_dims = tiles.num_dimensions() - (int)types.size();
  MS_CHECK(data_dims >= 0);
  bool all_same = std::all_of(types.begin(), types.end(),
                              [&](SubgroupType t) { return t == types[0]; });
  if (all_same && Product(tiles.dims, 0, data_dims) == 1)
    return types[0] == SubgroupType::kManual ? Manual() : Replicate();
  // Merge subgroup dims of one type, drop size-1 ones, manual first.
  std::vector<int64_t> perm;
  for (int i = 0; i < data_dims; ++i) perm.push_back(i);
  std::vector<int64_t> merged(tiles.dims.begin(), tiles.dims.begin() + data_dims);
  std::vector<SubgroupType> merged_types;
  for (SubgroupType t : {SubgroupType::kManual, SubgroupType::kReplicated}) {
    int64_t size = 1;
    bool any = false;
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] != t || tiles.dims[data_dims + i] == 1) continue;
      perm.push_back(data_dims + i);
      size *= tiles.dims[data_dims + i];
      any = true;
    }
    if (any) {
      merged.push_back(size);
      merged_types.push_back(t);
    }
  }
  // Size-1 subgroup dims are dropped; append them to the permutation so it is
  // complete (they do not change the device order).
  for (size_t i = 0; i < types.size(); ++i)
    if (tiles.dims[data_dims + i] == 1) perm.push_back(data_dims + i);
  TileArray t = tiles.Transpose(perm).Reshape(merged);
  if (merged_types.empty()) return Tile(std::move(t));
  if (merged_types.size() == 1 && merged_types[0] == SubgroupType::kReplicated)
    return PartialTile(std::move(t));
  if (merged_types.size() == 1 && merged_types[0] == SubgroupType::kManual &&
      t.num_elements() == t.dims.back())
    return Manual();
  PSharding s;
  if (merged_types.back() == SubgroupType::kReplicated) {
    s = PartialTile(t);  // sorts the replication groups
    if (!s.IsTiled()) {  // cannot collapse with a manual dim present
      s = Tile(t);
    }
  } else {
    s = Tile(t);
  }
  s.subgroup_ = merged_types;
  return s;
}

PSharding PSharding::Tuple(std::vector<PSharding> leaves) {
  PSharding s;
  s.kind_ = Kind::kTuple;
  for (auto& l : leaves) {
    if (l.IsTuple()) {
      for (auto& e : l.elements_) s.elements_.push_back(e);
    } else {
      s.elements_.push_back(std::move(l));
    }
  }
  return s;
}

// --- predicates ----------------------------------------------------------------

bool PSharding::IsReplicated() const {
  if (!IsTuple()) return kind_ == Kind::kReplicated;
  return std::all_of(elements_.begin(), elements_.end(),
                     [](const PSharding& e) { return e.IsReplicated(); });
}
bool PSharding::IsTileMaximal() const {
  if (!IsTuple()) return IsTileMaximalLeaf();
  return std::all_of(elements_.begin(), elements_.end(),
                     [](const PSharding& e) { return e.IsTileMaximal(); });
}
bool PSharding::IsManual() const {
  if (!IsTuple()) return kind_ == Kind::kManual;
  return std::all_of(elements_.begin(), elements_.end(),
                     [](const PSharding& e) { return e.IsManual(); });
}
bool PSharding::IsUnknown() const {
  if (!IsTuple()) return kind_ == Kind::kUnknown;
  return std::all_of(elements_.begin(), elements_.end(),
                     [](const PSharding& e) { return e.IsUnknown(); });
}

int64_t PSharding::TileDim(int i) const {
  if (!IsTiled() || i < 0 || i >= TiledDataRank()) return 1;
  return tiles_.dims[i];
}
int PSharding::TiledDataRank() const {
  if (!IsTiled()) return 0;
  return tiles_.num_dimensions() - (int)subgroup_.size();
}
bool PSharding::HasPartialReplication() const {
  return IsTiled() && std::find(subgroup_.begin(), subgroup_.end(),
                                SubgroupType::kReplicated) != subgroup_.end();
}
bool PSharding::IsManualSubgroup() const {
  return IsTiled() && std::find(subgroup_.begin(), subgroup_.end(),
                                SubgroupType::kManual) != subgroup_.end();
}
int PSharding::SubgroupReplicationDim() const {
  for (size_t i = 0; i < subgroup_.size(); ++i)
    if (subgroup_[i] == SubgroupType::kReplicated)
      return TiledDataRank() + (int)i;
  return -1;
}
int PSharding::SubgroupManualDim() const {
  for (size_t i = 0; i < subgroup_.size(); ++i)
    if (subgroup_[i] == SubgroupType::kManual) return TiledDataRank() + (int)i;
  return -1;
}
int64_t PSharding::NumTiles() const {
  if (!IsTiled()) return 1;
  return Product(tiles_.dims, 0, TiledDataRank());
}

bool PSharding::operator==(const PSharding& o) const {
  if (kind_ != o.kind_ || shard_group_id_ != o.shard_group_id_ ||
      (shard_group_id_ >= 0 && shard_as_ != o.shard_as_))
    return false;
  switch (kind_) {
    case Kind::kReplicated:
    case Kind::kManual:
    case Kind::kUnknown:
      return true;
    case Kind::kMaximal:
      return tiles_ == o.tiles_;
    case Kind::kTiled:
      return tiles_ == o.tiles_ && subgroup_ == o.subgroup_;
    case Kind::kTuple:
      return elements_ == o.elements_;
  }
  return false;
}

// --- text ----------------------------------------------------------------------

namespace {

class ShardingParser {
 public:
  explicit ShardingParser(std::string_view text) : t_(text) {}

  StatusOr<PSharding> ParseTop() {
    auto r = ParseBraced();
    if (!r.ok()) return r;
    SkipSpace();
    if (p_ != t_.size()) return Err("trailing text");
    return r;
  }

 private:
  Status Err(const std::string& what) {
    return Status::Error("bad sharding '" + std::string(t_) + "': " + what +
                         " at column " + std::to_string(p_ + 1));
  }
  // Skips blanks and /*...*/ comments (XLA prints /*index=N*/ in tuples).
  void SkipSpace() {
    while (p_ < t_.size()) {
      if (std::isspace((unsigned char)t_[p_])) {
        ++p_;
      } else if (t_.substr(p_, 2) == "/*") {
        size_t e = t_.find("*/", p_ + 2);
        p_ = e == std::string_view::npos ? t_.size() : e + 2;
      } else {
        break;
      }
    }
  }
  bool Eat(char c) {
    SkipSpace();
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool EatWord(std::string_view w) {
    SkipSpace();
    if (t_.substr(p_, w.size()) == w) {
      size_t e = p_ + w.size();
      if (e < t_.size() && (std::isalnum((unsigned char)t_[e]) || t_[e] == '_'))
        return false;
      p_ = e;
      return true;
    }
    return false;
  }
  bool ParseInt(int64_t* v) {
    SkipSpace();
    size_t s = p_;
    if (p_ < t_.size() && t_[p_] == '-') ++p_;
    while (p_ < t_.size() && std::isdigit((unsigned char)t_[p_])) ++p_;
    if (s == p_ || (p_ == s + 1 && t_[s] == '-')) {
      p_ = s;
      return false;
    }
    *v = std::stoll(std::string(t_.substr(s, p_ - s)));
    return true;
  }
  bool ParseIntList(char open, char close, std::vector<int64_t>* out) {
    if (!Eat(open)) return false;
    if (Eat(close)) return true;
    do {
      int64_t v;
      if (!ParseInt(&v)) return false;
      out->push_back(v);
    } while (Eat(','));
    return Eat(close);
  }
  // Skips a balanced {...} (with quoted strings) after `metadata=`.
  bool SkipBalanced() {
    SkipSpace();
    if (p_ >= t_.size() || t_[p_] != '{') return false;
    int depth = 0;
    bool in_str = false;
    size_t start = p_;
    for (; p_ < t_.size(); ++p_) {
      char c = t_[p_];
      if (in_str) {
        if (c == '\\') ++p_;
        else if (c == '"') in_str = false;
        continue;
      }
      if (c == '"') in_str = true;
      else if (c == '{') ++depth;
      else if (c == '}' && --depth == 0) {
        ++p_;
        last_skipped_ = t_.substr(start, p_ - start);
        return true;
      }
    }
    return false;
  }

  StatusOr<PSharding> ParseBraced() {
    if (!Eat('{')) return Err("expected '{'");
    SkipSpace();
    if (p_ < t_.size() && t_[p_] == '{') {
      std::vector<PSharding> leaves;
      do {
        auto e = ParseBraced();
        if (!e.ok()) return e;
        leaves.push_back(std::move(*e));
      } while (Eat(','));
      if (!Eat('}')) return Err("expected '}' after tuple");
      return PSharding::Tuple(std::move(leaves));
    }
    if (Eat('}')) return PSharding::Tuple({});
    return ParseLeafBody();
  }

  StatusOr<PSharding> ParseLeafBody() {
    enum { kNone, kRep, kMan, kUnk, kMax, kDev } what = kNone;
    int64_t device = -1;
    std::vector<int64_t> dims, ids, iota_reshape, iota_perm;
    bool iota = false, last_rep = false;
    std::vector<SubgroupType> last_dims;
    int64_t group = -1;
    bool shard_as = false, cse = false;
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      if (EatWord("replicated")) {
        what = kRep;
      } else if (EatWord("manual")) {
        what = kMan;
      } else if (EatWord("unknown")) {
        what = kUnk;
      } else if (EatWord("maximal")) {
        what = kMax;
      } else if (EatWord("device")) {
        if (!Eat('=') || !ParseInt(&device)) return Err("bad device=");
      } else if (EatWord("devices")) {
        what = kDev;
        if (!Eat('=') || !ParseIntList('[', ']', &dims)) return Err("bad devices=");
        SkipSpace();
        if (t_.substr(p_, 2) == "<=") {
          p_ += 2;
          iota = true;
          if (!ParseIntList('[', ']', &iota_reshape)) return Err("bad iota");
          SkipSpace();
          if (p_ < t_.size() && t_[p_] == 'T') {
            ++p_;
            if (!ParseIntList('(', ')', &iota_perm)) return Err("bad iota T()");
          }
        } else {
          do {
            int64_t v;
            if (!ParseInt(&v)) return Err("bad device list");
            ids.push_back(v);
          } while (Eat(','));
        }
      } else if (EatWord("last_tile_dim_replicate")) {
        last_rep = true;
      } else if (EatWord("last_tile_dims")) {
        if (!Eat('=') || !Eat('{')) return Err("bad last_tile_dims");
        do {
          if (EatWord("manual")) last_dims.push_back(SubgroupType::kManual);
          else if (EatWord("replicated"))
            last_dims.push_back(SubgroupType::kReplicated);
          else return Err("unsupported subgroup type");
        } while (Eat(','));
        if (!Eat('}')) return Err("bad last_tile_dims");
      } else if (EatWord("metadata")) {
        if (!Eat('=') || !SkipBalanced()) return Err("bad metadata");
        if (last_skipped_.find("_sharding_propagation_cse_prevention") !=
            std::string_view::npos)
          cse = true;
      } else if (EatWord("shard_as")) {
        shard_as = true;
        if (!ParseInt(&group)) return Err("bad shard_as");
      } else if (EatWord("shard_like")) {
        shard_as = false;
        if (!ParseInt(&group)) return Err("bad shard_like");
      } else {
        return Err("unexpected token");
      }
      Eat(',');
    }
    PSharding s;
    switch (what) {
      case kNone:
        return Err("empty sharding");
      case kRep:
        s = PSharding::Replicate();
        break;
      case kMan:
        s = PSharding::Manual();
        break;
      case kUnk:
        s = PSharding::Unknown();
        break;
      case kMax:
        if (device < 0) return Err("maximal without device");
        s = PSharding::Maximal(device);
        break;
      case kDev: {
        TileArray ta;
        ta.dims = dims;
        int64_t n = Product(dims);
        if (n <= 0) return Err("bad tile dims");
        if (iota) {
          if (Product(iota_reshape) != n) return Err("iota size mismatch");
          TileArray base;
          base.dims = iota_reshape;
          base.devices = DeviceList::Iota(n);
          if (!iota_perm.empty()) {
            if (iota_perm.size() != iota_reshape.size())
              return Err("bad iota permutation");
            base = base.Transpose(iota_perm);
          }
          ta.devices = base.devices;
        } else {
          if ((int64_t)ids.size() != n) return Err("device count mismatch");
          ta.devices = ids;
        }
        std::vector<SubgroupType> types = last_dims;
        if (last_rep) types = {SubgroupType::kReplicated};
        if (types.size() > dims.size()) return Err("too many subgroup dims");
        s = PSharding::Subgroup(std::move(ta), std::move(types));
        break;
      }
    }
    if (group >= 0) s.SetShardGroup(group, shard_as);
    s.set_cse_prevention(cse);
    return s;
  }

  std::string_view t_;
  size_t p_ = 0;
  std::string_view last_skipped_;
};

void AppendList(std::ostringstream& os, const std::vector<int64_t>& v) {
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
}

std::string LeafBody(const PSharding& s) {
  std::ostringstream os;
  switch (s.kind()) {
    case PSharding::Kind::kReplicated:
      os << "replicated";
      break;
    case PSharding::Kind::kManual:
      os << "manual";
      break;
    case PSharding::Kind::kUnknown:
      os << "unknown";
      break;
    case PSharding::Kind::kMaximal:
      os << "maximal device=" << s.unique_device();
      break;
    case PSharding::Kind::kTiled: {
      os << "devices=[";
      AppendList(os, s.tile_assignment().dims);
      os << "]";
      AppendList(os, s.tile_assignment().devices.vec());
      if (s.ReplicateOnLastTileDim()) {
        os << " last_tile_dim_replicate";
      } else if (!s.subgroup_types().empty()) {
        os << " last_tile_dims={";
        for (size_t i = 0; i < s.subgroup_types().size(); ++i)
          os << (i ? ", " : "")
             << (s.subgroup_types()[i] == SubgroupType::kManual ? "manual"
                                                                 : "replicated");
        os << "}";
      }
      break;
    }
    case PSharding::Kind::kTuple:
      break;
  }
  if (s.IsShardGroup())
    os << (s.shard_as() ? " shard_as " : " shard_like ") << s.shard_group_id();
  return os.str();
}

}  // namespace

StatusOr<PSharding> PSharding::Parse(std::string_view text) {
  return ShardingParser(text).ParseTop();
}

std::string PSharding::ToString() const {
  if (!IsTuple()) return "{" + LeafBody(*this) + "}";
  std::string r = "{";
  for (size_t i = 0; i < elements_.size(); ++i) {
    if (i) r += ", ";
    r += elements_[i].ToString();
  }
  return r + "}";
}

PSharding Normalize(const PSharding& s) {
  if (s.IsTuple()) {
    std::vector<PSharding> leaves;
    for (const auto& e : s.tuple_elements()) leaves.push_back(Normalize(e));
    PSharding t = PSharding::Tuple(std::move(leaves));
    return t;
  }
  if (!s.IsTiled()) return s;
  PSharding n = PSharding::Subgroup(s.tile_assignment(), s.subgroup_types());
  if (s.IsShardGroup()) n.SetShardGroup(s.shard_group_id(), s.shard_as());
  return n;
}

uint64_t StructureHash(const PSharding& s) {
  uint64_t h = static_cast<uint64_t>(s.kind()) * 0x9e3779b97f4a7c15ULL;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 0x100000001b3ULL; };
  for (int64_t d : s.tile_assignment().dims) mix(static_cast<uint64_t>(d));
  for (SubgroupType t : s.subgroup_types()) mix(static_cast<uint64_t>(t) + 7);
  mix(s.tile_assignment().devices.size());
  mix(static_cast<uint64_t>(s.shard_group_id() + 3));
  mix(s.cse_prevention());
  return h;
}

bool SemanticallyEqual(const PSharding& a, const PSharding& b) {
  PSharding na = Normalize(a), nb = Normalize(b);
  na.set_cse_prevention(false);
  nb.set_cse_prevention(false);
  return na == nb;
}

}  // namespace meshsplit::propagation
