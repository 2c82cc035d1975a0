// Mesh parsing/printing, mesh_split lowering to a tiled sharding, and the
// named sharding text form.
#include "sharding/mesh.h"

#include <algorithm>
#include <cctype>

#include "support/check.h"

namespace meshsplit {
namespace {

bool IsIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

// Splits on `sep` outside brackets, braces, parentheses and quotes.
std::vector<std::string_view> SplitTopLevel(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i)
        if (s[i] == '\\') ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      i = end == std::string_view::npos ? s.size() : end + 1;
    } else if (c == '[' || c == '{' || c == '(') {
      ++depth;
    } else if (c == ']' || c == '}' || c == ')') {
      --depth;
    } else if (c == sep && depth == 0) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

// Removes /*...*/ comments (XLA prints /*index=N*/ between tuple elements).
std::string_view StripLeadingComments(std::string_view s) {
  s = Trim(s);
  while (s.substr(0, 2) == "/*") {
    size_t end = s.find("*/");
    if (end == std::string_view::npos) return s;
    s = Trim(s.substr(end + 2));
  }
  return s;
}

StatusOr<int64_t> ParsePositive(std::string_view s, const std::string& what) {
  s = Trim(s);
  if (s.empty() || s.size() > 12 ||
      !std::all_of(s.begin(), s.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return Status::Error(what + ": expected a positive integer, got '" +
                         std::string(s) + "'");
  int64_t v = std::stoll(std::string(s));
  if (v <= 0)
    return Status::Error(what + ": expected a positive integer, got '" +
                         std::string(s) + "'");
  return v;
}

bool ValidAxisName(std::string_view name) {
  if (name.empty() || !IsIdentStart(name[0]) || name == "_" ||
      name == "devices")
    return false;
  return std::all_of(name.begin(), name.end(), IsIdentChar);
}

std::string AxisList(const Mesh& mesh) {
  std::string s;
  for (const MeshAxis& a : mesh.axes()) {
    if (!s.empty()) s += ", ";
    s += a.name;
  }
  return s.empty() ? "no axes" : s;
}

}  // namespace

StatusOr<Mesh> Mesh::Create(std::vector<MeshAxis> axes,
                            std::vector<int64_t> device_order) {
  std::vector<int64_t> sizes;
  int64_t n = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!ValidAxisName(axes[i].name))
      return Status::Error("bad mesh axis name '" + axes[i].name + "'");
    for (size_t j = 0; j < i; ++j)
      if (axes[j].name == axes[i].name)
        return Status::Error("mesh axis '" + axes[i].name + "' appears twice");
    if (axes[i].size <= 0 || n > (int64_t{1} << 40) / axes[i].size)
      return Status::Error("bad size for mesh axis '" + axes[i].name + "'");
    sizes.push_back(axes[i].size);
    n *= axes[i].size;
  }
  Mesh mesh;
  mesh.axes_ = std::move(axes);
  if (device_order.empty()) {
    mesh.devices_ = TileAssignment::Iota(sizes);
    return mesh;
  }
  if (static_cast<int64_t>(device_order.size()) != n)
    return Status::Error("mesh has " + std::to_string(n) +
                         " devices but the device order lists " +
                         std::to_string(device_order.size()));
  std::vector<bool> seen(n, false);
  for (int64_t d : device_order) {
    if (d < 0 || d >= n || seen[d])
      return Status::Error(
          "mesh device order must be a permutation of 0.." +
          std::to_string(n - 1));
    seen[d] = true;
  }
  mesh.devices_ = TileAssignment::FromDevices(sizes, std::move(device_order));
  return mesh;
}

StatusOr<Mesh> Mesh::Parse(std::string_view text) {
  std::string_view s = Trim(text);
  if (!s.empty() && s.front() == '{') {
    if (s.back() != '}') return Status::Error("mesh: missing '}'");
    s = Trim(s.substr(1, s.size() - 2));
  }
  std::vector<MeshAxis> axes;
  std::vector<int64_t> order;
  if (s.empty()) return Create({});
  for (std::string_view item : SplitTopLevel(s, ',')) {
    item = Trim(item);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return Status::Error("mesh: expected name=size, got '" +
                           std::string(item) + "'");
    std::string name(Trim(item.substr(0, eq)));
    std::string_view value = Trim(item.substr(eq + 1));
    if (name == "devices") {
      if (value.size() < 2 || value.front() != '[' || value.back() != ']')
        return Status::Error("mesh: devices=[...] expects a bracketed list");
      std::string_view inner = Trim(value.substr(1, value.size() - 2));
      if (!inner.empty())
        for (std::string_view id : SplitTopLevel(inner, ',')) {
          std::string_view t = Trim(id);
          if (t == "0") {
            order.push_back(0);
            continue;
          }
          MS_ASSIGN_OR_RETURN(int64_t v, ParsePositive(t, "mesh device id"));
          order.push_back(v);
        }
      continue;
    }
    if (!ValidAxisName(name))
      return Status::Error("bad mesh axis name '" + name + "'");
    MS_ASSIGN_OR_RETURN(int64_t size,
                        ParsePositive(value, "size of mesh axis '" + name + "'"));
    axes.push_back({name, size});
  }
  return Create(std::move(axes), std::move(order));
}

