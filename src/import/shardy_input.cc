// Shardy-era input detection (see shardy_input.h).
#include "import/shardy_input.h"

#include <iostream>
#include <string>

#include "support/source_loc.h"

namespace meshsplit {

namespace {
constexpr const char* kShardyPrefix = "xla.sdy.";

bool MentionsShardy(const std::string* text) {
  return text != nullptr && text->find(kShardyPrefix) != std::string::npos;
}
}  // namespace

Status CheckShardyInput(const Module& module, bool strict) {
  int64_t count = 0;
  std::string first_what;
  SourceLoc first_loc;
  for (const auto& c : module.computations()) {
    for (const auto& instr : c->instructions()) {
      std::string what;
      if (instr->opcode() == Opcode::kCustomCall &&
          instr->attrs().custom_call_target.rfind(kShardyPrefix, 0) == 0)
        what = "custom-call %" + instr->name() + " (custom_call_target=\"" +
               instr->attrs().custom_call_target + "\")";
      else if (MentionsShardy(instr->attrs().FindExtra("frontend_attributes")))
        what = "the frontend_attributes of %" + instr->name();
      if (what.empty()) continue;
      if (count++ == 0) {
        first_what = what;
        first_loc = instr->loc();
      }
    }
  }
  // The header last: an instruction gives the diagnostic a location.
  for (const auto& [key, value] : module.header_attrs())
    if (key == "frontend_attributes" && MentionsShardy(&value) && count++ == 0)
      first_what = "the module's frontend_attributes";
  if (count == 0) return Status::Ok();
  std::string msg =
      "this module carries Shardy shardings (" + std::to_string(count) +
      " xla.sdy.* attributes or custom-calls, the first in " + first_what +
      "), which meshsplit does not read: they would be ignored and the plan replicated "
      "where no GSPMD sharding={...} says otherwise. Export GSPMD shardings instead (JAX: "
      "jax.config.update('jax_use_shardy_partitioner', False))";
  if (strict) return Status::Error(msg, first_loc);
  std::cerr << FormatDiagnostic(first_loc, "warning", msg) << "\n";
  return Status::Ok();
}

}  // namespace meshsplit
