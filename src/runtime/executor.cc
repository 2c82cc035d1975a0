// SPMD executor: splitting by sharding, N interpreters on the threads
// backend, assembling by sharding.
#include "runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "collectives/collectives.h"
#include "collectives/threads_backend.h"
#include "ir/computation.h"
#include "runtime/interpreter.h"
#include "runtime/collective_adapter.h"
#include "runtime/parallel.h"

extern "C" {
// OpenBLAS thread control (declared here so only the symbol, not OpenBLAS's
// header, is a dependency).
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
}

namespace meshsplit {
namespace {

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Element offset of `index` in a row-major array with `strides`.
int64_t Linear(const std::vector<int64_t>& index, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t i = 0; i < index.size(); ++i) off += index[i] * strides[i];
  return off;
}

}  // namespace

void CopyTileOut(const Literal& full, const std::vector<int64_t>& offset,
                 const std::vector<int64_t>& limit, Literal& local) {
  std::vector<int64_t> block(offset.size());
  for (size_t i = 0; i < block.size(); ++i) {
    block[i] = limit[i] - offset[i];
    if (block[i] <= 0) return;  // an empty tile (uneven dim, last tiles)
  }
  int64_t w = ByteWidth(full.element_type());
  std::vector<int64_t> fs = RowMajorStrides(full.shape().dimensions());
  std::vector<int64_t> ls = RowMajorStrides(local.shape().dimensions());
  CopyStridedBlock(full.raw() + Linear(offset, fs) * w, fs, local.raw(), ls, block, w);
}

void CopyTileIn(const Literal& local, const std::vector<int64_t>& offset,
                const std::vector<int64_t>& limit, Literal& full) {
  std::vector<int64_t> block(offset.size());
  for (size_t i = 0; i < block.size(); ++i) {
    block[i] = limit[i] - offset[i];
    if (block[i] <= 0) return;
  }
  int64_t w = ByteWidth(full.element_type());
  std::vector<int64_t> fs = RowMajorStrides(full.shape().dimensions());
  std::vector<int64_t> ls = RowMajorStrides(local.shape().dimensions());
  CopyStridedBlock(local.raw(), ls, full.raw() + Linear(offset, fs) * w, fs, block, w);
}

std::vector<uint8_t> PackedBlock(const Literal& local, const std::vector<int64_t>& extent) {
  int64_t w = ByteWidth(local.element_type());
  int64_t n = 1;
  for (int64_t e : extent) n *= std::max<int64_t>(e, 0);
  std::vector<uint8_t> out(n * w);
  if (n == 0) return out;
  std::vector<int64_t> ls = RowMajorStrides(local.shape().dimensions());
  std::vector<int64_t> ps = RowMajorStrides(extent);
  CopyStridedBlock(local.raw(), ls, out.data(), ps, extent, w);
  return out;
}

namespace {

Status CheckTiledSharding(const Sharding& sharding, const Shape& global, int64_t num_devices,
                          const std::string& what) {
  MS_RETURN_IF_ERROR(sharding.Validate(global.rank(), num_devices));
  if (sharding.HasManualSubgroup())
    return Status::Error(what + ": sharding " + sharding.ToString(false) +
                         " has a manual subgroup, which the executor cannot split or "
                         "assemble");
  if (sharding.SubgroupSize(SubgroupType::kUnreduced) > 1)
    return Status::Error(what + ": unreduced sharding " + sharding.ToString(false) +
                         " cannot be split or assembled");
  return Status::Ok();
}

Status CheckShardingKind(const Sharding& s, const std::string& what) {
  switch (s.kind()) {
    case Sharding::Kind::kUnreduced:
    case Sharding::Kind::kUnknown:
      return Status::Error(what + ": sharding " + s.ToString(false) +
                           " cannot be split or assembled");
    default:
      return Status::Ok();
  }
}

}  // namespace

void FillPoison(Literal& literal) {
  if (literal.shape().IsTuple()) {
    for (Literal& e : literal.elements()) FillPoison(e);
    return;
  }
  if (!literal.shape().IsArray()) return;
  int64_t n = literal.element_count();
  switch (literal.element_type()) {
    case PrimitiveType::F32: {
      uint32_t nan = 0x7FC00000u;
      for (int64_t i = 0; i < n; ++i) std::memcpy(literal.raw() + 4 * i, &nan, 4);
      return;
    }
    case PrimitiveType::F64: {
      uint64_t nan = 0x7FF8000000000000ull;
      for (int64_t i = 0; i < n; ++i) std::memcpy(literal.raw() + 8 * i, &nan, 8);
      return;
    }
    case PrimitiveType::F16:
    case PrimitiveType::BF16: {
      uint16_t nan = literal.element_type() == PrimitiveType::F16 ? 0x7E00 : 0x7FC0;
      for (int64_t i = 0; i < n; ++i) std::memcpy(literal.raw() + 2 * i, &nan, 2);
      return;
    }
    case PrimitiveType::PRED:
      std::memset(literal.raw(), 1, n);
      return;
    default:
      // Integers: a large, odd, sign-bit-set pattern (0xA5A5...), so that a
      // sum, max or product over unmasked padding is visibly wrong.
      std::memset(literal.raw(), 0xA5, literal.size_bytes());
      return;
  }
}

