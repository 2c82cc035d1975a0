// The one way the CLI and tools load a module from a file: HLO text, or an
// ONNX model (imported with the ONNX front end) chosen by the extension.
#pragma once

#include <memory>
#include <string>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

// Loads `path`: `*.onnx` goes through ImportOnnxFile, anything else is parsed
// as HLO text. Errors name the file.
StatusOr<std::unique_ptr<Module>> LoadModule(const std::string& path);

// True when this build has the ONNX importer (libonnx + protobuf found).
bool HaveOnnxImporter();

}  // namespace meshsplit
