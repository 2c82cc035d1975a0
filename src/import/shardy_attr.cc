// A recursive-descent reader for the Shardy attribute texts (see
// shardy_attr.h). The texts come from users' files, so every malformation is
// a ParseError with an offset, never an exception.
#include "import/shardy_attr.h"

#include <cctype>
#include <charconv>

namespace meshsplit::sdy {

int64_t MeshDecl::num_devices() const {
  if (!device_ids.empty()) return static_cast<int64_t>(device_ids.size());
  int64_t n = 1;
  for (const MeshAxisDecl& a : axes) n *= a.size;
  return n;
}

std::string AxisRef::ToString() const {
  std::string s = "\"" + name + "\"";
  if (size) s += ":(" + std::to_string(pre_size) + ")" + std::to_string(*size);
  return s;
}

namespace {

class Reader {
 public:
  Reader(std::string_view text, ParseError* error) : t_(text), error_(error) {}

  bool Fail(const std::string& what) {
    if (!failed_) {
      failed_ = true;
      std::string found = p_ >= t_.size() ? "the end" : "'" + std::string(t_.substr(p_, 12)) + "'";
      error_->message = "expected " + what + ", found " + found;
      error_->offset = p_;
    }
    return false;
  }
  void Space() {
    while (p_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[p_]))) ++p_;
  }
  bool Peek(std::string_view s) {
    Space();
    return t_.substr(p_, s.size()) == s;
  }
  bool Eat(std::string_view s) {
    if (!Peek(s)) return false;
    p_ += s.size();
    return true;
  }
  bool Expect(std::string_view s) { return Eat(s) || Fail("'" + std::string(s) + "'"); }
  bool AtEnd() {
    Space();
    return p_ >= t_.size();
  }

