// The one way the CLI and tools load a module from a file: HLO text, or an
// ONNX model (imported with the ONNX front end) chosen by the extension.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/module.h"
#include "support/source_loc.h"
#include "support/status.h"
#include "text/parser.h"

namespace meshsplit {

// Loads `path`: `*.onnx` goes through ImportOnnxFile, anything else is parsed
// as HLO text and its Shardy shardings, if any, lowered (ImportShardy,
// import/shardy_input.h); then runs the IR verifier (ir/verifier.h), so no command works
// on a module whose shapes, attributes or shardings are inconsistent. Errors
// name the file (and the line, when there is one). `parse` applies to HLO
// text (`xla_strict`: refuse what XLA's parser refuses).
StatusOr<std::unique_ptr<Module>> LoadModule(const std::string& path,
                                             const ParseOptions& parse = {});

// HLO text to a module: the parser, then the Shardy reader. What LoadModule
// does for a text file (without the verifier), for callers holding the text
// (the Python binding's `parse`).
StatusOr<std::unique_ptr<Module>> ParseHloText(std::shared_ptr<const SourceFile> file,
                                               const ParseOptions& parse = {});

// True when this build has the ONNX importer (libonnx + protobuf found).
bool HaveOnnxImporter();

// The names of the entry result's elements, as the module's frontend
// attribute `onnx_output_names` records them for an imported ONNX model
// (its graph outputs, in order); empty when the module has none. `run` names
// its output files after them.
std::vector<std::string> EntryOutputNames(const Module& module);

// Records `names` as above. Names holding ',' are not recorded (the
// attribute is one comma-separated list).
void SetEntryOutputNames(Module& module, const std::vector<std::string>& names);

}  // namespace meshsplit
