// The pipeline spec (pipeline_spec.h): one checker for the JSON object and the
// flag, so that both refuse the same things with the same words.
#include "import/pipeline_spec.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace meshsplit {
namespace {

using json = nlohmann::json;

Status CheckSpec(const PipelineSpec& p) {
  if (p.axis.empty()) return Status::Error("pipeline: needs \"axis\" (the stage axis of the mesh)");
  if (p.microbatches < 1) return Status::Error("pipeline: \"microbatches\" must be at least 1");
  if (p.repeats < 1) return Status::Error("pipeline: \"repeats\" must be at least 1");
  if (p.batch_dim < 0) return Status::Error("pipeline: \"batch_dim\" must be >= 0");
  const auto& names = PipelineScheduleNames();
  if (std::find(names.begin(), names.end(), p.schedule) == names.end())
    return Status::Error("pipeline: unknown schedule '" + p.schedule +
                         "' (expected gpipe, circular, 1f1b or zb-h1)");
  if (p.repeats != 1 && p.schedule != "circular")
    return Status::Error("pipeline: \"repeats\" is for the circular schedule only");
  return Status::Ok();
}

StatusOr<int64_t> ParseCount(const std::string& key, const std::string& value) {
  try {
    size_t used = 0;
    long long v = std::stoll(value, &used);
    if (used == value.size()) return static_cast<int64_t>(v);
  } catch (const std::exception&) {
  }
  return Status::Error("pipeline: " + key + " must be an integer, got '" + value + "'");
}

}  // namespace

const std::vector<std::string>& PipelineScheduleNames() {
  static const std::vector<std::string> names = {"gpipe", "circular", "1f1b", "zb-h1"};
  return names;
}

StatusOr<PipelineSpec> PipelineSpecFromJson(const json& j) {
  if (!j.is_object())
    return Status::Error("\"pipeline\" must be an object {\"axis\": \"stage\", ...}");
  PipelineSpec p;
  for (const auto& [key, v] : j.items()) {
    if (key == "axis" && v.is_string()) {
      p.axis = v.get<std::string>();
    } else if ((key == "microbatches" || key == "repeats" || key == "batch_dim") &&
               v.is_number_integer()) {
      int64_t n = v.get<int64_t>();
      (key == "microbatches" ? p.microbatches : key == "repeats" ? p.repeats : p.batch_dim) = n;
    } else if (key == "schedule" && v.is_string()) {
      p.schedule = v.get<std::string>();
    } else if (key == "loops" && v.is_array()) {
      for (const json& l : v) {
        if (!l.is_string()) return Status::Error("pipeline: \"loops\" lists while names (strings)");
        p.loops.push_back(l.get<std::string>());
      }
    } else if (key == "comment") {
    } else if (key == "axis" || key == "microbatches" || key == "repeats" ||
               key == "batch_dim" || key == "schedule" || key == "loops") {
      return Status::Error("pipeline: \"" + key + "\" has the wrong type");
    } else {
      return Status::Error("pipeline: unknown key '" + key +
                           "' (expected axis, microbatches, schedule, repeats, loops, batch_dim)");
    }
  }
  MS_RETURN_IF_ERROR(CheckSpec(p));
  return p;
}

StatusOr<PipelineSpec> ParsePipelineFlag(const std::string& text) {
  PipelineSpec p;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos
                                                                    : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      return Status::Error("--pipeline: expected key=value, got '" + item + "'");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "axis") {
      p.axis = value;
    } else if (key == "schedule") {
      p.schedule = value;
    } else if (key == "microbatches" || key == "repeats" || key == "batch_dim") {
      MS_ASSIGN_OR_RETURN(int64_t n, ParseCount(key, value));
      (key == "microbatches" ? p.microbatches : key == "repeats" ? p.repeats : p.batch_dim) = n;
    } else if (key == "loops") {
      size_t s = 0;
      while (s <= value.size()) {
        size_t semi = value.find(';', s);
        std::string name = value.substr(s, semi == std::string::npos ? std::string::npos : semi - s);
        if (!name.empty()) p.loops.push_back(name[0] == '%' ? name.substr(1) : name);
        s = semi == std::string::npos ? value.size() + 1 : semi + 1;
      }
    } else {
      return Status::Error("--pipeline: unknown key '" + key +
                           "' (expected axis, microbatches, schedule, repeats, loops, batch_dim)");
    }
  }
  MS_RETURN_IF_ERROR(CheckSpec(p));
  return p;
}

}  // namespace meshsplit
