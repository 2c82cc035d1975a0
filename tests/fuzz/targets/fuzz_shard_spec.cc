// libFuzzer target: the sharding spec reader (--shard SPEC.json), then the
// spec applied to a small module and the module propagated and partitioned.
// Refusals are fine; a crash, or a spec that applies into a module the
// verifier rejects, is a bug.
#include "compiler/compile.h"
#include "fuzz_common.h"
#include "import/shard_spec.h"
#include "ir/verifier.h"
#include "text/parser.h"

namespace {

// Parameters of ranks 1-3, a constant (annotated through a custom-call) and
// an output aliased to a parameter (outputs_follow_inputs).
constexpr const char* kModule = R"(HloModule m, input_output_alias={ {1}: (1, {}, may-alias) }

ENTRY e {
  x = f32[8,4] parameter(0)
  w = f32[4,8] parameter(1)
  b = f32[8] parameter(2)
  t = f32[2,4,8] parameter(3)
  c = f32[8] constant({1, 2, 3, 4, 5, 6, 7, 8})
  d = f32[8,8] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,8] broadcast(b), dimensions={1}
  cb = f32[8,8] broadcast(c), dimensions={0}
  s = f32[8,8] add(d, bb)
  y = f32[8,8] multiply(s, cb)
  z = f32[] constant(0)
  r = f32[4,8] reduce(t, z), dimensions={0}, to_apply=sum
  ROOT out = (f32[8,8], f32[4,8], f32[4,8]) tuple(y, w, r)
}

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshsplit;
  auto spec = ParseShardSpec(fuzz::AsString(data, size), "fuzz.json");
  if (!spec.ok() || !spec->has_mesh || spec->mesh.num_devices() > fuzz::kMaxDevices) return 0;
  static const std::unique_ptr<Module> base = [] {
    auto m = ParseModuleText(kModule);
    if (!m.ok()) fuzz::Fail("the base module does not parse", m.status());
    if (Status st = VerifyModule(**m); !st.ok()) fuzz::Fail("the base module does not verify", st);
    return std::move(m).value();
  }();
  std::unique_ptr<Module> module = base->Clone();
  if (!ApplyShardSpec(*module, *spec).ok()) return 0;
  if (Status st = VerifyModule(*module); !st.ok())
    fuzz::Fail("the module with the spec applied does not verify", st);
  CompileOptions options;
  options.partition.warn_on_fallback = false;
  options.verify_output = true;
  CompileResult result;
  Status st = Compile(*module, options, &result);
  if (!st.ok() && result.failed_pass == "partition" &&
      st.message().rfind("the partitioned module is ill-formed", 0) == 0)
    fuzz::Fail("the partitioner emitted an ill-formed program", st);
  return 0;
}
