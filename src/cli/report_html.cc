// HTML rendering of `meshsplit report` (report_data.h): one self-contained
// page — sharding device grids for the entry parameters and outputs, the
// collectives table with causes, and per-device memory as an inline SVG bar
// chart. No external resources; a tiny inline script only checks the page.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "cli/report_data.h"

namespace meshsplit::cli {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string DeviceList(const std::vector<int64_t>& devices) {
  std::string out;
  const size_t shown = std::min<size_t>(devices.size(), 8);
  for (size_t k = 0; k < shown; ++k) out += (k ? "," : "") + std::to_string(devices[k]);
  if (devices.size() > shown) out += ",&hellip; (" + std::to_string(devices.size()) + ")";
  return out;
}

// A device grid for one array value: rows = tiles along the leading dims,
// columns = tiles along the last dim, each tile labelled with its devices.
void RenderGrid(std::ostream& os, const std::string& name, const Shape& shape,
                const std::optional<Sharding>& sharding_or, int64_t num_devices) {
  const Sharding sharding = sharding_or ? *sharding_or : Sharding::Replicate();
  os << "<div class=\"grid-box\"><div class=\"gname\">" << Escape(name) << " "
     << Escape(shape.ToString(false)) << "<br><small>" << Escape(sharding.ToString(false))
     << "</small></div>";
  int64_t rows = 1, cols = 1;
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> tiles;
  if (sharding.IsTiled() && !sharding.IsManual()) {
    const int64_t rank = sharding.TiledDataRank();
    for (int64_t d = 0; d + 1 < rank; ++d) rows *= sharding.TileDim(d);
    if (rank > 0) cols = sharding.TileDim(rank - 1);
    if (rows * cols > 256) {
      os << "<div class=\"note\">" << rows * cols << " tiles: too many to draw</div></div>\n";
      return;
    }
    for (int64_t dev = 0; dev < num_devices; ++dev) {
      auto index = sharding.TileIndexForDevice(dev);
      if (!index) continue;
      int64_t r = 0;
      for (int64_t d = 0; d + 1 < rank; ++d) r = r * sharding.TileDim(d) + (*index)[d];
      int64_t c = rank > 0 ? (*index)[rank - 1] : 0;
      tiles[{r, c}].push_back(dev);
    }
  } else if (sharding.IsMaximal()) {
    tiles[{0, 0}] = {sharding.device()};
  } else {
    std::vector<int64_t> all;
    for (int64_t dev = 0; dev < num_devices; ++dev) all.push_back(dev);
    tiles[{0, 0}] = all;
  }
  os << "<table class=\"grid\">";
  for (int64_t r = 0; r < rows; ++r) {
    os << "<tr>";
    for (int64_t c = 0; c < cols; ++c) {
      const int hue = static_cast<int>((r * cols + c) * 137 % 360);
      os << "<td style=\"background:hsl(" << hue << ",60%,80%)\">";
      auto it = tiles.find({r, c});
      if (sharding.IsManual()) os << "manual";
      else if (it != tiles.end()) os << DeviceList(it->second);
      os << "</td>";
    }
    os << "</tr>";
  }
  os << "</table></div>\n";
}

void RenderMemoryChart(std::ostream& os, const ReportData& d) {
  struct Bar {
    std::string label;
    double peak, params;
  };
  std::vector<Bar> bars;
  const int64_t shown = std::min<int64_t>(d.num_partitions, 32);
  for (int64_t k = 0; k < shown; ++k)
    bars.push_back({"dev " + std::to_string(k),
                    static_cast<double>(d.per_device.peak_memory_bytes),
                    static_cast<double>(d.per_device.parameter_bytes)});
  if (!d.input_partitioned)
    bars.push_back({"unpartitioned", static_cast<double>(d.unpartitioned.peak_memory_bytes),
                    static_cast<double>(d.unpartitioned.parameter_bytes)});
  double max_bytes = 1;
  for (const Bar& b : bars) max_bytes = std::max({max_bytes, b.peak, b.params});
  const int bar_h = 18, label_w = 110, chart_w = 520, gap = 6;
  const int height = static_cast<int>(bars.size()) * (bar_h + gap) + 30;
  os << "<svg id=\"memory-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
     << label_w + chart_w + 120 << "\" height=\"" << height << "\">\n";
  int y = 10;
  for (const Bar& b : bars) {
    const double wp = std::max(1.0, chart_w * b.peak / max_bytes);
    const double wq = std::max(1.0, chart_w * b.params / max_bytes);
    os << "<text x=\"0\" y=\"" << y + 13 << "\" font-size=\"12\">" << Escape(b.label)
       << "</text>"
       << "<rect class=\"peak\" x=\"" << label_w << "\" y=\"" << y << "\" width=\"" << wp
       << "\" height=\"" << bar_h << "\" fill=\"#7aa6d8\"><title>peak "
       << HumanBytes(b.peak) << "</title></rect>"
       << "<rect class=\"params\" x=\"" << label_w << "\" y=\"" << y + 4 << "\" width=\""
       << wq << "\" height=\"" << bar_h - 8 << "\" fill=\"#2b5d91\"><title>parameters "
       << HumanBytes(b.params) << "</title></rect>"
       << "<text x=\"" << label_w + wp + 6 << "\" y=\"" << y + 13
       << "\" font-size=\"11\">" << HumanBytes(b.peak) << "</text>\n";
    y += bar_h + gap;
  }
  os << "<text x=\"" << label_w << "\" y=\"" << y + 12
     << "\" font-size=\"11\">light: peak live memory, dark: parameters</text></svg>\n";
  if (d.num_partitions > shown)
    os << "<div class=\"note\">first " << shown << " of " << d.num_partitions
       << " devices shown (every device runs the same program).</div>\n";
}

}  // namespace

