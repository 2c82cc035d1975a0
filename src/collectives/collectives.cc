// Backend-independent pieces of the collectives interface: argument checks
// with messages naming the op, and the strided block copy the array
// collectives use to place blocks along non-major dimensions.
#include "collectives/collectives.h"

#include <cstring>

#include "ir/float8.h"

namespace meshsplit {

std::string_view ReductionKindName(ReductionKind kind) {
  switch (kind) {
    case ReductionKind::kAdd:
      return "add";
    case ReductionKind::kMul:
      return "mul";
    case ReductionKind::kMin:
      return "min";
    case ReductionKind::kMax:
      return "max";
    case ReductionKind::kAnd:
      return "and";
    case ReductionKind::kOr:
      return "or";
    case ReductionKind::kXor:
      return "xor";
  }
  return "?";
}

StatusOr<GroupMembership> FindGroup(const CommGroups& groups,
                                    int64_t num_devices, int64_t device,
                                    std::string_view op,
                                    bool require_equal_sizes) {
  GroupMembership result;
  if (groups.empty()) {
    result.members.resize(num_devices);
    for (int64_t i = 0; i < num_devices; ++i) result.members[i] = i;
    result.position = device;
    return result;
  }
  std::string prefix = std::string(op) + ": ";
  // Seen-marks make the whole check O(num_devices), done by every device;
  // cheap next to the rendezvous for the device counts we run.
  std::vector<int64_t> group_of(num_devices, -1);
  int64_t covered = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int64_t>& group = groups[g];
    if (group.empty())
      return Status::Error(prefix + "replica group " + std::to_string(g) +
                           " is empty");
    if (require_equal_sizes && group.size() != groups[0].size())
      return Status::Error(prefix + "replica groups have different sizes (" +
                           std::to_string(groups[0].size()) + " and " +
                           std::to_string(group.size()) + ")");
    for (size_t i = 0; i < group.size(); ++i) {
      int64_t id = group[i];
      if (id < 0 || id >= num_devices)
        return Status::Error(prefix + "device id " + std::to_string(id) +
                             " in replica group " + std::to_string(g) +
                             " is out of range [0, " +
                             std::to_string(num_devices) + ")");
      if (group_of[id] >= 0)
        return Status::Error(prefix + "device " + std::to_string(id) +
                             " appears in more than one replica group slot");
      group_of[id] = static_cast<int64_t>(g);
      ++covered;
      if (id == device) result.position = static_cast<int64_t>(i);
    }
  }
  if (covered != num_devices) {
    for (int64_t id = 0; id < num_devices; ++id)
      if (group_of[id] < 0)
        return Status::Error(prefix + "device " + std::to_string(id) +
                             " is in no replica group");
  }
  result.members = groups[group_of[device]];
  return result;
}

Status CheckReduction(PrimitiveType type, ReductionKind kind) {
  bool bitwise = kind == ReductionKind::kAnd || kind == ReductionKind::kOr ||
                 kind == ReductionKind::kXor;
  bool ok = false;
  if (type == PrimitiveType::PRED || IsInteger(type)) {
    // Sub-byte integer types are stored one per byte but their wrap-around
    // would need masking; no partitioned program reduces them.
    ok = type != PrimitiveType::S2 && type != PrimitiveType::S4 &&
         type != PrimitiveType::U2 && type != PrimitiveType::U4;
  } else if (type == PrimitiveType::F16 || type == PrimitiveType::BF16 ||
             type == PrimitiveType::F32 || type == PrimitiveType::F64 || IsF8Type(type)) {
    ok = !bitwise;
  } else if (IsComplex(type)) {
    ok = kind == ReductionKind::kAdd || kind == ReductionKind::kMul;
  }
  if (ok) return Status::Ok();
  return Status::Error(std::string("reduction '") +
                       std::string(ReductionKindName(kind)) +
                       "' is not supported for element type " +
                       std::string(PrimitiveTypeName(type)));
}

Status CheckSourceTargetPairs(const SourceTargetPairs& pairs,
                              int64_t num_devices) {
  std::vector<char> is_source(num_devices, 0), is_target(num_devices, 0);
  for (const auto& [s, t] : pairs) {
    for (int64_t id : {s, t})
      if (id < 0 || id >= num_devices)
        return Status::Error("collective-permute: device id " +
                             std::to_string(id) +
                             " in source_target_pairs is out of range [0, " +
                             std::to_string(num_devices) + ")");
    if (is_source[s]++)
      return Status::Error("collective-permute: device " + std::to_string(s) +
                           " is the source of more than one pair");
    if (is_target[t]++)
      return Status::Error("collective-permute: device " + std::to_string(t) +
                           " is the target of more than one pair");
  }
  return Status::Ok();
}

int64_t Product(std::span<const int64_t> dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) p *= dims[i];
  return p;
}

Status CheckDims(std::span<const int64_t> dims, int64_t dimension,
                 std::string_view op, std::string_view what) {
  for (int64_t d : dims)
    if (d < 0)
      return Status::Error(std::string(op) + ": negative dimension size " +
                           std::to_string(d));
  if (dimension < 0 || dimension >= static_cast<int64_t>(dims.size()))
    return Status::Error(std::string(op) + ": " + std::string(what) + " " +
                         std::to_string(dimension) +
                         " is out of range for rank " +
                         std::to_string(dims.size()));
  return Status::Ok();
}

void CopyStridedBlock(const void* src, std::span<const int64_t> src_strides,
                      void* dst, std::span<const int64_t> dst_strides,
                      std::span<const int64_t> block, int64_t elem_bytes) {
  const int rank = static_cast<int>(block.size());
  for (int64_t b : block)
    if (b == 0) return;
  // The innermost `run` elements are contiguous in both arrays when the
  // trailing dims have row-major strides on both sides.
  int first_contiguous = rank;
  int64_t run = 1;
  while (first_contiguous > 0) {
    int k = first_contiguous - 1;
    if (src_strides[k] != run || dst_strides[k] != run) break;
    run *= block[k];
    first_contiguous = k;
  }
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  const int64_t run_bytes = run * elem_bytes;
  if (first_contiguous == 0) {
    std::memcpy(d, s, run_bytes);
    return;
  }
  // Odometer over the outer dims [0, first_contiguous).
  std::vector<int64_t> idx(first_contiguous, 0);
  int64_t src_off = 0, dst_off = 0;  // in elements
  while (true) {
    std::memcpy(d + dst_off * elem_bytes, s + src_off * elem_bytes, run_bytes);
    int k = first_contiguous - 1;
    for (; k >= 0; --k) {
      ++idx[k];
      src_off += src_strides[k];
      dst_off += dst_strides[k];
      if (idx[k] < block[k]) break;
      src_off -= src_strides[k] * block[k];
      dst_off -= dst_strides[k] * block[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace meshsplit