StatusOr<std::vector<Literal>> SplitByShardings(const Literal& full, const Shape& local_shape,
                                                const Sharding& sharding,
                                                int64_t num_devices, bool poison_padding) {
  if (full.shape().IsTuple()) {
    if (!local_shape.IsTuple() || local_shape.tuple_size() != full.shape().tuple_size())
      return Status::Error("tuple value " + full.shape().ToString(false) +
                           " does not match local shape " + local_shape.ToString(false));
    if (sharding.IsTuple() &&
        static_cast<int>(sharding.tuple_elements().size()) != full.shape().tuple_size())
      return Status::Error("tuple sharding has " +
                           std::to_string(sharding.tuple_elements().size()) +
                           " elements but the value has " +
                           std::to_string(full.shape().tuple_size()));
    std::vector<std::vector<Literal>> parts(num_devices);
    for (int i = 0; i < full.shape().tuple_size(); ++i) {
      const Sharding& es = sharding.IsTuple() ? sharding.tuple_elements()[i] : sharding;
      MS_ASSIGN_OR_RETURN(std::vector<Literal> per,
                          SplitByShardings(full.elements()[i], local_shape.tuple_shapes(i), es,
                                           num_devices, poison_padding));
      for (int64_t d = 0; d < num_devices; ++d) parts[d].push_back(std::move(per[d]));
    }
    std::vector<Literal> out;
    for (int64_t d = 0; d < num_devices; ++d) out.push_back(Literal::MakeTuple(std::move(parts[d])));
    return out;
  }
  if (sharding.IsTuple())
    return Status::Error("tuple sharding " + sharding.ToString(false) + " on array value " +
                         full.shape().ToString(false));
  MS_RETURN_IF_ERROR(CheckShardingKind(sharding, "input"));
  if (local_shape.IsTuple() || local_shape.element_type() != full.element_type())
    return Status::Error("value " + full.shape().ToString(false) +
                         " does not match local shape " + local_shape.ToString(false));
  Shape local = local_shape;
  local.set_layout(std::nullopt);
  std::vector<Literal> out;
  const std::vector<int64_t>& dims = full.shape().dimensions();
  if (!sharding.IsTiled()) {
    if (local.dimensions() != dims)
      return Status::Error("per-device shape " + local.ToString(false) + " of a " +
                           sharding.ToString(false) + " value must equal its global shape " +
                           full.shape().ToString(false));
    for (int64_t d = 0; d < num_devices; ++d) {
      if (sharding.IsMaximal() && sharding.device() != d) {
        Literal l(local);
        FillPoison(l);
        out.push_back(std::move(l));
      } else {
        out.push_back(full);
      }
    }
    return out;
  }
  MS_RETURN_IF_ERROR(CheckTiledSharding(sharding, full.shape(), num_devices, "input"));
  if (sharding.TileShape(dims) != local.dimensions())
    return Status::Error("per-device shape " + DimsString(local.dimensions()) +
                         " is not the tile shape " + DimsString(sharding.TileShape(dims)) +
                         " of " + full.shape().ToString(false) + " under " +
                         sharding.ToString(false));
  for (int64_t d = 0; d < num_devices; ++d) {
    if (!sharding.UsesDevice(d)) {
      Literal l(local);
      if (poison_padding) FillPoison(l);
      out.push_back(std::move(l));
      continue;
    }
    std::vector<int64_t> offset = sharding.TileOffsetForDevice(dims, d);
    std::vector<int64_t> limit = sharding.TileLimitForDevice(dims, d);
    bool whole = true;  // the tile fills the buffer: no padding to fill first
    for (size_t i = 0; i < offset.size(); ++i)
      whole = whole && limit[i] - offset[i] == local.dimensions(i);
    Literal l = whole ? Literal::Uninitialized(local) : Literal(local);
    if (poison_padding && !whole) FillPoison(l);
    CopyTileOut(full, offset, limit, l);
    out.push_back(std::move(l));
  }
  return out;
}

