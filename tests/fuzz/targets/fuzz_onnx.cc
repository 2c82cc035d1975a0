// libFuzzer target: the ONNX importer on (mutated) serialized ModelProtos,
// then the IR verifier, as `meshsplit import` and every command loading a
// .onnx file run them. Refusals are fine; a crash is a bug.
#include "fuzz_common.h"
#include "import/onnx_importer.h"
#include "ir/verifier.h"
#include "text/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshsplit;
  auto module = ImportOnnxBytes(fuzz::AsString(data, size), "fuzz");
  if (!module.ok()) return 0;
  if (VerifyModule(**module).ok()) (void)PrintModule(**module);
  return 0;
}
