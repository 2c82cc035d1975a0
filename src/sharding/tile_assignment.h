// TileAssignment: the N-d array of device ids inside a tiled sharding. It is
// either an iota form (iota(N) reshaped to `reshape_dims`, transposed by
// `transpose_perm`, read row-major into `dims`) kept symbolic so that queries
// cost O(rank), or an explicit array of device ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace meshsplit {

class TileAssignment {
 public:
  // One device (id 0) and no dimensions.
  TileAssignment();

  // iota(prod(dims)) read row-major into `dims`.
  static TileAssignment Iota(std::vector<int64_t> dims);
  // iota(prod(reshape_dims)) reshaped to `reshape_dims`, transposed by `perm`
  // and read row-major into `dims`. REQUIRES: prod(dims) == prod(reshape_dims),
  // `perm` is a permutation of [0, reshape_dims.size()) (empty = identity).
  static TileAssignment Iota(std::vector<int64_t> dims,
                             std::vector<int64_t> reshape_dims,
                             std::vector<int64_t> perm);
  // An explicit array (row-major). Turned into the iota form when the ids
  // follow an iota pattern, so that equal arrays have one representation.
  // REQUIRES: devices.size() == prod(dims).
  static TileAssignment FromDevices(std::vector<int64_t> dims,
                                    std::vector<int64_t> devices);

  const std::vector<int64_t>& dims() const { return rep_->dims; }
  int64_t num_dimensions() const {
    return static_cast<int64_t>(rep_->dims.size());
  }
  int64_t dim(int64_t i) const { return rep_->dims[i]; }
  // Number of entries of the array (= number of devices it names).
  int64_t num_devices() const { return rep_->num_devices; }

  bool is_iota() const { return rep_->devices == nullptr; }
  // Canonical iota parameters: no size-1 reshape dims, no two reshape dims
  // that stay adjacent under the transpose. REQUIRES: is_iota().
  const std::vector<int64_t>& reshape_dims() const {
    return rep_->reshape_dims;
  }
  const std::vector<int64_t>& transpose_perm() const { return rep_->perm; }
  bool HasIdentityPerm() const;

  // Device at a full index (one entry per dim). O(rank) for iota.
  int64_t DeviceAt(const std::vector<int64_t>& index) const;
  // Device at a row-major flat position.
  int64_t DeviceAtFlat(int64_t flat) const;
  // Index of `device` in the array, or nullopt when it does not occur.
  // O(rank) for iota, O(devices) for an explicit array.
  std::optional<std::vector<int64_t>> IndexOfDevice(int64_t device) const;
  bool UsesDevice(int64_t device) const {
    return IndexOfDevice(device).has_value();
  }
  // For iota assignments, the index along `dim` of device d as arithmetic on
  // d: sum over terms of ((d / divisor) % modulus) * multiplier. Lets the
  // partitioner compute a tile offset from partition-id without an
  // O(devices) table. nullopt for explicit arrays (or when the dims cut the
  // iota factors unevenly).
  struct IndexTerm {
    int64_t divisor;
    int64_t modulus;
    int64_t multiplier;
  };
  std::optional<std::vector<IndexTerm>> IndexTermsForDim(int64_t dim) const;

  // Smallest / largest id. O(1) for iota.
  int64_t MinDevice() const;
  int64_t MaxDevice() const;
  // True when some id occurs twice (never for iota).
  bool HasDuplicates() const;

  // Same devices in the same row-major order, new dims.
  // REQUIRES: prod(new_dims) == num_devices().
  TileAssignment Reshape(std::vector<int64_t> new_dims) const;
  // out.dims[i] = dims[perm[i]]. Stays iota whenever the transposed array is
  // an iota pattern (always when dims split the iota factors evenly).
  TileAssignment Transpose(const std::vector<int64_t>& perm) const;
  // Sorts the ids along the last dim (each run of dim(-1) consecutive
  // entries). Used for replicated subgroups, whose order does not matter.
  TileAssignment SortLastDim() const;

  // The explicit array, row-major. O(devices).
  std::vector<int64_t> Devices() const;

  // How many times an iota assignment has been expanded into an explicit
  // array (Devices() or a non-symbolic fallback), process-wide. Tests use it
  // to check that queries stay symbolic.
  static int64_t iota_expansions();

  // "[2,4]<=[8]", "[2,4]<=[2,2,2]T(2,1,0)" or "[2,2]0,2,1,3".
  std::string ToString() const;

  // Consistent with operator==.
  size_t Hash() const;

  // Same dims and same id at every index.
  bool operator==(const TileAssignment& other) const;
  bool operator!=(const TileAssignment& other) const {
    return !(*this == other);
  }

 private:
  // One factor of the common refinement of `dims_` and the transposed iota
  // shape: `size`, the array dim it belongs to and the reshape dim it comes
  // from, with its position inside that reshape dim.
  struct Factor {
    int64_t size;
    int64_t array_dim;
    int64_t reshape_dim;
  };
  // The refinement in array (row-major) order, or nullopt when the dims cut
  // through an iota factor unevenly. REQUIRES: is_iota().
  std::optional<std::vector<Factor>> Refine() const;
  // Builds an iota assignment whose array visits `factors` in `order`.
  static TileAssignment FromFactors(std::vector<int64_t> dims,
                                    const std::vector<Factor>& factors,
                                    const std::vector<int64_t>& order);

  // The value, immutable and shared between copies: shardings are copied
  // at every propagation step, and a copy is then a reference count.
  struct Rep {
    std::vector<int64_t> dims;
    int64_t num_devices = 1;
    std::vector<int64_t> reshape_dims;  // iota form
    std::vector<int64_t> perm;          // iota form; always full length
    std::shared_ptr<const std::vector<int64_t>> devices;  // explicit form
  };
  explicit TileAssignment(std::shared_ptr<const Rep> rep)
      : rep_(std::move(rep)) {}
  std::shared_ptr<const Rep> rep_;
};

}  // namespace meshsplit