StatusOr<Literal> Assemble(const std::vector<Literal>& per_device, const Shape& global_shape,
                           const Sharding& sharding, const AssembleOptions& options) {
  const int64_t n = static_cast<int64_t>(per_device.size());
  if (n == 0) return Status::Error("no device values to assemble");
  if (global_shape.IsTuple()) {
    if (sharding.IsTuple() &&
        static_cast<int>(sharding.tuple_elements().size()) != global_shape.tuple_size())
      return Status::Error("tuple sharding " + sharding.ToString(false) + " does not match " +
                           global_shape.ToString(false));
    std::vector<Literal> elems;
    for (int i = 0; i < global_shape.tuple_size(); ++i) {
      std::vector<Literal> parts;
      for (const Literal& l : per_device) {
        if (!l.shape().IsTuple() || static_cast<int>(l.elements().size()) != global_shape.tuple_size())
          return Status::Error("device result " + l.shape().ToString(false) +
                               " is not a tuple like " + global_shape.ToString(false));
        parts.push_back(l.elements()[i]);
      }
      const Sharding& es = sharding.IsTuple() ? sharding.tuple_elements()[i] : sharding;
      MS_ASSIGN_OR_RETURN(Literal e, Assemble(parts, global_shape.tuple_shapes(i), es, options));
      elems.push_back(std::move(e));
    }
    return Literal::MakeTuple(std::move(elems));
  }
  if (!global_shape.IsArray())
    return Literal(global_shape);  // tokens carry no data
  if (sharding.IsTuple())
    return Status::Error("tuple sharding " + sharding.ToString(false) + " on array result " +
                         global_shape.ToString(false));
  MS_RETURN_IF_ERROR(CheckShardingKind(sharding, "result"));
  for (int64_t d = 0; d < n; ++d)
    if (!per_device[d].shape().IsArray() ||
        per_device[d].element_type() != global_shape.element_type())
      return Status::Error("device " + std::to_string(d) + " result " +
                           per_device[d].shape().ToString(false) + " does not match " +
                           global_shape.ToString(false));
  Shape global = global_shape;
  global.set_layout(std::nullopt);
  const std::vector<int64_t>& dims = global.dimensions();
  if (!sharding.IsTiled()) {
    int64_t src = sharding.IsMaximal() ? sharding.device() : 0;
    if (src < 0 || src >= n)
      return Status::Error("maximal sharding names device " + std::to_string(src) +
                           " of " + std::to_string(n));
    if (per_device[src].shape().dimensions() != dims)
      return Status::Error("device result " + per_device[src].shape().ToString(false) +
                           " of a " + sharding.ToString(false) + " value must have the global shape " +
                           global.ToString(false));
    if (options.check_replicas && !sharding.IsMaximal()) {
      for (int64_t d = 1; d < n; ++d)
        if (!per_device[d].BitwiseEqual(per_device[0]))
          return Status::Error("replicated value differs between device 0 and device " +
                               std::to_string(d));
    }
    Literal out = per_device[src];
    return out;
  }
  MS_RETURN_IF_ERROR(CheckTiledSharding(sharding, global, n, "result"));
  std::vector<int64_t> tile = sharding.TileShape(dims);
  // Not zero-filled: the tiles cover the whole array, which is checked below
  // before `out` is returned.
  Literal out = Literal::Uninitialized(global);
  // First device seen for each tile index; later holders are replicas.
  std::map<std::vector<int64_t>, int64_t> holder;
  for (int64_t d = 0; d < n; ++d) {
    if (!sharding.UsesDevice(d)) continue;
    if (per_device[d].shape().dimensions() != tile)
      return Status::Error("device " + std::to_string(d) + " result " +
                           per_device[d].shape().ToString(false) + " is not the tile shape " +
                           DimsString(tile) + " of " + global.ToString(false) + " under " +
                           sharding.ToString(false));
    std::vector<int64_t> index = *sharding.TileIndexForDevice(d);
    std::vector<int64_t> offset = sharding.TileOffsetForDevice(dims, d);
    std::vector<int64_t> limit = sharding.TileLimitForDevice(dims, d);
    auto [it, first] = holder.emplace(index, d);
    if (first) {
      CopyTileIn(per_device[d], offset, limit, out);
    } else if (options.check_replicas) {
      std::vector<int64_t> extent(limit.size());
      for (size_t i = 0; i < extent.size(); ++i) extent[i] = limit[i] - offset[i];
      if (PackedBlock(per_device[d], extent) != PackedBlock(per_device[it->second], extent))
        return Status::Error("devices " + std::to_string(it->second) + " and " +
                             std::to_string(d) + " hold the same tile " + DimsString(index) +
                             " with different values");
    }
  }
  if (static_cast<int64_t>(holder.size()) != sharding.NumTiles())
    return Status::Error("only " + std::to_string(holder.size()) + " of " +
                         std::to_string(sharding.NumTiles()) + " tiles are held by devices 0.." +
                         std::to_string(n - 1));
  return out;
}

