// TileAssignment implementation. The iota form is manipulated through the
// common refinement of the array dims and the transposed iota dims, so that
// reshapes, transposes and group sorting stay symbolic.
#include "sharding/tile_assignment.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <sstream>

#include "support/check.h"

namespace meshsplit {
namespace {

std::atomic<int64_t> g_iota_expansions{0};

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

std::string JoinInts(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(v[i]);
  }
  return s;
}

// Puts (reshape_dims, perm) into the unique canonical form: size-1 dims
// removed and reshape dims that stay adjacent under the transpose merged.
void CanonicalizeIota(std::vector<int64_t>& r, std::vector<int64_t>& p) {
  const int64_t n = Product(r);
  // Drop size-1 dims.
  std::vector<int64_t> new_index(r.size(), -1);
  std::vector<int64_t> kept;
  for (size_t j = 0; j < r.size(); ++j) {
    if (r[j] != 1) {
      new_index[j] = static_cast<int64_t>(kept.size());
      kept.push_back(r[j]);
    }
  }
  std::vector<int64_t> kept_perm;
  for (int64_t j : p)
    if (new_index[j] >= 0) kept_perm.push_back(new_index[j]);
  // Merge runs p[k+1] == p[k] + 1: they read consecutive reshape dims in
  // order, which is the same as one dim of their product.
  struct Run {
    int64_t first;
    int64_t size;
  };
  std::vector<Run> runs;  // in transposed order
  for (size_t k = 0; k < kept_perm.size(); ++k) {
    if (k > 0 && kept_perm[k] == kept_perm[k - 1] + 1) {
      runs.back().size *= kept[kept_perm[k]];
    } else {
      runs.push_back({kept_perm[k], kept[kept_perm[k]]});
    }
  }
  if (runs.empty()) {
    r = {n};
    p = {0};
    return;
  }
  std::vector<int64_t> by_first(runs.size());
  std::iota(by_first.begin(), by_first.end(), 0);
  std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) {
    return runs[a].first < runs[b].first;
  });
  r.assign(runs.size(), 0);
  p.assign(runs.size(), 0);
  for (size_t j = 0; j < by_first.size(); ++j) {
    r[j] = runs[by_first[j]].size;
    p[by_first[j]] = static_cast<int64_t>(j);
  }
}

}  // namespace

TileAssignment::TileAssignment() {
  // One shared value for every default (one-device) assignment: replicated
  // shardings hold one, and they are made everywhere.
  static const std::shared_ptr<const Rep> kDefault = [] {
    auto rep = std::make_shared<Rep>();
    rep->reshape_dims = {1};
    rep->perm = {0};
    return rep;
  }();
  rep_ = kDefault;
}

TileAssignment TileAssignment::Iota(std::vector<int64_t> dims) {
  const int64_t n = Product(dims);
  return Iota(std::move(dims), {n}, {});
}

TileAssignment TileAssignment::Iota(std::vector<int64_t> dims,
                                    std::vector<int64_t> reshape_dims,
                                    std::vector<int64_t> perm) {
  MS_CHECK(Product(dims) == Product(reshape_dims));
  if (perm.empty()) {
    perm.resize(reshape_dims.size());
    std::iota(perm.begin(), perm.end(), 0);
  }
  MS_CHECK(perm.size() == reshape_dims.size());
  auto rep = std::make_shared<Rep>();
  rep->num_devices = Product(dims);
  rep->dims = std::move(dims);
  CanonicalizeIota(reshape_dims, perm);
  rep->reshape_dims = std::move(reshape_dims);
  rep->perm = std::move(perm);
  return TileAssignment(std::move(rep));
}

