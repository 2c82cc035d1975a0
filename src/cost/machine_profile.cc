// Machine profiles: lookup with fallbacks, and the JSON document.
#include "cost/machine_profile.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace meshsplit {
namespace {

constexpr int kFormatVersion = 1;

std::vector<std::string> SplitAxes(const std::string& axes) {
  std::vector<std::string> out;
  std::stringstream in(axes);
  for (std::string a; std::getline(in, a, ',');)
    if (!a.empty()) out.push_back(a);
  return out;
}

}  // namespace

LinkRate MachineProfile::RateFor(const std::string& kind, const std::string& axes) const {
  if (auto it = collectives.find(kind + "@" + axes); it != collectives.end()) return it->second;
  // A group over several axes that were only measured one by one: its
  // traffic crosses the slowest of them.
  const LinkRate* slowest = nullptr;
  double worst = -1;
  for (const std::string& axis : SplitAxes(axes)) {
    auto it = collectives.find(kind + "@" + axis);
    if (it == collectives.end()) continue;
    // Compared at 1 MiB, where both terms count.
    const double t = it->second.latency_seconds + (1 << 20) / it->second.bytes_per_second;
    if (t > worst) worst = t, slowest = &it->second;
  }
  return slowest ? *slowest : link;
}

std::string MachineProfile::Describe() const {
  if (backend.empty()) return source;
  std::string out = source + " (" + backend;
  if (!mesh.empty()) out += ", " + mesh;
  if (!measured_at.empty()) out += ", " + measured_at;
  return out + ")";
}

StepTime EstimateStepTime(const ModuleCost& cost, const MachineProfile& p) {
  StepTime t;
  t.compute_seconds = cost.flops / p.flops_per_second;
  t.memory_seconds = (cost.bytes_read + cost.bytes_written) / p.memory_bytes_per_second;
  for (const CollectiveCost& c : cost.collectives) {
    const LinkRate r = p.RateFor(c.kind, c.mesh_axes);
    const double n = static_cast<double>(c.count);
    t.comm_latency_seconds += n * r.latency_seconds;
    t.comm_wire_seconds += n * c.wire_bytes / r.bytes_per_second;
  }
  return t;
}

std::string MachineProfileToJson(const MachineProfile& p) {
  nlohmann::ordered_json j;
  j["meshsplit_machine_profile"] = kFormatVersion;
  j["backend"] = p.backend;
  j["mesh"] = p.mesh;
  j["measured_at"] = p.measured_at;
  j["calibration_seconds"] = p.calibration_seconds;
  j["flops_per_second"] = p.flops_per_second;
  j["memory_bytes_per_second"] = p.memory_bytes_per_second;
  j["default_collective"] = {{"latency_seconds", p.link.latency_seconds},
                             {"bytes_per_second", p.link.bytes_per_second}};
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& [key, rate] : p.collectives) {
    const size_t at = key.find('@');
    list.push_back({{"kind", key.substr(0, at)},
                    {"axes", at == std::string::npos ? "" : key.substr(at + 1)},
                    {"latency_seconds", rate.latency_seconds},
                    {"bytes_per_second", rate.bytes_per_second}});
  }
  j["collectives"] = std::move(list);
  return j.dump(2) + "\n";
}

StatusOr<MachineProfile> ParseMachineProfile(const std::string& text, const std::string& name) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto err = [&](const std::string& m) { return Status::Error(name + ": " + m); };
  if (j.is_discarded() || !j.is_object()) return err("not a JSON object");
  if (!j.contains("meshsplit_machine_profile"))
    return err("not a machine profile (no \"meshsplit_machine_profile\" key; write one with "
               "'meshsplit calibrate')");
  if (j["meshsplit_machine_profile"] != kFormatVersion)
    return err("profile format " + j["meshsplit_machine_profile"].dump() +
               " is not the one this meshsplit reads (" + std::to_string(kFormatVersion) + ")");
  // A rate must be a positive number: a zero bandwidth would make every
  // collective infinitely slow and silently replicate everything.
  auto positive = [&](const nlohmann::json& o, const char* key, double* out) -> Status {
    if (!o.contains(key) || !o[key].is_number() || !(o[key].get<double>() > 0))
      return err(std::string("\"") + key + "\" must be a positive number");
    *out = o[key].get<double>();
    return Status::Ok();
  };
  auto latency = [&](const nlohmann::json& o, double* out) -> Status {
    if (!o.contains("latency_seconds") || !o["latency_seconds"].is_number() ||
        o["latency_seconds"].get<double>() < 0)
      return err("\"latency_seconds\" must be a number >= 0");
    *out = o["latency_seconds"].get<double>();
    return Status::Ok();
  };
  MachineProfile p;
  p.source = name;
  MS_RETURN_IF_ERROR(positive(j, "flops_per_second", &p.flops_per_second));
  MS_RETURN_IF_ERROR(positive(j, "memory_bytes_per_second", &p.memory_bytes_per_second));
  if (!j.contains("default_collective") || !j["default_collective"].is_object())
    return err("\"default_collective\" must be an object");
  MS_RETURN_IF_ERROR(latency(j["default_collective"], &p.link.latency_seconds));
  MS_RETURN_IF_ERROR(positive(j["default_collective"], "bytes_per_second",
                              &p.link.bytes_per_second));
  if (j.contains("collectives")) {
    if (!j["collectives"].is_array()) return err("\"collectives\" must be an array");
    for (const auto& c : j["collectives"]) {
      if (!c.is_object() || !c.contains("kind") || !c["kind"].is_string() ||
          !c.contains("axes") || !c["axes"].is_string())
        return err("each collective needs \"kind\" and \"axes\" strings");
      LinkRate r;
      MS_RETURN_IF_ERROR(latency(c, &r.latency_seconds));
      MS_RETURN_IF_ERROR(positive(c, "bytes_per_second", &r.bytes_per_second));
      p.collectives[c["kind"].get<std::string>() + "@" + c["axes"].get<std::string>()] = r;
    }
  }
  auto str = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  p.backend = str("backend");
  p.mesh = str("mesh");
  p.measured_at = str("measured_at");
  if (j.contains("calibration_seconds") && j["calibration_seconds"].is_number())
    p.calibration_seconds = j["calibration_seconds"].get<double>();
  return p;
}

StatusOr<MachineProfile> ReadMachineProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error(path + ": cannot open machine profile");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseMachineProfile(ss.str(), path);
}

}  // namespace meshsplit