std::optional<int64_t> Mesh::AxisIndex(std::string_view name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name) return static_cast<int64_t>(i);
  return std::nullopt;
}

std::string Mesh::ToString() const {
  std::string s;
  for (const MeshAxis& a : axes_) {
    if (!s.empty()) s += ",";
    s += a.name + "=" + std::to_string(a.size);
  }
  bool iota = devices_.is_iota() && devices_.HasIdentityPerm();
  if (!iota) {
    s += ",devices=[";
    std::vector<int64_t> ids = devices_.Devices();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) s += ",";
      s += std::to_string(ids[i]);
    }
    s += "]";
  }
  return s;
}

StatusOr<Sharding> MeshSplit(
    const Mesh& mesh, const std::vector<std::vector<std::string>>& dims_axes,
    int64_t rank) {
  if (static_cast<int64_t>(dims_axes.size()) != rank)
    return Status::Error("mesh_split maps " + std::to_string(dims_axes.size()) +
                         " dims but the tensor has rank " +
                         std::to_string(rank));
  std::vector<bool> used(mesh.num_axes(), false);
  std::vector<std::vector<int64_t>> indices;
  for (const auto& axes : dims_axes) {
    indices.emplace_back();
    for (const std::string& name : axes) {
      std::optional<int64_t> a = mesh.AxisIndex(name);
      if (!a)
        return Status::Error("mesh_split uses unknown mesh axis '" + name +
                             "' (mesh has " + AxisList(mesh) + ")");
      if (used[*a])
        return Status::Error("mesh_split uses mesh axis '" + name +
                             "' more than once");
      used[*a] = true;
      indices.back().push_back(*a);
    }
  }
  return TileOverMeshAxes(mesh.devices(), indices);
}

Sharding TileOverMeshAxes(const TileAssignment& devices,
                          const std::vector<std::vector<int64_t>>& dims_axes,
                          const std::vector<int64_t>& manual_axes) {
  const int64_t num_axes = devices.num_dimensions();
  std::vector<bool> used(num_axes, false);
  std::vector<int64_t> perm, dims;
  auto take = [&](const std::vector<int64_t>& axes) {
    int64_t tiles = 1;
    for (int64_t a : axes) {
      MS_CHECK(a >= 0 && a < num_axes && !used[a]);
      used[a] = true;
      perm.push_back(a);
      tiles *= devices.dim(a);
    }
    dims.push_back(tiles);
  };
  for (const auto& axes : dims_axes) take(axes);
  std::vector<SubgroupType> types;
  if (!manual_axes.empty()) {
    take(manual_axes);
    types.push_back(SubgroupType::kManual);
  }
  int64_t replicated = 1;
  for (int64_t a = 0; a < num_axes; ++a)
    if (!used[a]) {
      perm.push_back(a);
      replicated *= devices.dim(a);
    }
  dims.push_back(replicated);
  types.push_back(SubgroupType::kReplicated);
  TileAssignment tiles = devices.Transpose(perm).Reshape(dims);
  return Sharding::Subgroup(std::move(tiles), std::move(types));
}

StatusOr<Sharding> MeshSplit(
    const Mesh& mesh, const std::vector<std::optional<std::string>>& dims_mapping,
    int64_t rank) {
  std::vector<std::vector<std::string>> axes;
  for (const auto& m : dims_mapping) {
    axes.emplace_back();
    if (m) axes.back().push_back(*m);
  }
  return MeshSplit(mesh, axes, rank);
}