std::string RenderReportHtml(const ReportData& d) {
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>meshsplit report: "
     << Escape(d.file) << "</title>\n<style>\n"
        "body{font-family:sans-serif;margin:20px;color:#222}\n"
        "table.t{border-collapse:collapse;font-size:13px}\n"
        "table.t td,table.t th{border:1px solid #bbb;padding:3px 6px;text-align:left}\n"
        ".grid-box{display:inline-block;vertical-align:top;margin:8px;padding:6px;"
        "border:1px solid #ddd}\n"
        ".gname{font-size:12px;margin-bottom:4px}\n"
        "table.grid{border-collapse:collapse}\n"
        "table.grid td{border:1px solid #555;min-width:48px;height:32px;text-align:center;"
        "font-size:11px;padding:2px}\n"
        ".note{font-size:12px;color:#666}\n</style></head><body>\n";
  os << "<h1>meshsplit report</h1><p>" << Escape(d.file) << ": " << d.num_partitions
     << " partitions, mesh <code>" << Escape(d.mesh.ToString()) << "</code></p>\n";
  os << "<h2>Cost</h2><table class=\"t\"><tr><th></th><th>per device</th>"
        "<th>unpartitioned</th></tr>\n";
  auto row = [&](const char* name, const std::string& a, const std::string& b) {
    os << "<tr><td>" << name << "</td><td>" << a << "</td><td>" << b << "</td></tr>\n";
  };
  char fa[40], fb[40];
  std::snprintf(fa, sizeof(fa), "%.6g", d.per_device.flops);
  std::snprintf(fb, sizeof(fb), "%.6g", d.unpartitioned.flops);
  // A partitioned input has no unpartitioned program to cost.
  auto un = [&](const std::string& s) { return d.input_partitioned ? std::string("-") : s; };
  row("FLOPs", fa, un(fb));
  row("peak memory", HumanBytes(d.per_device.peak_memory_bytes),
      un(HumanBytes(d.unpartitioned.peak_memory_bytes)));
  row("parameters", HumanBytes(d.per_device.parameter_bytes),
      un(HumanBytes(d.unpartitioned.parameter_bytes)));
  row("outputs", HumanBytes(d.per_device.output_bytes), un(HumanBytes(d.unpartitioned.output_bytes)));
  os << "</table>\n";

  os << "<h2>Per-device memory</h2>\n";
  RenderMemoryChart(os, d);

  os << "<h2>Shardings</h2>";
  // A partitioned input only has per-device shapes (with the global
  // shardings kept on its parameters and root).
  if (d.input_partitioned) os << "<p class=\"note\">shapes are per device</p>";
  os << "<h3>Parameters</h3>\n";
  const Computation* entry = (d.original ? d.original : d.partitioned)->entry();
  for (const Instruction* p : entry->parameters()) {
    if (p->shape().IsArray())
      RenderGrid(os, p->name(), p->shape(), p->sharding(), d.num_partitions);
  }
  os << "<h3>Outputs</h3>\n";
  const Instruction* root = entry->root();
  if (root->shape().IsTuple()) {
    for (int64_t k = 0; k < root->shape().tuple_size(); ++k) {
      const Shape& s = root->shape().tuple_shapes(k);
      if (!s.IsArray()) continue;
      std::optional<Sharding> sh;
      if (root->has_sharding()) {
        if (root->sharding()->IsTuple() &&
            k < static_cast<int64_t>(root->sharding()->tuple_elements().size()))
          sh = root->sharding()->tuple_elements()[k];
        else if (!root->sharding()->IsTuple())
          sh = root->sharding();
      }
      RenderGrid(os, root->name() + "[" + std::to_string(k) + "]", s, sh, d.num_partitions);
    }
  } else if (root->shape().IsArray()) {
    RenderGrid(os, root->name(), root->shape(), root->sharding(), d.num_partitions);
  }

  os << "<h2>Collectives (" << d.per_device.collectives.size() << ")</h2>\n"
        "<table class=\"t\" id=\"collectives\"><tr><th>kind</th><th>instruction</th>"
        "<th>count</th><th>group</th><th>operand</th><th>result</th><th>wire/device</th>"
        "<th>mesh axes</th><th>cause</th></tr>\n";
  for (size_t k = 0; k < d.per_device.collectives.size(); ++k) {
    const CollectiveCost& c = d.per_device.collectives[k];
    os << "<tr><td>" << Escape(c.kind) << "</td><td>" << Escape(c.instruction) << "</td><td>"
       << c.count << "</td><td>" << c.group_size << "</td><td>" << HumanBytes(c.operand_bytes)
       << "</td><td>" << HumanBytes(c.result_bytes) << "</td><td>" << HumanBytes(c.wire_bytes)
       << "</td><td>" << Escape(c.mesh_axes) << "</td><td>" << Escape(d.causes[k].ToString())
       << "</td></tr>\n";
  }
  os << "</table>\n<h2>Largest memory holders (per device, at peak)</h2>"
        "<table class=\"t\"><tr><th>value</th><th>shape</th><th>bytes</th></tr>\n";
  for (size_t k = 0; k < d.per_device.live_at_peak.size() && k < 10; ++k) {
    const MemoryHolder& h = d.per_device.live_at_peak[k];
    os << "<tr><td>" << Escape(h.name) << (h.is_parameter ? " (parameter)" : "")
       << "</td><td>" << Escape(h.shape) << "</td><td>" << HumanBytes(h.bytes) << "</td></tr>\n";
  }
  os << "</table>\n";
  for (const std::string& n : d.per_device.notes)
    os << "<p class=\"note\">note: " << Escape(n) << "</p>\n";
  // Self-check: marks the page when the chart has drawn bars (for tests).
  os << "<script>\n(function(){var bars=document.querySelectorAll('#memory-chart rect');"
        "var ok=bars.length>0;for(var i=0;i<bars.length;i++){"
        "if(!(parseFloat(bars[i].getAttribute('width'))>0))ok=false;}"
        "document.body.setAttribute('data-chart-ok',ok?'yes':'no');})();\n</script>\n";
  os << "</body></html>\n";
  return os.str();
}

}  // namespace meshsplit::cli
