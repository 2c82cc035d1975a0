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
  m.attr("__version__") = api::Version();

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

  // --- modules, specs, the pipeline ------------------------------------------
  py::class_<api::HostArray>(m, "_HostArray")
      .def(py::init([](std::string dtype, std::vector<int64_t> shape, py::bytes data) {
             std::string bytes = data;
             return api::HostArray{std::move(dtype), std::move(shape),
                                   std::vector<uint8_t>(bytes.begin(), bytes.end())};
           }))
      .def_readonly("dtype", &api::HostArray::dtype)
      .def_readonly("shape", &api::HostArray::shape)
      .def_property_readonly("data", [](const api::HostArray& a) {
        return py::bytes(reinterpret_cast<const char*>(a.data.data()), a.data.size());
      });

  auto info = [](const std::vector<api::TensorInfo>& v) {
    py::list out;
    for (const api::TensorInfo& t : v)
      out.append(py::make_tuple(t.name, py::tuple(py::cast(t.shape)), t.dtype));
    return out;
  };
  py::class_<api::Module>(m, "Module")
      .def_property_readonly("parameters",
                             [info](const api::Module& mod) { return info(mod.parameters()); })
      .def_property_readonly("outputs",
                             [info](const api::Module& mod) { return info(mod.outputs()); })
      .def_property_readonly("num_partitions", &api::Module::num_partitions)
      .def_property_readonly("source_name", &api::Module::source_name)
      .def_property_readonly("text", &api::Module::ToString)
      .def("__repr__", [](const api::Module& mod) {
        return "<meshsplit.Module " + mod.source_name() + ">";
      });
  m.def("load", &api::Load, py::arg("path"), "Load HLO text, or ONNX by the .onnx extension");
  m.def("parse", &api::Parse, py::arg("text"), py::arg("name") = "<string>", "Parse HLO text");

  py::class_<api::ShardSpec>(m, "_ShardSpec")
      .def(py::init([](const api::Mesh& mesh,
                       std::vector<std::tuple<std::string, bool, std::vector<std::vector<std::string>>>> rules,
                       std::vector<std::string> existing_axes) {
             api::ShardSpec s;
             s.mesh = mesh;
             for (auto& [match, replicated, dims] : rules)
               s.rules.push_back({match, replicated, api::PartitionSpec{dims}});
             s.existing_axes = std::move(existing_axes);
             return s;
           }))
      .def_static("from_json", &api::ShardSpec::FromJson, py::arg("text"),
                  py::arg("name") = "<spec>")
      .def_static("load", &api::ShardSpec::Load, py::arg("path"))
      .def("to_json", &api::ShardSpec::ToJson)
      .def_readonly("mesh", &api::ShardSpec::mesh)
      .def_readonly("existing_axes", &api::ShardSpec::existing_axes)
      .def_property_readonly("rules", [](const api::ShardSpec& s) {
        py::list out;
        for (const api::ShardRule& r : s.rules) out.append(py::make_tuple(r.match, r.replicated, r.dims.dims));
        return out;
      });

  py::class_<api::Options>(m, "_Options")
      .def(py::init([](int64_t num_partitions, bool propagate, bool strict) {
        return api::Options{num_partitions, propagate, strict};
      }));

  py::class_<api::PartitionResult>(m, "PartitionResult")
      .def_readonly("text", &api::PartitionResult::text)
      .def_readonly("num_partitions", &api::PartitionResult::num_partitions)
      .def_readonly("collectives", &api::PartitionResult::collectives)
      .def("__repr__", [](const api::PartitionResult& r) {
        return "<meshsplit.PartitionResult " + std::to_string(r.num_partitions) + " partitions>";
      });
  py::class_<api::VerifyReport>(m, "VerifyReport")
      .def_readonly("ok", &api::VerifyReport::ok)
      .def_readonly("status", &api::VerifyReport::status)
      .def_readonly("message", &api::VerifyReport::message)
      .def_readonly("num_partitions", &api::VerifyReport::num_partitions)
      .def_readonly("max_abs_error", &api::VerifyReport::max_abs_error)
      .def_readonly("max_rel_error", &api::VerifyReport::max_rel_error)
      .def_readonly("first_diverging", &api::VerifyReport::first_diverging)
      .def_readonly("divergence_detail", &api::VerifyReport::divergence_detail)
      .def("__bool__", [](const api::VerifyReport& r) { return r.ok; })
      .def("__repr__", [](const api::VerifyReport& r) {
        return "<meshsplit.VerifyReport " + r.status + ", max abs error " +
               std::to_string(r.max_abs_error) + ">";
      });

  // The pipeline runs without the GIL: other Python threads keep going.
  using py::call_guard;
  m.def("_partition", [](const api::Module& mod, const api::ShardSpec* spec, const api::Options& o) {
        return api::Partition(mod, spec, o);
      }, call_guard<py::gil_scoped_release>());
  m.def("_run", [](const api::Module& mod, const std::vector<api::HostArray>& inputs,
                   const api::ShardSpec* spec, const api::Options& o) {
        return api::Run(mod, inputs, spec, o);
      }, call_guard<py::gil_scoped_release>());
  m.def("_report", [](const api::Module& mod, const api::ShardSpec* spec, const api::Options& o) {
        return api::Report(mod, spec, o);
      }, call_guard<py::gil_scoped_release>());
  py::class_<api::Plan>(m, "_Plan")
      .def_readonly("spec", &api::Plan::spec)
      .def_readonly("cost", &api::Plan::cost)
      .def_readonly("evaluations", &api::Plan::evaluations);
  m.def("_autoshard", [](const api::Module& mod, const api::Mesh& mesh, int64_t budget,
                         double time_limit, uint64_t seed, int64_t memory_limit,
                         std::vector<std::string> existing) {
        return api::Autoshard(mod, mesh,
                              api::AutoshardOptions{budget, time_limit, seed, memory_limit, existing});
      }, call_guard<py::gil_scoped_release>());
  m.def("_verify", [](const api::Module& mod, const api::ShardSpec* spec, uint64_t seed,
                      const api::Options& o) { return api::Verify(mod, spec, seed, o); },
        call_guard<py::gil_scoped_release>());
}