StatusOr<Sharding> MeshSplit(const Mesh& mesh,
                             const std::vector<int64_t>& dims_mapping,
                             int64_t rank) {
  std::vector<std::vector<std::string>> axes;
  for (int64_t m : dims_mapping) {
    axes.emplace_back();
    if (m < -1 || m >= mesh.num_axes())
      return Status::Error("mesh_split axis index " + std::to_string(m) +
                           " out of range for a mesh with " +
                           std::to_string(mesh.num_axes()) + " axes");
    if (m >= 0) axes.back().push_back(mesh.axes()[m].name);
  }
  return MeshSplit(mesh, axes, rank);
}

StatusOr<std::vector<std::vector<std::string>>> ParseDimsMapping(
    std::string_view text) {
  std::string_view s = Trim(text);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']')
    return Status::Error("mesh_split: expected [axis, _, ...], got '" +
                         std::string(text) + "'");
  std::vector<std::vector<std::string>> out;
  std::string_view inner = Trim(s.substr(1, s.size() - 2));
  if (inner.empty()) return out;
  for (std::string_view item : SplitTopLevel(inner, ',')) {
    item = Trim(item);
    out.emplace_back();
    if (item == "_" || item == "-") continue;
    std::vector<std::string_view> names;
    if (!item.empty() && item.front() == '(') {
      if (item.back() != ')')
        return Status::Error("mesh_split: missing ')' in '" +
                             std::string(item) + "'");
      for (std::string_view n : SplitTopLevel(item.substr(1, item.size() - 2), ','))
        names.push_back(Trim(n));
    } else {
      names.push_back(item);
    }
    for (std::string_view n : names) {
      if (!ValidAxisName(n))
        return Status::Error("mesh_split: bad axis name '" + std::string(n) +
                             "' (use _ for a dim that is not split)");
      out.back().emplace_back(n);
    }
  }
  return out;
}

std::string DimsMappingToString(
    const std::vector<std::vector<std::string>>& dims_axes) {
  std::string s = "[";
  for (size_t i = 0; i < dims_axes.size(); ++i) {
    if (i) s += ", ";
    const auto& axes = dims_axes[i];
    if (axes.empty()) {
      s += "_";
    } else if (axes.size() == 1) {
      s += axes[0];
    } else {
      s += "(";
      for (size_t k = 0; k < axes.size(); ++k) s += (k ? "," : "") + axes[k];
      s += ")";
    }
  }
  return s + "]";
}

bool IsNamedShardingText(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (text.compare(i, 10, "mesh_split") == 0 &&
               (i == 0 || !IsIdentChar(text[i - 1]))) {
      return true;
    }
  }
  return false;
}

StatusOr<Sharding> ParseNamedSharding(std::string_view text, const Mesh& mesh) {
  std::string_view s = Trim(text);
  if (!IsNamedShardingText(s)) return Sharding::Parse(s);
  if (s.size() < 2 || s.front() != '{' || s.back() != '}')
    return Status::Error("sharding must be enclosed in braces");
  std::string_view body = StripLeadingComments(s.substr(1, s.size() - 2));
  if (!body.empty() && body.front() == '{') {
    std::vector<Sharding> elements;
    for (std::string_view e : SplitTopLevel(body, ',')) {
      MS_ASSIGN_OR_RETURN(Sharding el,
                          ParseNamedSharding(StripLeadingComments(e), mesh));
      elements.push_back(std::move(el));
    }
    return Sharding::Tuple(std::move(elements));
  }
  if (body.substr(0, 10) != "mesh_split")
    return Status::Error("mesh_split must come first in the sharding");
  body = Trim(body.substr(10));
  if (body.empty() || body.front() != '[')
    return Status::Error("mesh_split: expected '[' after mesh_split");
  size_t close = body.find(']');
  if (close == std::string_view::npos)
    return Status::Error("mesh_split: missing ']'");
  MS_ASSIGN_OR_RETURN(auto dims_axes, ParseDimsMapping(body.substr(0, close + 1)));
  MS_ASSIGN_OR_RETURN(Sharding result,
                      MeshSplit(mesh, dims_axes,
                                static_cast<int64_t>(dims_axes.size())));
  // Trailing shard_as / metadata reuse the ordinary parser.
  std::string_view rest = Trim(body.substr(close + 1));
  if (!rest.empty()) {
    MS_ASSIGN_OR_RETURN(Sharding extra,
                        Sharding::Parse("{replicated " + std::string(rest) + "}"));
    result.set_shard_group(extra.shard_group());
    result.set_metadata(extra.metadata());
  }
  return result;
}

}  // namespace meshsplit
