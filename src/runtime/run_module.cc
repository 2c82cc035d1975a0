// Module-level running: .npy inputs -> interpreter -> .npy outputs.
#include "runtime/run_module.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "runtime/npy.h"

namespace meshsplit {

StatusOr<std::vector<Literal>> ReadEntryInputs(const Computation& entry, const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<Literal> inputs;
  for (int i = 0; i < entry.parameter_count(); ++i) {
    const Instruction* p = entry.parameter(i);
    if (p == nullptr) return Status::Error("entry computation has no parameter " + std::to_string(i));
    std::string what = "parameter " + std::to_string(i) + " '" + p->name() + "'";
    if (!p->shape().IsArray())
      return Status::Error(what + " has shape " + p->shape().ToString(false) +
                               "; only array parameters can be read from .npy files",
                           p->loc());
    fs::path by_name = fs::path(dir) / (p->name() + ".npy");
    fs::path by_index = fs::path(dir) / ("param" + std::to_string(i) + ".npy");
    std::error_code ec;
    fs::path path = fs::exists(by_name, ec) ? by_name : by_index;
    if (!fs::exists(path, ec))
      return Status::Error("missing input for " + what + ": neither " + by_name.string() + " nor " +
                           by_index.string() + " exists");
    MS_ASSIGN_OR_RETURN(Literal lit, ReadNpy(path.string()));
    const Shape& want = p->shape();
    PrimitiveType want_t = want.element_type();
    if (want_t == PrimitiveType::BF16 && lit.element_type() == PrimitiveType::U16 &&
        lit.shape().dimensions() == want.dimensions()) {
      // bf16 travels as raw <u2 words.
      Literal bf(Shape(PrimitiveType::BF16, want.dimensions()));
      if (lit.size_bytes() > 0) std::memcpy(bf.raw(), lit.raw(), lit.size_bytes());
      lit = std::move(bf);
    }
    if (lit.element_type() != want_t || lit.shape().dimensions() != want.dimensions())
      return Status::Error(path.string() + ": " + what + " expects " + want.ToString(false) +
                           " but the file holds " + lit.shape().ToString(false));
    inputs.push_back(std::move(lit));
  }
  return inputs;
}

StatusOr<Literal> RunEntry(const Module& module, std::vector<Literal> inputs, const RunOptions& options) {
  return EvaluateModule(module, std::move(inputs), options.context);
}

namespace {
void Flatten(const Literal& l, std::vector<const Literal*>& out) {
  if (l.shape().IsTuple()) {
    for (const Literal& e : l.elements()) Flatten(e, out);
  } else {
    out.push_back(&l);
  }
}
}  // namespace

std::vector<const Literal*> OutputArrays(const Literal& result) {
  std::vector<const Literal*> out;
  Flatten(result, out);
  return out;
}

namespace {

// The file names of `count` outputs: `names` made safe, or out<i>.npy.
std::vector<std::string> OutputFileNames(size_t count, const std::vector<std::string>& names) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  if (names.size() == count) {
    for (std::string n : names) {
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-' && ch != '_')
          ch = '_';
      if (n.empty() || n[0] == '.' || !seen.insert(n).second) break;
      files.push_back(n + ".npy");
    }
    if (files.size() == count) return files;
  }
  files.clear();
  for (size_t i = 0; i < count; ++i) files.push_back("out" + std::to_string(i) + ".npy");
  return files;
}

}  // namespace

Status WriteOutputs(const Literal& result, const std::string& dir,
                    const std::vector<std::string>& names, std::vector<std::string>* written) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Error(dir + ": cannot create output directory: " + ec.message());
  std::vector<const Literal*> outs = OutputArrays(result);
  // Serialise everything first so unsupported outputs fail before any write.
  std::vector<std::string> blobs;
  for (size_t i = 0; i < outs.size(); ++i) {
    StatusOr<std::string> b = SerializeNpy(*outs[i]);
    if (!b.ok()) return Status::Error("output " + std::to_string(i) + ": " + b.status().message());
    blobs.push_back(std::move(b).value());
  }
  const std::vector<std::string> files = OutputFileNames(blobs.size(), names);
  std::vector<fs::path> temps, finals;
  std::string suffix = ".tmp." + std::to_string(::getpid());
  auto cleanup = [&] {
    for (const fs::path& t : temps) fs::remove(t, ec);
  };
  for (size_t i = 0; i < blobs.size(); ++i) {
    fs::path final_path = fs::path(dir) / files[i];
    fs::path tmp = fs::path(dir) / ("." + files[i] + suffix);
    temps.push_back(tmp);
    finals.push_back(final_path);
    FILE* f = std::fopen(tmp.c_str(), "wb");
    bool ok = f != nullptr && std::fwrite(blobs[i].data(), 1, blobs[i].size(), f) == blobs[i].size();
    if (f != nullptr && std::fclose(f) != 0) ok = false;
    if (!ok) {
      cleanup();
      return Status::Error(final_path.string() + ": cannot write output");
    }
  }
  for (size_t i = 0; i < temps.size(); ++i) {
    fs::rename(temps[i], finals[i], ec);
    if (ec) {
      cleanup();
      return Status::Error(finals[i].string() + ": cannot write output: " + ec.message());
    }
  }
  if (written != nullptr) *written = files;
  return Status::Ok();
}

std::string FormatOutput(const Literal& literal, size_t max_chars) {
  std::string text = literal.shape().ToString(false) + " ";
  if (literal.shape().IsArray() && literal.element_count() > static_cast<int64_t>(max_chars)) {
    // Do not format millions of elements just to cut them.
    Literal head(Shape(literal.element_type(), {static_cast<int64_t>(max_chars / 2)}));
    std::memcpy(head.raw(), literal.raw(), head.size_bytes());
    text += head.ToString();
  } else {
    text += literal.ToString();
  }
  size_t limit = max_chars + literal.shape().ToString(false).size() + 1;
  if (text.size() > limit) {
    text.resize(limit);
    text += " ... (" + std::to_string(literal.shape().IsArray() ? literal.element_count() : 0) +
            " elements, truncated)";
  }
  return text;
}

}  // namespace meshsplit