  bool Int(int64_t* out, const char* what) {
    Space();
    size_t q = p_;
    if (q < t_.size() && t_[q] == '-') ++q;
    while (q < t_.size() && std::isdigit(static_cast<unsigned char>(t_[q]))) ++q;
    if (q == p_ || std::from_chars(t_.data() + p_, t_.data() + q, *out).ec != std::errc())
      return Fail(what);
    p_ = q;
    return true;
  }
  // A quoted name; the sdy printer escapes nothing a mesh axis name holds
  // except quotes and backslashes, as `\"` and `\\`.
  // With `raw` the escapes stay in `out` (for MLIR's `\22` hex escapes).
  bool Quoted(std::string* out, const char* what, bool raw = false) {
    Space();
    if (p_ >= t_.size() || t_[p_] != '"') return Fail(what);
    out->clear();
    for (++p_; p_ < t_.size() && t_[p_] != '"'; ++p_) {
      if (t_[p_] == '\\' && p_ + 1 < t_.size()) {
        if (raw) *out += t_[p_];
        ++p_;
      }
      *out += t_[p_];
    }
    if (p_ >= t_.size()) return Fail("a closing '\"'");
    ++p_;
    return true;
  }
  // A symbol or dictionary key: bare (`mesh_0`, `maximal_mesh`) or quoted.
  bool Name(std::string* out, const char* what) {
    Space();
    if (p_ < t_.size() && t_[p_] == '"') return Quoted(out, what);
    size_t q = p_;
    while (q < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[q])) || t_[q] == '_' ||
                             t_[q] == '.' || t_[q] == '$' || t_[q] == '-'))
      ++q;
    if (q == p_) return Fail(what);
    *out = std::string(t_.substr(p_, q - p_));
    p_ = q;
    return true;
  }

  // The inside of `mesh<...>`: `[axes]` (or, in older exports, the axes
  // without brackets), then optionally `, device_ids=[...]`.
  bool MeshBody(MeshDecl* mesh) {
    const bool bracketed = Eat("[");
    const char* close = bracketed ? "]" : ">";
    bool ids_next = Peek("device_ids");
    if (!Peek(close) && !ids_next) {
      int64_t devices = 1;
      while (true) {
        MeshAxisDecl axis;
        if (!Quoted(&axis.name, "a quoted mesh axis name") || !Expect("=") ||
            !Int(&axis.size, "the axis size"))
          return false;
        if (axis.size < 1) return Fail("a positive axis size");
        // Bounded so that every later product of axis sizes (device counts,
        // tile sizes) fits in int64_t.
        if (devices > (int64_t{1} << 62) / axis.size)
          return Fail("a mesh of at most 2^62 devices");
        devices *= axis.size;
        mesh->axes.push_back(std::move(axis));
        if (!Eat(",")) break;
        if ((ids_next = Peek("device_ids"))) break;  // the unbracketed form
      }
    }
    if (bracketed && !Expect("]")) return false;
    if (ids_next || Eat(",")) {
      if (!Expect("device_ids") || !Expect("=") || !Expect("[")) return false;
      if (!Peek("]")) {
        do {
          int64_t id = 0;
          if (!Int(&id, "a device id")) return false;
          mesh->device_ids.push_back(id);
        } while (Eat(","));
      }
      if (!Expect("]")) return false;
    }
    return true;
  }
  // `#sdy.mesh<...>` or `mesh<...>`.
  bool Mesh(MeshDecl* mesh) {
    if (!Eat("#sdy.mesh<") && !Eat("mesh<")) return Fail("'#sdy.mesh<'");
    return MeshBody(mesh) && Expect(">");
  }

  bool Axis(AxisRef* axis) {
    if (!Quoted(&axis->name, "a quoted mesh axis name")) return false;
    if (Eat(":")) {
      int64_t size = 0;
      if (!Expect("(") || !Int(&axis->pre_size, "the sub-axis pre-size") || !Expect(")") ||
          !Int(&size, "the sub-axis size"))
        return false;
      axis->size = size;
    }
    return true;
  }
  // `{"a", "b"}` for replicated= / unreduced=.
  bool AxisSet(std::vector<AxisRef>* out) {
    if (!Expect("{")) return false;
    if (!Peek("}")) {
      do {
        AxisRef a;
        if (!Axis(&a)) return false;
        out->push_back(std::move(a));
      } while (Eat(","));
    }
    return Expect("}");
  }
  bool Dim(DimSharding* dim) {
    if (!Expect("{")) return false;
    if (Eat("?")) {
      dim->open = true;
    } else if (!Peek("}")) {
      do {
        if (Eat("?")) {
          dim->open = true;
          break;
        }
        AxisRef a;
        if (!Axis(&a)) return false;
        dim->axes.push_back(std::move(a));
      } while (Eat(","));
    }
    if (!Expect("}")) return false;
    if (p_ < t_.size() && t_[p_] == 'p') {
      ++p_;
      int64_t priority = 0;
      if (!Int(&priority, "a priority number after 'p'")) return false;
      dim->priority = priority;
    }
    return true;
  }
  // `@mesh, [dims], replicated={...}, unreduced={...}` (inside `<...>`).
  bool ShardingBody(TensorSharding* s) {
    if (Eat("@")) {
      if (!Name(&s->mesh_name, "a mesh name after '@'")) return false;
    } else {
      MeshDecl mesh;
      if (!Peek("mesh<") && !Peek("#sdy.mesh<")) return Fail("'@mesh' or an inlined 'mesh<...>'");
      if (!Mesh(&mesh)) return false;
      s->inline_mesh = std::move(mesh);
    }
    if (!Expect(",") || !Expect("[")) return false;
    if (!Peek("]")) {
      do {
        DimSharding d;
        if (!Dim(&d)) return false;
        s->dims.push_back(std::move(d));
      } while (Eat(","));
    }
    if (!Expect("]")) return false;
    while (Eat(",")) {
      if (Eat("replicated")) {
        if (!Expect("=") || !AxisSet(&s->replicated)) return false;
      } else if (Eat("unreduced")) {
        if (!Expect("=") || !AxisSet(&s->unreduced)) return false;
      } else {
        return Fail("'replicated=' or 'unreduced='");
      }
    }
    return true;
  }

  bool failed() const { return failed_; }

 private:
  std::string_view t_;
  size_t p_ = 0;
  ParseError* error_;
  bool failed_ = false;
};