TileAssignment TileAssignment::FromDevices(std::vector<int64_t> dims,
                                           std::vector<int64_t> devices) {
  const int64_t n = static_cast<int64_t>(devices.size());
  MS_CHECK(Product(dims) == n);
  // Detect an iota pattern: the flat position splits into mixed-radix
  // digits (minor first), each adding digit * stride to the id. Greedy runs
  // find the coarsest such digits; a final check confirms every entry and
  // that the strides are those of a transposed iota.
  auto detect = [&]() -> std::optional<TileAssignment> {
    if (n == 0 || devices[0] != 0) return std::nullopt;
    struct Level {
      int64_t radix;
      int64_t stride;
    };
    std::vector<Level> levels;  // minor first
    int64_t block = 1;
    while (block < n) {
      const int64_t stride = devices[block];
      if (stride <= 0) return std::nullopt;
      int64_t run = 1;
      while (run * block < n && devices[run * block] == run * stride) ++run;
      if (n % (run * block) != 0) return std::nullopt;
      levels.push_back({run, stride});
      block *= run;
    }
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i, id = 0;
      for (const Level& l : levels) {
        id += (rem % l.radix) * l.stride;
        rem /= l.radix;
      }
      if (id != devices[i]) return std::nullopt;
    }
    std::vector<Level> sorted = levels;
    std::sort(sorted.begin(), sorted.end(),
              [](const Level& a, const Level& b) { return a.stride < b.stride; });
    int64_t expected = 1;
    for (const Level& l : sorted) {
      if (l.stride != expected) return std::nullopt;
      expected *= l.radix;
    }
    if (expected != n) return std::nullopt;
    // Reshape dims are the digits by decreasing stride; the array reads them
    // major first, i.e. `levels` reversed.
    std::vector<int64_t> r, p;
    for (auto it = sorted.rbegin(); it != sorted.rend(); ++it)
      r.push_back(it->radix);
    for (auto it = levels.rbegin(); it != levels.rend(); ++it) {
      int64_t pos = 0;
      for (size_t j = 0; j < sorted.size(); ++j)
        if (sorted[sorted.size() - 1 - j].stride == it->stride) pos = j;
      p.push_back(pos);
    }
    return Iota(dims, std::move(r), std::move(p));
  };
  if (auto iota = detect()) return *std::move(iota);
  auto rep = std::make_shared<Rep>();
  rep->num_devices = n;
  rep->dims = std::move(dims);
  rep->devices =
      std::make_shared<const std::vector<int64_t>>(std::move(devices));
  return TileAssignment(std::move(rep));
}

