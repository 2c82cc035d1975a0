// The mpi backend of `run` / `verify` (see mpi_runner.h). All ranks walk the
// same steps; every step that can fail on only some ranks (reading inputs,
// partitioning, assembling) ends with an agreement so that all ranks return
// the same Status instead of some of them waiting forever in a collective.
#include "verify/mpi_runner.h"

#ifdef MESHSPLIT_HAVE_MPI
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "collectives/mpi_backend.h"
#include "ir/computation.h"
#include "ir/verifier.h"
#include "runtime/interpreter.h"
#include "runtime/collective_adapter.h"
#include "runtime/executor.h"
#include "runtime/parallel.h"
#include "text/printer.h"

extern "C" {
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
}
#endif

namespace meshsplit {

#ifndef MESHSPLIT_HAVE_MPI

bool MpiBackendBuilt() { return false; }

namespace {
Status NotBuilt() {
  return Status::Error(
      "backend 'mpi' is not available: this meshsplit was built without MPI "
      "(install an MPI implementation, e.g. libopenmpi-dev, and reconfigure with "
      "-DMESHSPLIT_MPI=ON)");
}
}  // namespace

StatusOr<MpiRunOutcome> RunModuleOnMpi(Module&, StatusOr<std::vector<Literal>>,
                                       const SpmdRunRequest&) {
  return NotBuilt();
}

Status AgreeAcrossRanks(const Status& local) { return local; }

bool MpiIsRoot() { return true; }

MpiVerifyOutcome VerifyModuleOnMpi(Module&, const VerifyOptions&) {
  MpiVerifyOutcome out;
  out.is_root = true;
  out.result.status = "spmd";
  out.result.message = NotBuilt().ToString();
  return out;
}

#else  // MESHSPLIT_HAVE_MPI

bool MpiBackendBuilt() { return true; }

namespace {

int WorldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// mpirun ends the surviving ranks with SIGTERM when one rank fails (dies,
// exits non-zero or calls MPI_Abort). Say so on each of them, so that every
// rank's exit is explained, and exit with status 1 instead of dying silently.
char sigterm_message[160];
size_t sigterm_message_len = 0;

extern "C" void OnSigterm(int) {
  ssize_t ignored = write(2, sigterm_message, sigterm_message_len);
  (void)ignored;
  _exit(1);
}

void InstallSigtermHandler() {
  int n = std::snprintf(sigterm_message, sizeof(sigterm_message),
                        "error: rank %d: terminated by SIGTERM (mpirun ends every rank when "
                        "one fails; see the first error)\n",
                        WorldRank());
  sigterm_message_len = n > 0 ? std::min<size_t>(n, sizeof(sigterm_message) - 1) : 0;
  struct sigaction action = {};
  action.sa_handler = OnSigterm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

// MPI lives from the first use until the process exits (MPI_Finalize in the
// session's destructor at static destruction).
void EnsureMpi() {
  static std::unique_ptr<MpiSession> session;
  if (!session) {
    session = std::make_unique<MpiSession>(nullptr, nullptr);
    InstallSigtermHandler();
    // One device per rank: the ranks split the cores (intra-op threads of
    // fused loops), as the threads backend's devices do.
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    interp::SetIntraOpThreads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) /
                              std::max(1, ranks));
  }
}

int WorldSize() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

[[noreturn]] void AbortJob(const std::string& message) {
  std::fprintf(stderr, "error: rank %d: %s (aborting all ranks)\n", WorldRank(),
               message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; keeps [[noreturn]] honest.
}

// Collective: every rank passes its local verdict and gets back the error of
// the lowest failing rank (prefixed "rank r: " when the world has more than
// one rank), or Ok when all succeeded.
Status Agree(const Status& local) {
  MpiWait wait("an agreement between ranks");
  const int size = WorldSize();
  int failed = local.ok() ? 0 : 1;
  std::vector<int> all(size);
  MPI_Allgather(&failed, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int first = -1;
  for (int r = 0; r < size && first < 0; ++r)
    if (all[r]) first = r;
  if (first < 0) return Status::Ok();
  std::string msg = local.ok() ? std::string() : local.message();
  int len = static_cast<int>(msg.size());
  MPI_Bcast(&len, 1, MPI_INT, first, MPI_COMM_WORLD);
  msg.resize(len);
  MPI_Bcast(msg.data(), len, MPI_CHAR, first, MPI_COMM_WORLD);
  if (size > 1) msg = "rank " + std::to_string(first) + ": " + msg;
  return Status::Error(msg, local.ok() || WorldRank() != first ? SourceLoc() : local.loc());
}

// MESHSPLIT_MPI_CHECK=0 turns off the agreement on every collective's
// arguments (one small exchange per collective; see mpi_backend.h). Part of
// the program fingerprint, since ranks that differ here would make
// mismatched MPI calls.
bool CheckEachCollective() {
  const char* env = std::getenv("MESHSPLIT_MPI_CHECK");
  return env == nullptr || std::string_view(env) != "0";
}

uint64_t Fnv1a(std::string_view text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// What every rank must have in common to run one SPMD program together.
struct ProgramFingerprint {
  uint64_t module = 0;  // FNV-1a of the partitioned module's text
  int64_t num_partitions = 0;
  uint64_t inputs = 0;  // verify: FNV-1a of the seed (run: rank 0 alone reads inputs)
  uint64_t settings = 0;  // MESHSPLIT_MPI_CHECK
};

// Collective: exchanges the fingerprints and returns, on every rank, the
// same error when any rank's differs from rank 0's. Catches ranks that were
// given different module files, flags or inputs: without it they would
// either produce garbage or wait in mismatched collectives.
Status AgreeOnProgram(const ProgramFingerprint& mine) {
  MpiWait wait("the program fingerprint exchange");
  const int size = WorldSize();
  std::vector<ProgramFingerprint> all(size);
  MPI_Allgather(&mine, sizeof(ProgramFingerprint), MPI_BYTE, all.data(),
                sizeof(ProgramFingerprint), MPI_BYTE, MPI_COMM_WORLD);
  for (int r = 1; r < size; ++r) {
    std::string what;
    if (all[r].num_partitions != all[0].num_partitions)
      what = "number of partitions (" + std::to_string(all[r].num_partitions) + " vs " +
             std::to_string(all[0].num_partitions) + ")";
    else if (all[r].module != all[0].module)
      what = "partitioned module";
    else if (all[r].inputs != all[0].inputs)
      what = "seed";
    else if (all[r].settings != all[0].settings)
      what = "MESHSPLIT_MPI_CHECK setting";
    if (!what.empty())
      return Status::Error("ranks run different programs: rank " + std::to_string(r) + "'s " +
                           what + " differs from rank 0's; start every rank with the same " +
                           "module file, flags and input shapes");
  }
  return Status::Ok();
}

// The input shapes need no check of their own: rank 0 alone reads the
// inputs and checks them against the module, which every rank shares.
ProgramFingerprint Fingerprint(const Module& partitioned, int64_t num_partitions,
                               std::string_view extra) {
  ProgramFingerprint f;
  f.module = Fnv1a(PrintModule(partitioned));
  f.num_partitions = num_partitions;
  f.inputs = Fnv1a(extra);
  f.settings = CheckEachCollective() ? 1 : 0;
  return f;
}

void CollectLeaves(Literal& lit, std::vector<Literal*>& out) {
  if (lit.shape().IsTuple()) {
    for (Literal& e : lit.elements()) CollectLeaves(e, out);
    return;
  }
  out.push_back(&lit);
}

// Rank 0 cuts the full `inputs` into per-device shards and sends each rank
// its own; the other ranks ignore `inputs` (they may pass none) and receive.
// Returns this rank's arguments, or the same error on every rank.
StatusOr<std::vector<Literal>> ScatterArguments(const Computation& entry,
                                                const std::vector<Literal>& inputs) {
  const int rank = WorldRank();
  const int size = WorldSize();
  const int num_params = entry.parameter_count();
  std::vector<std::vector<Literal>> parts(num_params);  // rank 0: [param][device]
  Status split_status = Status::Ok();
  if (rank == 0) {
    if (static_cast<int>(inputs.size()) != num_params)
      split_status = Status::Error("the entry computation takes " + std::to_string(num_params) +
                                   " parameters, got " + std::to_string(inputs.size()) +
                                   " inputs");
    for (int p = 0; split_status.ok() && p < num_params; ++p) {
      const Instruction* param = entry.parameter(p);
      StatusOr<std::vector<Literal>> split = SplitByShardings(
          inputs[p], param->shape(), ShardingOrReplicated(*param), size, /*poison_padding=*/true);
      if (!split.ok()) {
        split_status = Status::Error("parameter " + std::to_string(p) + " (%" + param->name() +
                                         "): " + split.status().message(),
                                     param->loc());
        break;
      }
      parts[p] = std::move(split).value();
      for (Literal& part : parts[p]) {
        std::vector<Literal*> leaves;
        CollectLeaves(part, leaves);
        for (const Literal* leaf : leaves)
          if (leaf->size_bytes() > INT_MAX && split_status.ok())
            split_status = Status::Error("parameter " + std::to_string(p) +
                                         ": shards over 2 GiB are not supported by the mpi "
                                         "backend yet");
      }
    }
  }
  MS_RETURN_IF_ERROR(Agree(split_status));
  // Every rank knows its shard's shape from the (agreed) partitioned module:
  // the entry parameter's per-device shape. Leaves travel one message each.
  MpiWait wait("receiving the input shards");
  std::vector<Literal> args(num_params);
  for (int p = 0; p < num_params; ++p) {
    if (rank == 0) {
      for (int d = 1; d < size; ++d) {
        std::vector<Literal*> leaves;
        CollectLeaves(parts[p][d], leaves);
        for (Literal* leaf : leaves)
          MPI_Send(leaf->raw(), static_cast<int>(leaf->size_bytes()), MPI_BYTE, d, p,
                   MPI_COMM_WORLD);
      }
      args[p] = std::move(parts[p][0]);
      parts[p].clear();  // free the other shards as soon as they are sent
    } else {
      args[p] = Literal(entry.parameter(p)->shape());
      std::vector<Literal*> leaves;
      CollectLeaves(args[p], leaves);
      for (Literal* leaf : leaves)
        MPI_Recv(leaf->raw(), static_cast<int>(leaf->size_bytes()), MPI_BYTE, 0, p,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  return args;
}

// Runs this rank's partition of `partitioned` (rank 0 holds the full
// `inputs` and scatters the shards) and gathers the per-device results to
// rank 0 (empty elsewhere). A failure during the run aborts the job.
std::vector<Literal> RunOwnPartitionAndGather(const Module& partitioned,
                                              const std::vector<Literal>& inputs,
                                              int64_t max_while_iterations) {
  const int rank = WorldRank();
  const int size = WorldSize();
  StatusOr<std::vector<Literal>> scattered = ScatterArguments(*partitioned.entry(), inputs);
  if (!scattered.ok()) AbortJob(scattered.status().message());
  std::vector<Literal> args = std::move(scattered).value();

  // One BLAS thread per rank, as the threads backend uses one per device:
  // keeps results bit-identical between the backends.
  const int saved_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  MpiCommunicator comm;
  comm.set_check_agreement(CheckEachCollective());
  CollectiveAdapter adapter(comm);
  EvalContext ctx;
  ctx.partition_id = rank;
  ctx.replica_id = 0;
  ctx.collectives = &adapter;
  ctx.max_while_iterations = max_while_iterations;
  StatusOr<Literal> r = EvaluateModule(partitioned, std::move(args), ctx);
  openblas_set_num_threads(saved_threads);
  if (!r.ok()) AbortJob("device " + std::to_string(rank) + ": " + r.status().message());
  // Small collectives checked only part of their arguments' history (see
  // MpiCommunicator::kEnvelopeBytes); check all of it before trusting the
  // results.
  Status history = comm.CheckHistory();
  if (!history.ok()) AbortJob("device " + std::to_string(rank) + ": " + history.message());
  Literal local = std::move(r).value();

  // Flatten the leaves; every rank has the same result shape.
  std::vector<Literal*> leaves;
  CollectLeaves(local, leaves);
  std::vector<unsigned char> send;
  for (const Literal* l : leaves)
    send.insert(send.end(), l->raw(), l->raw() + l->size_bytes());
  long long my_bytes = static_cast<long long>(send.size());
  std::vector<long long> bytes(size);
  {
    MpiWait wait("gathering the result sizes");
    MPI_Gather(&my_bytes, 1, MPI_LONG_LONG, bytes.data(), 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  }
  Status size_status = Status::Ok();
  if (rank == 0) {
    for (int d = 0; d < size; ++d)
      if (bytes[d] != my_bytes || bytes[d] > (1LL << 31) - 1)
        size_status = Status::Error("device " + std::to_string(d) + " returned " +
                                    std::to_string(bytes[d]) +
                                    " result bytes; device 0 returned " +
                                    std::to_string(my_bytes) + " (or over 2 GiB)");
  }
  Status agreed = Agree(size_status);
  if (!agreed.ok()) AbortJob(agreed.message());
  std::vector<unsigned char> recv;
  std::vector<int> counts(size, static_cast<int>(my_bytes)), displs(size);
  for (int d = 0; d < size; ++d) displs[d] = static_cast<int>(d * my_bytes);
  if (rank == 0) recv.resize(static_cast<size_t>(my_bytes) * size);
  {
    MpiWait wait("gathering the results");
    MPI_Gatherv(send.data(), static_cast<int>(my_bytes), MPI_BYTE, recv.data(), counts.data(),
                displs.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
  }
  std::vector<Literal> per_device;
  if (rank != 0) return per_device;
  per_device.resize(size);
  for (int d = 0; d < size; ++d) {
    per_device[d] = local;  // same shape; overwritten with device d's bytes
    std::vector<Literal*> dst;
    CollectLeaves(per_device[d], dst);
    size_t off = static_cast<size_t>(displs[d]);
    for (Literal* l : dst) {
      if (l->size_bytes() > 0) std::memcpy(l->raw(), recv.data() + off, l->size_bytes());
      off += l->size_bytes();
    }
  }
  return per_device;
}

Status CheckWorld(int64_t num_partitions) {
  if (WorldSize() != num_partitions)
    return Status::Error("backend 'mpi' needs one rank per partition: the module has " +
                         std::to_string(num_partitions) + " partitions but mpirun started " +
                         std::to_string(WorldSize()) + " ranks (use mpirun -np " +
                         std::to_string(num_partitions) + ")");
  return Status::Ok();
}

}  // namespace

StatusOr<MpiRunOutcome> RunModuleOnMpi(Module& module, StatusOr<std::vector<Literal>> inputs,
                                       const SpmdRunRequest& request) {
  EnsureMpi();
  // Every early exit below is agreed by all ranks: a rank that returned on
  // its own would leave the others waiting in the next collective.
  MS_RETURN_IF_ERROR(Agree(CheckWorld(request.num_partitions)));
  MS_RETURN_IF_ERROR(Agree(inputs.ok() ? Status::Ok() : inputs.status()));
  MS_RETURN_IF_ERROR(Agree(module.entry() != nullptr
                               ? Status::Ok()
                               : Status::Error("module has no entry computation")));
  // Partition (or check the partitioned module) on every rank; the result is
  // deterministic, so every rank runs the same program.
  std::unique_ptr<Module> owned;
  const Module* partitioned = &module;
  Shape result_shape;
  Status prepared = Status::Ok();
  if (request.already_partitioned) {
    if (module.num_partitions() != request.num_partitions)
      prepared = Status::Error("the module header says num_partitions=" +
                               std::to_string(module.num_partitions()) + " but " +
                               std::to_string(request.num_partitions) + " were requested");
    else
      prepared = meshsplit::VerifyModule(static_cast<const Module&>(module));
    if (prepared.ok()) result_shape = GlobalResultShape(module);
  } else {
    result_shape = module.entry()->root()->shape();
    StatusOr<std::unique_ptr<Module>> p =
        PropagateAndPartition(module, request.num_partitions, request.propagate,
                              /*strict=*/false, /*failed_stage=*/nullptr, request.partition,
                              request.pipeline);
    if (p.ok()) {
      owned = std::move(p).value();
      partitioned = owned.get();
    } else {
      prepared = p.status();
    }
  }
  MS_RETURN_IF_ERROR(Agree(prepared));
  MS_RETURN_IF_ERROR(AgreeOnProgram(
      Fingerprint(*partitioned, request.num_partitions, "run")));
  std::vector<Literal> per_device = RunOwnPartitionAndGather(*partitioned, *inputs, request.max_while_iterations);
  MpiRunOutcome out;
  out.is_root = WorldRank() == 0;
  Status assembled = Status::Ok();
  if (out.is_root) {
    const Instruction* root = partitioned->entry()->root();
    StatusOr<Literal> full = Assemble(per_device, result_shape, ShardingOrReplicated(*root));
    if (full.ok())
      out.result = std::move(full).value();
    else
      assembled = Status::Error("result (%" + root->name() + "): " + full.status().message(),
                                root->loc());
  }
  MS_RETURN_IF_ERROR(Agree(assembled));
  return out;
}

MpiVerifyOutcome VerifyModuleOnMpi(Module& module, const VerifyOptions& options) {
  EnsureMpi();
  MpiVerifyOutcome out;
  out.is_root = WorldRank() == 0;
  VerifyResult& result = out.result;
  auto fail = [&](const std::string& stage, const Status& s) {
    result.status = stage;
    result.message = s.ToString();
    return out;
  };
  Status world = Agree(CheckWorld(options.num_partitions));
  if (!world.ok()) return fail("spmd", world);
  Status entry = Agree(module.entry() != nullptr
                           ? Status::Ok()
                           : Status::Error("module has no entry computation"));
  if (!entry.ok()) return fail("reference", entry);
  std::string stage;
  std::unique_ptr<Module> unpipelined;
  StatusOr<std::unique_ptr<Module>> partitioned =
      PropagateAndPartition(module, options.num_partitions, options.propagate, options.strict,
                            &stage, options.partition, options.pipeline, &unpipelined);
  Status agreed = Agree(partitioned.ok() ? Status::Ok() : partitioned.status());
  if (!agreed.ok()) return fail(stage.empty() ? "partition" : stage, agreed);
  // With pipelining the one-device reference is the module before it.
  const Module& reference = unpipelined != nullptr ? *unpipelined : module;
  CompareOptions copts = options.compare;
  copts.reduction_length = ReductionLength(reference);
  result.reduction_length = copts.reduction_length;
  // Rank 0 generates the seeded inputs and scatters the shards. The seed is
  // still part of the fingerprint: ranks launched with different flags are
  // a misconfigured job, whichever flag differs.
  std::vector<Literal> inputs;
  if (out.is_root) inputs = RandomInputs(*reference.entry(), options.seed);
  Status same = AgreeOnProgram(Fingerprint(**partitioned, options.num_partitions,
                                           "verify seed " + std::to_string(options.seed)));
  if (!same.ok()) return fail("spmd", same);
  std::vector<Literal> per_device = RunOwnPartitionAndGather(**partitioned, inputs,
                                                             options.max_while_iterations);
  // Rank 0 judges; the verdict is shared so every rank exits alike.
  if (out.is_root) {
    EvalContext ref_ctx;
    ref_ctx.max_while_iterations = options.max_while_iterations;
    StatusOr<Literal> ref = EvaluateModule(reference, inputs, ref_ctx);
    const Instruction* proot = (*partitioned)->entry()->root();
    if (!ref.ok()) {
      result.status = "reference";
      result.message = ref.status().ToString();
    } else {
      StatusOr<Literal> got =
          Assemble(per_device, reference.entry()->root()->shape(), ShardingOrReplicated(*proot));
      if (!got.ok()) {
        result.status = "assemble";
        result.message = "result (%" + proot->name() + "): " + got.status().message();
      } else {
        Comparison c = CompareValues(*ref, *got, "out", copts);
        result.max_abs_error = c.max_abs_error;
        result.max_rel_error = c.max_rel_error;
        if (!c.ok) {
          result.status = "mismatch";
          result.message = c.first_mismatch + " (" + std::to_string(c.mismatches) +
                           " elements differ)";
          result.divergence_detail =
              "divergence localisation is not done on the mpi backend; rerun with "
              "--backend threads to locate it";
        }
      }
    }
  }
  // Share rank 0's status and message. Not under MpiWait: the other ranks
  // wait here while rank 0 evaluates the whole unpartitioned module, which
  // may legitimately take longer than any per-wait timeout.
  std::string verdict = result.status + '\n' + result.message;
  int len = static_cast<int>(verdict.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  verdict.resize(len);
  MPI_Bcast(verdict.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!out.is_root) {
    size_t nl = verdict.find('\n');
    result.status = verdict.substr(0, nl);
    result.message = verdict.substr(nl + 1);
  }
  return out;
}

Status AgreeAcrossRanks(const Status& local) {
  EnsureMpi();
  return Agree(local);
}

bool MpiIsRoot() {
  EnsureMpi();
  return WorldRank() == 0;
}

#endif  // MESHSPLIT_HAVE_MPI

}  // namespace meshsplit
