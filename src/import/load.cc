// Dispatches module loading on the file extension (see load.h).
#include "import/load.h"

#include "import/shardy_input.h"
#include "ir/attribute_text.h"
#include "ir/verifier.h"
#include "text/parser.h"
#ifdef MESHSPLIT_HAVE_ONNX
#include "import/onnx_importer.h"
#endif

namespace meshsplit {

namespace {
bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

bool HaveOnnxImporter() {
#ifdef MESHSPLIT_HAVE_ONNX
  return true;
#else
  return false;
#endif
}

namespace {
// A comma-separated list of names inside one frontend attribute.
constexpr char kOutputNamesKey[] = "onnx_output_names";
}  // namespace

std::vector<std::string> EntryOutputNames(const Module& module) {
  std::optional<std::string> list = ModuleFrontendAttribute(module, kOutputNamesKey);
  if (!list) return {};
  std::vector<std::string> names;
  for (size_t start = 0;;) {
    size_t comma = list->find(',', start);
    names.push_back(list->substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

void SetEntryOutputNames(Module& module, const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& n : names) {
    if (n.find(',') != std::string::npos) return;
    list += (list.empty() ? "" : ",") + n;
  }
  if (names.empty()) return;
  SetModuleFrontendAttribute(module, kOutputNamesKey, list);
}

namespace {

// An ONNX model is a serialized ModelProto; its first field in practice is
// ir_version (field 1, varint: tag byte 0x08). HLO text never starts with
// that byte, and a text file holds no NUL bytes where protobufs nearly
// always do.
bool LooksLikeOnnx(const std::string& bytes) {
  return !bytes.empty() && bytes[0] == 0x08 && bytes.find('\0') != std::string::npos;
}

// StableHLO / MLIR text: what `jax.jit(f).lower(...).as_text()` prints by
// default.
bool LooksLikeMlir(const std::string& path, const std::string& text) {
  if (EndsWith(path, ".mlir") || EndsWith(path, ".mlirbc")) return true;
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return false;
  return text.compare(start, 7, "module ") == 0 || text.compare(start, 7, "module@") == 0 ||
         text.compare(start, 6, "func.") == 0 || text.compare(start, 2, "#loc") == 0 ||
         text.compare(start, 3, "ML\xefR") == 0;
}

StatusOr<std::unique_ptr<Module>> ReadModule(const std::string& path,
                                             const ParseOptions& parse) {
  MS_ASSIGN_OR_RETURN(std::shared_ptr<const SourceFile> file, ReadSourceFile(path));
  if (EndsWith(path, ".onnx") || LooksLikeOnnx(file->text)) {
#ifdef MESHSPLIT_HAVE_ONNX
    if (path == "-") return ImportOnnxBytes(file->text, "stdin");
    std::string base = path.substr(path.find_last_of('/') + 1);
    if (EndsWith(base, ".onnx")) base.resize(base.size() - 5);
    return ImportOnnxBytes(file->text, base);
#else
    return Status::Error(path + ": this meshsplit was built without the ONNX "
                         "importer (install libonnx-dev and libprotobuf-dev)");
#endif
  }
  if (LooksLikeMlir(path, file->text))
    return Status::Error(
        path + ": this is StableHLO / MLIR text, which meshsplit does not read yet; give it "
               "HLO text instead: from JAX, run with XLA_FLAGS=--xla_dump_to=DIR and take "
               "DIR/*.before_optimizations.txt, or print "
               "jax.jit(f).lower(...).as_text(dialect=\"hlo\")");
  return ParseHloText(std::move(file), parse);
}

}  // namespace

StatusOr<std::unique_ptr<Module>> ParseHloText(std::shared_ptr<const SourceFile> file,
                                               const ParseOptions& parse) {
  MS_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, ParseModule(std::move(file), parse));
  // Shardy-era HLO (JAX's default) carries its shardings as xla.sdy.*
  // attributes; lowered here, every command reads them.
  MS_RETURN_IF_ERROR(ImportShardy(*module).status());
  return module;
}

StatusOr<std::unique_ptr<Module>> LoadModule(const std::string& path, const ParseOptions& parse) {
  MS_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, ReadModule(path, parse));
  // Propagation and the partitioner assume a well-typed module (operand
  // ranks, dimension numbers, sharding ranks); checking here is what keeps
  // malformed input from reaching them.
  MS_RETURN_IF_ERROR(VerifyModule(*module));
  return module;
}

}  // namespace meshsplit
