// The Shardy attribute texts that JAX's HLO carries in frontend attributes
// (the `sdy` dialect's syntax, as XLA's sdy round-trip export prints it):
// meshes `#sdy.mesh<["data"=2, "model"=4]>`, tensor shardings
// `#sdy.sharding<@mesh, [{"data"}, {}], replicated={"model"}>`, their
// per-value lists and `#sdy<manual_axes{"x"}>`. Parsing only; the lowering
// to our shardings is import/shardy_input.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/status.h"

namespace meshsplit::sdy {

struct MeshAxisDecl {
  std::string name;
  int64_t size = 1;
};

// `#sdy.mesh<[axes], device_ids=[...]>`. No axes and one device id is a
// maximal mesh (one device holds the value).
struct MeshDecl {
  std::vector<MeshAxisDecl> axes;
  std::vector<int64_t> device_ids;  // empty: iota over the axes
  int64_t num_devices() const;
  bool IsMaximal() const { return axes.empty() && device_ids.size() == 1; }
};

// `"x"` (the whole axis) or the sub-axis `"x":(pre_size)size`: the axis
// split major to minor into [pre_size, size, rest], this being the middle.
struct AxisRef {
  std::string name;
  int64_t pre_size = 1;
  std::optional<int64_t> size;  // nullopt: the whole axis
  std::string ToString() const;
};

// One tensor dim: `{"a", "b"}` (closed), `{"a", ?}` / `{?}` (open: Shardy may
// shard it further), optionally followed by a priority `p<N>`.
struct DimSharding {
  std::vector<AxisRef> axes;
  bool open = false;
  std::optional<int64_t> priority;
};

// `<@mesh, [dims], replicated={...}, unreduced={...}>`, the mesh named
// (`@mesh`) or inlined (`mesh<[...]>`).
struct TensorSharding {
  std::string mesh_name;              // empty when inlined
  std::optional<MeshDecl> inline_mesh;
  std::vector<DimSharding> dims;
  std::vector<AxisRef> replicated;
  std::vector<AxisRef> unreduced;
};

// A parse error: what was expected and the 0-based offset in the text.
struct ParseError {
  std::string message;
  size_t offset = 0;
};

// `{name = #sdy.mesh<...>, ...}`, the value of `xla.sdy.meshes`. Also the
// older form whose values are quoted strings holding the mesh text.
std::optional<std::vector<std::pair<std::string, MeshDecl>>> ParseMeshes(std::string_view text,
                                                                         ParseError* error);
// `#sdy.sharding<...>` (one sharding) or `#sdy.sharding_per_value<[<...>,
// ...]>` (one per result), the value of `xla.sdy.sharding`,
// `xla.sdy.in_shardings` and `xla.sdy.out_shardings`.
std::optional<std::vector<TensorSharding>> ParseShardings(std::string_view text,
                                                         ParseError* error);
// `#sdy<manual_axes{"a", "b"}>`, the value of `xla.sdy.manual_axes`.
std::optional<std::vector<std::string>> ParseManualAxes(std::string_view text, ParseError* error);

}  // namespace meshsplit::sdy
