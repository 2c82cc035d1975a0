// ONNX front end: lowers an ONNX model (opset 13, static shapes) to a
// meshsplit Module. Graph inputs become entry parameters named after the ONNX
// inputs (sanitised to HLO identifiers, see docs/onnx_import.md),
// initializers become constants, outputs become the root tuple. Shape
// computations whose inputs are all constants are folded at import time.
#pragma once

#include <memory>
#include <string>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

struct OnnxImportOptions {
  // Results with at most this many elements whose inputs are all constants
  // are evaluated at import time (shape arithmetic, transposed weights...).
  int64_t fold_limit = 1 << 20;
};

StatusOr<std::unique_ptr<Module>> ImportOnnxFile(const std::string& path,
                                                 const OnnxImportOptions& opts = {});
// Same, from serialized ModelProto bytes; `name` is used in messages.
StatusOr<std::unique_ptr<Module>> ImportOnnxBytes(const std::string& bytes,
                                                  const std::string& name,
                                                  const OnnxImportOptions& opts = {});

// The HLO identifier an ONNX tensor name becomes: characters outside
// [A-Za-z0-9_.-] turn into '_', and a leading character that is not a letter
// or '_' gets a '_' prefix.
std::string SanitizeOnnxName(const std::string& name);

}  // namespace meshsplit