Sharding ShardingOrReplicated(const Instruction& instr) {
  return instr.has_sharding() ? *instr.sharding() : Sharding::Replicate();
}

StatusOr<std::vector<Literal>> RunOnDevices(const Module& partitioned,
                                            std::vector<std::vector<Literal>> args,
                                            int64_t num_devices, const SpmdRunOptions& options) {
  if (num_devices < 1) return Status::Error("need at least one device");
  if (Status s = CheckThreadsBackendDevices(num_devices); !s.ok()) return s;
  if (static_cast<int64_t>(args.size()) != num_devices)
    return Status::Error("got arguments for " + std::to_string(args.size()) + " devices, not " +
                         std::to_string(num_devices));
  if (partitioned.entry() == nullptr) return Status::Error("module has no entry computation");
  int saved_threads = 0;
  int blas_threads = options.blas_threads_per_device;
  if (blas_threads < 0) {
    // The cores split between the devices, at least one thread each.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    blas_threads = std::max<int>(1, cores / static_cast<int>(num_devices));
  }
  if (blas_threads > 0) {
    saved_threads = openblas_get_num_threads();
    openblas_set_num_threads(blas_threads);
  }
  // Intra-op threads (fused loops) split the cores the same way.
  const int saved_intra_op = interp::IntraOpThreads();
  interp::SetIntraOpThreads(std::max<int>(
      1, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) /
             static_cast<int>(num_devices)));
  std::vector<Literal> results(num_devices);
  if (options.branch_traces != nullptr) options.branch_traces->assign(num_devices, {});
  Status st = RunOnThreads(static_cast<int>(num_devices), [&](int d, Communicator& comm) {
    CollectiveAdapter adapter(comm);
    adapter.set_single_replica(options.single_replica_collectives);
    std::unique_ptr<DeviceHooks> hooks;
    if (options.make_hooks) hooks = options.make_hooks(d, comm);
    EvalContext ctx;
    ctx.partition_id = d;
    ctx.replica_id = 0;
    ctx.collectives = &adapter;
    ctx.hooks = hooks.get();
    ctx.stub_opaque_custom_calls = options.stub_opaque_custom_calls;
    ctx.max_while_iterations = options.max_while_iterations;
    if (options.branch_traces != nullptr) ctx.branch_trace = &(*options.branch_traces)[d];
    StatusOr<Literal> r = EvaluateModule(partitioned, std::move(args[d]), ctx);
    if (!r.ok()) {
      Status s = r.status();
      return Status::Error("device " + std::to_string(d) + ": " + s.message(), s.loc());
    }
    results[d] = std::move(r).value();
    return Status::Ok();
  });
  if (blas_threads > 0) openblas_set_num_threads(saved_threads);
  interp::SetIntraOpThreads(saved_intra_op);
  if (!st.ok()) return st;
  return results;
}

StatusOr<Literal> RunSpmd(const Module& partitioned, const std::vector<Literal>& full_inputs,
                          const Shape& global_result_shape, int64_t num_devices,
                          const SpmdRunOptions& options) {
  const Computation* entry = partitioned.entry();
  if (entry == nullptr) return Status::Error("module has no entry computation");
  if (static_cast<int>(full_inputs.size()) != entry->parameter_count())
    return Status::Error("the entry computation takes " +
                         std::to_string(entry->parameter_count()) + " parameters, got " +
                         std::to_string(full_inputs.size()) + " inputs");
  std::vector<std::vector<Literal>> args(num_devices);
  for (int p = 0; p < entry->parameter_count(); ++p) {
    const Instruction* param = entry->parameter(p);
    if (param == nullptr) return Status::Error("parameter " + std::to_string(p) + " is missing");
    StatusOr<std::vector<Literal>> parts =
        SplitByShardings(full_inputs[p], param->shape(), ShardingOrReplicated(*param),
                         num_devices, options.poison_padding);
    if (!parts.ok())
      return Status::Error("parameter " + std::to_string(p) + " (%" + param->name() +
                               "): " + parts.status().message(),
                           param->loc());
    for (int64_t d = 0; d < num_devices; ++d) args[d].push_back(std::move((*parts)[d]));
  }
  MS_ASSIGN_OR_RETURN(std::vector<Literal> results,
                      RunOnDevices(partitioned, std::move(args), num_devices, options));
  StatusOr<Literal> out = Assemble(results, global_result_shape,
                                   ShardingOrReplicated(*entry->root()), options.assemble);
  if (!out.ok())
    return Status::Error("result (%" + entry->root()->name() + "): " + out.status().message(),
                         entry->root()->loc());
  return out;
}

}  // namespace meshsplit