// MLIR string-literal escapes (`\22` for a quote, `\\`, `\n`), which the
// older exports left inside quoted mesh texts.
std::string UnescapeMlirString(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else if (s[i] == '\\' && i + 1 < s.size()) {
      ++i;
      out += s[i] == 'n' ? '\n' : s[i] == 't' ? '\t' : s[i];
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::optional<std::vector<std::pair<std::string, MeshDecl>>> ParseMeshes(std::string_view text,
                                                                         ParseError* error) {
  Reader r(text, error);
  std::vector<std::pair<std::string, MeshDecl>> out;
  if (!r.Expect("{")) return std::nullopt;
  if (!r.Peek("}")) {
    do {
      std::string name;
      MeshDecl mesh;
      if (!r.Name(&name, "a mesh name") || !r.Expect("=")) return std::nullopt;
      if (r.Peek("\"")) {
        // The older form: the mesh text as a quoted MLIR string.
        std::string quoted;
        if (!r.Quoted(&quoted, "a quoted mesh", /*raw=*/true)) return std::nullopt;
        std::string inner = UnescapeMlirString(quoted);
        ParseError inner_error;
        Reader ir(inner, &inner_error);
        if (!ir.Mesh(&mesh) || !ir.AtEnd()) {
          if (!ir.failed()) ir.Fail("the end of the mesh");
          error->message = "in mesh '" + name + "': " + inner_error.message;
          return std::nullopt;
        }
      } else if (!r.Mesh(&mesh)) {
        return std::nullopt;
      }
      out.emplace_back(std::move(name), std::move(mesh));
    } while (r.Eat(","));
  }
  if (!r.Expect("}")) return std::nullopt;
  if (!r.AtEnd()) {
    r.Fail("the end of the meshes");
    return std::nullopt;
  }
  return out;
}

std::optional<std::vector<TensorSharding>> ParseShardings(std::string_view text,
                                                         ParseError* error) {
  Reader r(text, error);
  std::vector<TensorSharding> out;
  if (r.Eat("#sdy.sharding_per_value<")) {
    if (!r.Expect("[")) return std::nullopt;
    if (!r.Peek("]")) {
      do {
        TensorSharding s;
        if (!r.Expect("<") || !r.ShardingBody(&s) || !r.Expect(">")) return std::nullopt;
        out.push_back(std::move(s));
      } while (r.Eat(","));
    }
    if (!r.Expect("]") || !r.Expect(">")) return std::nullopt;
  } else if (r.Eat("#sdy.sharding<")) {
    TensorSharding s;
    if (!r.ShardingBody(&s) || !r.Expect(">")) return std::nullopt;
    out.push_back(std::move(s));
  } else {
    r.Fail("'#sdy.sharding<' or '#sdy.sharding_per_value<'");
    return std::nullopt;
  }
  if (!r.AtEnd()) {
    r.Fail("the end of the sharding");
    return std::nullopt;
  }
  return out;
}

std::optional<std::vector<std::string>> ParseManualAxes(std::string_view text, ParseError* error) {
  Reader r(text, error);
  std::vector<std::string> out;
  if (!r.Expect("#sdy<") || !r.Expect("manual_axes") || !r.Expect("{")) return std::nullopt;
  if (!r.Peek("}")) {
    do {
      std::string name;
      if (!r.Quoted(&name, "a quoted mesh axis name")) return std::nullopt;
      out.push_back(std::move(name));
    } while (r.Eat(","));
  }
  if (!r.Expect("}") || !r.Expect(">")) return std::nullopt;
  if (!r.AtEnd()) {
    r.Fail("the end of the manual axes");
    return std::nullopt;
  }
  return out;
}

}  // namespace meshsplit::sdy
