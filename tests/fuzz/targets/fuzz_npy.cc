// libFuzzer target: the .npy reader (run/verify --inputs). Refusals are fine;
// a crash is a bug, and an array it reads writes back to a file it reads
// again as the same array.
#include <cstring>

#include "fuzz_common.h"
#include "runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshsplit;
  auto lit = ParseNpy(fuzz::AsString(data, size), "fuzz.npy");
  if (!lit.ok()) return 0;
  auto bytes = SerializeNpy(*lit);
  if (!bytes.ok()) return 0;  // a type .npy cannot hold back (none today)
  auto again = ParseNpy(*bytes, "again.npy");
  if (!again.ok()) fuzz::Fail("a written .npy does not read back", again.status());
  if (again->shape().ToString(false) != lit->shape().ToString(false) ||
      again->size_bytes() != lit->size_bytes() ||
      (lit->size_bytes() > 0 && std::memcmp(again->raw(), lit->raw(), lit->size_bytes()) != 0))
    fuzz::Fail("a written .npy reads back different", Status::Ok());
  return 0;
}
