// The `meshsplit._meshsplit` extension: pybind11 bindings of the public C++
// API (include/meshsplit/meshsplit.h). Python-side conveniences (P, the
// placement classes, Mesh from a dict) live in meshsplit/__init__.py; this
// file only converts values, it holds no logic of its own.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "meshsplit/meshsplit.h"

namespace py = pybind11;
namespace api = meshsplit::api;

PYBIND11_MODULE(_meshsplit, m) {
  m.doc() = "meshsplit: GSPMD sharding, partitioning and SPMD execution of XLA HLO";

  // Translators run newest first, so ConversionError is matched before its base.
  auto& error = py::register_exception<api::Error>(m, "Error");
  py::register_exception<api::ConversionError>(m, "ConversionError", error.ptr());

  py::class_<api::Mesh>(m, "_Mesh")
      .def(py::init<std::vector<std::pair<std::string, int64_t>>, std::vector<int64_t>>(),
           py::arg("axes"), py::arg("device_order") = std::vector<int64_t>{})
      .def_static("parse", &api::Mesh::Parse)
      .def_property_readonly("axes", &api::Mesh::axes)
      .def_property_readonly("axis_names", &api::Mesh::axis_names)
      .def_property_readonly("size", &api::Mesh::num_devices)
      .def_property_readonly("device_ids", &api::Mesh::DeviceIds)
      .def("__str__", &api::Mesh::ToString)
      .def("__eq__", [](const api::Mesh& a, const api::Mesh& b) { return a == b; })
      .def("__hash__", [](const api::Mesh& a) { return py::hash(py::str(a.ToString())); });

  py::class_<api::Placement> placement(m, "_Placement");
  py::enum_<api::Placement::Kind>(placement, "Kind")
      .value("SHARD", api::Placement::Kind::kShard)
      .value("REPLICATE", api::Placement::Kind::kReplicate)
      .value("PARTIAL", api::Placement::Kind::kPartial);
  placement
      .def(py::init([](api::Placement::Kind kind, int64_t dim, std::string op) {
             return api::Placement{kind, dim, std::move(op)};
           }),
           py::arg("kind"), py::arg("dim") = 0, py::arg("reduce_op") = "sum")
      .def_readonly("kind", &api::Placement::kind)
      .def_readonly("dim", &api::Placement::dim)
      .def_readonly("reduce_op", &api::Placement::reduce_op);

  // A PartitionSpec crosses as a list of per-dim axis lists.
  py::class_<api::NamedSharding>(m, "_NamedSharding")
      .def(py::init([](const api::Mesh& mesh, std::vector<std::vector<std::string>> dims,
                       std::vector<std::string> partial) {
             return api::NamedSharding(mesh, api::PartitionSpec{std::move(dims)},
                                       std::move(partial));
           }),
           py::arg("mesh"), py::arg("dims"), py::arg("partial") = std::vector<std::string>{})
      .def_property_readonly("mesh", &api::NamedSharding::mesh)
      .def_property_readonly("dims",
                             [](const api::NamedSharding& s) { return s.spec().dims; })
      .def_property_readonly("partial", &api::NamedSharding::partial_axes)
      .def("hlo_sharding", &api::NamedSharding::HloSharding, py::arg("rank"))
      .def("to_placements", &api::NamedSharding::ToPlacements)
      .def("__eq__", [](const api::NamedSharding& a, const api::NamedSharding& b) {
        return a == b;
      });

  m.def("_from_placements", &api::FromPlacements, py::arg("mesh"), py::arg("placements"),
        py::arg("ndim"));
  m.def("_visualize_sharding", &api::VisualizeSharding, py::arg("shape"), py::arg("sharding"));
}
