// Dispatches module loading on the file extension (see load.h).
#include "import/load.h"

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

StatusOr<std::unique_ptr<Module>> LoadModule(const std::string& path) {
  if (EndsWith(path, ".onnx")) {
#ifdef MESHSPLIT_HAVE_ONNX
    return ImportOnnxFile(path);
#else
    return Status::Error(path + ": this meshsplit was built without the ONNX "
                         "importer (install libonnx-dev and libprotobuf-dev)");
#endif
  }
  return ParseModuleFile(path);
}

}  // namespace meshsplit
