// libFuzzer target: parse, verify (as every command loads), then sharding
// propagation. Refusals are fine; a crash, or a propagated module that no
// longer verifies (a sharding that does not fit its value), is a bug.
#include "compiler/compile.h"
#include "fuzz_common.h"
#include "ir/verifier.h"
#include "text/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshsplit;
  auto module = ParseModuleText(fuzz::AsString(data, size));
  if (!module.ok() || !VerifyModule(**module).ok() || !fuzz::WithinLimits(**module)) return 0;
  CompileOptions options;
  options.until = CompileStage::kPropagated;
  if (!Compile(**module, options, nullptr).ok()) return 0;
  if (Status st = VerifyModule(**module); !st.ok())
    fuzz::Fail("the propagated module does not verify", st);
  return 0;
}