bool TileAssignment::HasIdentityPerm() const {
  for (size_t i = 0; i < rep_->perm.size(); ++i)
    if (rep_->perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

int64_t TileAssignment::DeviceAtFlat(int64_t flat) const {
  MS_CHECK(flat >= 0 && flat < rep_->num_devices);
  if (!is_iota()) return (*rep_->devices)[flat];
  // Digits of `flat` over the transposed shape, minor first; digit k adds
  // digit * stride of reshape dim rep_->perm[k].
  int64_t rem = flat, id = 0;
  for (int64_t k = static_cast<int64_t>(rep_->perm.size()) - 1; k >= 0; --k) {
    const int64_t j = rep_->perm[k];
    const int64_t size = rep_->reshape_dims[j];
    int64_t stride = 1;
    for (size_t m = j + 1; m < rep_->reshape_dims.size(); ++m)
      stride *= rep_->reshape_dims[m];
    id += (rem % size) * stride;
    rem /= size;
  }
  return id;
}

int64_t TileAssignment::DeviceAt(const std::vector<int64_t>& index) const {
  MS_CHECK(index.size() == rep_->dims.size());
  int64_t flat = 0;
  for (size_t i = 0; i < rep_->dims.size(); ++i) {
    MS_CHECK(index[i] >= 0 && index[i] < rep_->dims[i]);
    flat = flat * rep_->dims[i] + index[i];
  }
  return DeviceAtFlat(flat);
}

std::optional<std::vector<int64_t>> TileAssignment::IndexOfDevice(
    int64_t device) const {
  int64_t flat = -1;
  if (is_iota()) {
    if (device < 0 || device >= rep_->num_devices) return std::nullopt;
    std::vector<int64_t> digit(rep_->reshape_dims.size());
    int64_t rem = device;
    for (int64_t j = static_cast<int64_t>(rep_->reshape_dims.size()) - 1; j >= 0;
         --j) {
      digit[j] = rem % rep_->reshape_dims[j];
      rem /= rep_->reshape_dims[j];
    }
    flat = 0;
    for (int64_t j : rep_->perm) flat = flat * rep_->reshape_dims[j] + digit[j];
  } else {
    auto it = std::find(rep_->devices->begin(), rep_->devices->end(), device);
    if (it == rep_->devices->end()) return std::nullopt;
    flat = it - rep_->devices->begin();
  }
  std::vector<int64_t> index(rep_->dims.size());
  for (int64_t i = static_cast<int64_t>(rep_->dims.size()) - 1; i >= 0; --i) {
    index[i] = flat % rep_->dims[i];
    flat /= rep_->dims[i];
  }
  return index;
}

std::optional<std::vector<TileAssignment::IndexTerm>>
TileAssignment::IndexTermsForDim(int64_t dim) const {
  MS_CHECK(dim >= 0 && dim < num_dimensions());
  if (!is_iota()) return std::nullopt;
  auto factors = Refine();
  if (!factors) return std::nullopt;
  // Stride of each factor in the device id: factors of one reshape dim are
  // listed major first, and reshape dims are major first.
  std::vector<int64_t> stride(factors->size(), 1);
  for (size_t f = 0; f < factors->size(); ++f) {
    int64_t s = 1;
    for (size_t g = 0; g < factors->size(); ++g) {
      const auto& a = (*factors)[f];
      const auto& b = (*factors)[g];
      if (b.reshape_dim > a.reshape_dim ||
          (b.reshape_dim == a.reshape_dim && g > f))
        s *= b.size;
    }
    stride[f] = s;
  }
  std::vector<IndexTerm> terms;
  int64_t multiplier = 1;
  for (int64_t f = static_cast<int64_t>(factors->size()) - 1; f >= 0; --f) {
    if ((*factors)[f].array_dim != dim) continue;
    terms.push_back({stride[f], (*factors)[f].size, multiplier});
    multiplier *= (*factors)[f].size;
  }
  std::reverse(terms.begin(), terms.end());
  return terms;
}

int64_t TileAssignment::MinDevice() const {
  if (is_iota()) return 0;
  return *std::min_element(rep_->devices->begin(), rep_->devices->end());
}

int64_t TileAssignment::MaxDevice() const {
  if (is_iota()) return rep_->num_devices - 1;
  return *std::max_element(rep_->devices->begin(), rep_->devices->end());
}

bool TileAssignment::HasDuplicates() const {
  if (is_iota()) return false;
  std::vector<int64_t> sorted = *rep_->devices;
  std::sort(sorted.begin(), sorted.end());
  return std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
}

int64_t TileAssignment::iota_expansions() { return g_iota_expansions.load(); }

std::vector<int64_t> TileAssignment::Devices() const {
  if (!is_iota()) return *rep_->devices;
  g_iota_expansions.fetch_add(1, std::memory_order_relaxed);
  std::vector<int64_t> out(rep_->num_devices);
  for (int64_t i = 0; i < rep_->num_devices; ++i) out[i] = DeviceAtFlat(i);
  return out;
}

TileAssignment TileAssignment::Reshape(std::vector<int64_t> new_dims) const {
  MS_CHECK(Product(new_dims) == rep_->num_devices);
  if (new_dims == rep_->dims) return *this;
  auto rep = std::make_shared<Rep>(*rep_);
  rep->dims = std::move(new_dims);
  return TileAssignment(std::move(rep));
}

std::optional<std::vector<TileAssignment::Factor>> TileAssignment::Refine()
    const {
  MS_CHECK(is_iota());
  std::vector<Factor> out;
  size_t d = 0, k = 0;
  int64_t d_rem = 0, t_rem = 0;
  auto next_d = [&] {
    while (d < rep_->dims.size() && rep_->dims[d] == 1) ++d;
    d_rem = d < rep_->dims.size() ? rep_->dims[d] : 0;
  };
  auto next_t = [&] {
    while (k < rep_->perm.size() && rep_->reshape_dims[rep_->perm[k]] == 1) ++k;
    t_rem = k < rep_->perm.size() ? rep_->reshape_dims[rep_->perm[k]] : 0;
  };
  next_d();
  next_t();
  while (d < rep_->dims.size() && k < rep_->perm.size()) {
    int64_t size;
    if (d_rem % t_rem == 0) {
      size = t_rem;
    } else if (t_rem % d_rem == 0) {
      size = d_rem;
    } else {
      return std::nullopt;
    }
    out.push_back({size, static_cast<int64_t>(d), rep_->perm[k]});
    d_rem /= size;
    t_rem /= size;
    if (d_rem == 1) {
      ++d;
      next_d();
    }
    if (t_rem == 1) {
      ++k;
      next_t();
    }
  }
  return out;
}

TileAssignment TileAssignment::FromFactors(std::vector<int64_t> dims,
                                           const std::vector<Factor>& factors,
                                           const std::vector<int64_t>& order) {
  // New reshape dims: each old reshape dim split into its factors, which
  // `factors` lists major first.
  std::vector<int64_t> by_reshape(factors.size());
  std::iota(by_reshape.begin(), by_reshape.end(), 0);
  std::stable_sort(by_reshape.begin(), by_reshape.end(),
                   [&](int64_t a, int64_t b) {
                     return factors[a].reshape_dim < factors[b].reshape_dim;
                   });
  std::vector<int64_t> r(factors.size()), pos(factors.size());
  for (size_t j = 0; j < by_reshape.size(); ++j) {
    r[j] = factors[by_reshape[j]].size;
    pos[by_reshape[j]] = static_cast<int64_t>(j);
  }
  std::vector<int64_t> p;
  for (int64_t f : order) p.push_back(pos[f]);
  if (r.empty()) {
    r = {1};
    p = {0};
  }
  return Iota(std::move(dims), std::move(r), std::move(p));
}

TileAssignment TileAssignment::Transpose(
    const std::vector<int64_t>& perm) const {
  MS_CHECK(perm.size() == rep_->dims.size());
  std::vector<int64_t> new_dims(rep_->dims.size());
  for (size_t i = 0; i < perm.size(); ++i) new_dims[i] = rep_->dims[perm[i]];
  if (is_iota()) {
    if (auto factors = Refine()) {
      std::vector<int64_t> order;
      for (int64_t src : perm)
        for (size_t f = 0; f < factors->size(); ++f)
          if ((*factors)[f].array_dim == src) order.push_back(f);
      return FromFactors(std::move(new_dims), *factors, order);
    }
  }
  // Explicit transpose: walk the output row-major.
  std::vector<int64_t> src = Devices();
  std::vector<int64_t> src_strides(rep_->dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(rep_->dims.size()) - 2; i >= 0; --i)
    src_strides[i] = src_strides[i + 1] * rep_->dims[i + 1];
  std::vector<int64_t> out(rep_->num_devices);
  std::vector<int64_t> idx(rep_->dims.size(), 0);
  for (int64_t flat = 0; flat < rep_->num_devices; ++flat) {
    int64_t s = 0;
    for (size_t i = 0; i < idx.size(); ++i) s += idx[i] * src_strides[perm[i]];
    out[flat] = src[s];
    for (int64_t i = static_cast<int64_t>(idx.size()) - 1; i >= 0; --i) {
      if (++idx[i] < new_dims[i]) break;
      idx[i] = 0;
    }
  }
  return FromDevices(std::move(new_dims), std::move(out));
}

TileAssignment TileAssignment::SortLastDim() const {
  if (rep_->dims.empty() || rep_->dims.back() <= 1) return *this;
  if (is_iota()) {
    if (auto factors = Refine()) {
      // The last dim owns a suffix of the factors; reading them by
      // increasing reshape dim (decreasing stride) visits its ids in
      // ascending order.
      std::vector<int64_t> order(factors->size());
      std::iota(order.begin(), order.end(), 0);
      const int64_t last = static_cast<int64_t>(rep_->dims.size()) - 1;
      auto first_last = std::find_if(order.begin(), order.end(), [&](int64_t f) {
        return (*factors)[f].array_dim == last;
      });
      std::stable_sort(first_last, order.end(), [&](int64_t a, int64_t b) {
        return (*factors)[a].reshape_dim < (*factors)[b].reshape_dim;
      });
      return FromFactors(rep_->dims, *factors, order);
    }
  }
  std::vector<int64_t> ids = Devices();
  const int64_t group = rep_->dims.back();
  for (int64_t i = 0; i < rep_->num_devices; i += group)
    std::sort(ids.begin() + i, ids.begin() + i + group);
  return FromDevices(rep_->dims, std::move(ids));
}

std::string TileAssignment::ToString() const {
  std::string s = "[" + JoinInts(rep_->dims) + "]";
  if (is_iota()) {
    s += "<=[" + JoinInts(rep_->reshape_dims) + "]";
    if (!HasIdentityPerm()) s += "T(" + JoinInts(rep_->perm) + ")";
  } else {
    s += JoinInts(*rep_->devices);
  }
  return s;
}

size_t TileAssignment::Hash() const {
  size_t h = is_iota() ? 0x9e3779b97f4a7c15ull : 0x51ed270b27f0a3b5ull;
  auto mix = [&](int64_t v) {
    h ^= static_cast<size_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  for (int64_t d : rep_->dims) mix(d);
  if (is_iota()) {
    for (int64_t d : rep_->reshape_dims) mix(d);
    for (int64_t p : rep_->perm) mix(p);
  } else {
    for (int64_t d : *rep_->devices) mix(d);
  }
  return h;
}

bool TileAssignment::operator==(const TileAssignment& other) const {
  if (rep_ == other.rep_) return true;
  if (rep_->dims != other.rep_->dims) return false;
  if (is_iota() != other.is_iota()) {
    // Explicit arrays are never iota patterns (FromDevices converts them).
    return false;
  }
  if (is_iota())
    return rep_->reshape_dims == other.rep_->reshape_dims &&
           rep_->perm == other.rep_->perm;
  return rep_->devices == other.rep_->devices ||
         *rep_->devices == *other.rep_->devices;
}

}  // namespace meshsplit
