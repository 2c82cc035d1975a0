// libFuzzer target: parse, verify, propagate, partition, and verify the SPMD
// program (as `meshsplit partition` does). Refusals are fine; a crash, or a
// partitioned program the verifier rejects, is a bug.
#include "compiler/compile.h"
#include "fuzz_common.h"
#include "ir/verifier.h"
#include "text/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshsplit;
  auto module = ParseModuleText(fuzz::AsString(data, size));
  if (!module.ok() || !VerifyModule(**module).ok() || !fuzz::WithinLimits(**module)) return 0;
  CompileOptions options;
  options.partition.warn_on_fallback = false;
  options.verify_output = true;
  CompileResult result;
  Status st = Compile(**module, options, &result);
  if (!st.ok() && result.failed_pass == "partition" &&
      st.message().rfind("the partitioned module is ill-formed", 0) == 0)
    fuzz::Fail("the partitioner emitted an ill-formed program", st);
  return 0;
}
