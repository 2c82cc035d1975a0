// libFuzzer target: the HLO text parser and printer. Any input may be
// refused, none may crash; a module that parses and verifies prints to text
// that parses back and prints the same (text/printer.h promises it).
#include "fuzz_common.h"
#include "ir/verifier.h"
#include "text/parser.h"
#include "text/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshsplit;
  auto module = ParseModuleText(fuzz::AsString(data, size));
  if (!module.ok()) return 0;
  if (!VerifyModule(**module).ok()) return 0;
  const std::string printed = PrintModule(**module);
  auto again = ParseModuleText(printed);
  if (!again.ok()) fuzz::Fail("printed module does not parse back", again.status());
  if (PrintModule(**again) != printed)
    fuzz::Fail("printed module prints differently after a round trip", Status::Ok());
  return 0;
}
