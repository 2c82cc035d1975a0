// Helper for the shape-inference tests: the inferred shape of the root of an
// entry computation written as HLO text.
#pragma once

#include <string>

#include "ir/computation.h"
#include "ir/shape_inference.h"
#include "text/parser.h"

namespace meshsplit::irtest {

// Parses `body` as the entry computation (after `prelude` computations)
// and returns the inferred shape of its root, printed without layout, or
// the parse / inference error.
inline std::string InferRoot(const std::string& body, const std::string& prelude = "",
                             const std::string& header = "HloModule m") {
  std::string text = header + "\n\n" + prelude + "\nENTRY e {\n" + body + "\n}\n";
  auto module = ParseModuleText(text);
  if (!module.ok()) return "parse error: " + module.status().ToString();
  StatusOr<Shape> shape = InferShape(*(*module)->entry()->root());
  if (!shape.ok()) return "error: " + std::string(shape.status().message());
  return shape->ToString(/*print_layout=*/false);
}

inline bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace meshsplit::irtest
