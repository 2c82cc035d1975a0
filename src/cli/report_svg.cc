// Inline SVG for the HTML report (report_svg.h).
#include "cli/report_svg.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

namespace meshsplit::cli {
namespace {

// Colours by kind, fixed so that a kind looks the same in every chart.
const char* KindColor(const std::string& kind) {
  static const std::map<std::string, const char*> colors = {
      {"all-reduce", "#4e79a7"},        {"all-gather", "#f28e2b"},
      {"reduce-scatter", "#e15759"},    {"all-to-all", "#76b7b2"},
      {"collective-permute", "#59a14f"}, {"parameters", "#4e79a7"},
      {"activations", "#f28e2b"},        {"outputs", "#59a14f"}};
  auto it = colors.find(kind);
  return it == colors.end() ? "#9c755f" : it->second;
}

std::string Fixed(double v, int digits = 1) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

struct Segment {
  std::string kind;
  double value;
};

// One labelled stacked bar at `y`, `scale` pixels per unit. Segments wide
// enough carry their value inside.
void StackedBar(std::ostream& os, const std::string& cls, const std::string& label, int y,
                int x0, double scale, const std::vector<Segment>& segments, double total) {
  const int h = 26;
  os << "<g class=\"bar\"><text class=\"row-label\" x=\"" << x0 - 10 << "\" y=\"" << y + 17
     << "\" text-anchor=\"end\">" << Escape(label) << "</text>\n";
  double x = x0;
  for (const Segment& s : segments) {
    if (s.value <= 0) continue;
    const double w = std::max(1.0, s.value * scale);
    const std::string pct = total > 0 ? Fixed(100.0 * s.value / total) + "%" : "";
    os << "<rect class=\"" << cls << "\" data-kind=\"" << Escape(s.kind) << "\" x=\"" << Fixed(x)
       << "\" y=\"" << y << "\" width=\"" << Fixed(w) << "\" height=\"" << h << "\" fill=\""
       << KindColor(s.kind) << "\"><title>" << Escape(label) << ", " << Escape(s.kind) << ": "
       << HumanBytes(s.value) << " (" << pct << ")</title></rect>\n";
    const std::string text = HumanBytes(s.value);
    if (w > 8.0 * static_cast<double>(text.size()) + 8)
      os << "<text class=\"in-bar\" x=\"" << Fixed(x + w / 2) << "\" y=\"" << y + 17
         << "\" text-anchor=\"middle\">" << text << "</text>\n";
    x += w;
  }
  os << "<text class=\"bar-total\" x=\"" << Fixed(x + 8) << "\" y=\"" << y + 17 << "\">"
     << HumanBytes(total) << "</text></g>\n";
}

// A swatch per kind, labelled with `labels[k]` (the kind's name when absent).
void Legend(std::ostream& os, const std::vector<std::string>& kinds, int x, int y,
            const std::map<std::string, std::string>& labels = {}) {
  for (const std::string& k : kinds) {
    auto it = labels.find(k);
    const std::string text = it == labels.end() ? k : it->second;
    os << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"12\" height=\"12\" rx=\"2\" fill=\""
       << KindColor(k) << "\"/><text class=\"legend\" x=\"" << x + 17 << "\" y=\"" << y + 11
       << "\">" << Escape(text) << "</text>\n";
    x += 30 + 7 * static_cast<int>(text.size());
  }
}

// Elements of tile `i` of `tiles` along a dim of `size` (ceil-sized tiles,
// the last ones short or empty, as the partitioner pads them).
int64_t TileExtent(int64_t size, int64_t tiles, int64_t i) {
  const int64_t per = (size + tiles - 1) / tiles;
  return std::max<int64_t>(0, std::min(size, (i + 1) * per) - std::min(size, i * per));
}

std::string DeviceList(const std::vector<int64_t>& devices) {
  std::string out;
  for (size_t k = 0; k < devices.size(); ++k) out += (k ? "," : "") + std::to_string(devices[k]);
  return out;
}

}  // namespace

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

void RenderMemoryChart(std::ostream& os, const ReportData& d) {
  const MemoryByKind dev = MemoryAtPeak(d.per_device);
  const MemoryByKind un = MemoryAtPeak(d.unpartitioned);
  auto segments = [](const MemoryByKind& m) {
    return std::vector<Segment>{{"parameters", static_cast<double>(m.parameters)},
                                {"activations", static_cast<double>(m.activations)},
                                {"outputs", static_cast<double>(m.outputs)}};
  };
  const int x0 = 130, bar_w = 480, row = 40;
  const double max_total =
      std::max<double>({1.0, static_cast<double>(dev.total()),
                        d.input_partitioned ? 0.0 : static_cast<double>(un.total())});
  const double scale = bar_w / max_total;
  const int rows = d.input_partitioned ? 1 : 2;
  const int height = rows * row + 50;
  os << "<svg id=\"memory-chart\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
     << x0 + bar_w + 110 << "\" height=\"" << height << "\" role=\"img\" aria-label=\"memory at "
     << "peak by kind\">\n";
  int y = 8;
  if (!d.input_partitioned) {
    StackedBar(os, "mem", "unpartitioned", y, x0, scale, segments(un),
               static_cast<double>(un.total()));
    y += row;
  }
  StackedBar(os, "mem", "per device", y, x0, scale, segments(dev), static_cast<double>(dev.total()));
  if (!d.input_partitioned && d.num_partitions > 1) {
    // Where a perfect split of the unpartitioned peak would put each device:
    // a caret under the per-device bar (a line across it would cross the
    // segment labels).
    const double ideal = static_cast<double>(un.total()) / d.num_partitions * scale + x0;
    const int tip = y + 29;
    os << "<g class=\"ideal\"><title>1/" << d.num_partitions << " of the unpartitioned peak: "
       << HumanBytes(static_cast<double>(un.total()) / d.num_partitions) << "</title><path d=\"M"
       << Fixed(ideal) << "," << tip << " l-5,8 h10 z\" fill=\"#222\"/><text class=\"legend\" x=\""
       << Fixed(ideal + 8) << "\" y=\"" << tip + 9 << "\">even split (1/" << d.num_partitions
       << " of unpartitioned): " << HumanBytes(static_cast<double>(un.total()) / d.num_partitions)
       << "</text></g>\n";
  }
  Legend(os, {"parameters", "activations", "outputs"}, x0, height - 16);
  os << "</svg>\n";
}

void RenderWireChart(std::ostream& os, const ReportData& d) {
  const auto table = WireBytesByAxisAndKind(d.per_device);
  if (table.empty()) return;
  std::vector<std::pair<std::string, double>> axes;
  double max_total = 1;
  for (const auto& [axis, kinds] : table) {
    double t = 0;
    for (const auto& [k, v] : kinds) t += v;
    axes.push_back({axis, t});
    max_total = std::max(max_total, t);
  }
  std::stable_sort(axes.begin(), axes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> kinds;
  for (const auto& [k, v] : d.per_device.wire_bytes_by_kind) kinds.push_back(k);
  // The legend carries each kind's total over all axes.
  std::map<std::string, std::string> totals;
  int legend_w = 0;
  for (const auto& [k, v] : d.per_device.wire_bytes_by_kind) {
    totals[k] = k + " " + HumanBytes(v);
    legend_w += 30 + 7 * static_cast<int>(totals[k].size());
  }
  const int x0 = 130, bar_w = 480, row = 40;
  const int height = static_cast<int>(axes.size()) * row + 36;
  os << "<svg id=\"wire-chart\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
     << std::max(x0 + bar_w + 110, x0 + legend_w) << "\" height=\"" << height << "\" role=\"img\" aria-label=\"wire bytes "
     << "by mesh axis and collective kind\">\n";
  int y = 8;
  for (const auto& [axis, total] : axes) {
    std::vector<Segment> segs;
    for (const std::string& k : kinds) {
      auto it = table.at(axis).find(k);
      segs.push_back({k, it == table.at(axis).end() ? 0.0 : it->second});
    }
    StackedBar(os, "wire", axis.empty() ? "(no mesh axis)" : axis, y, x0, bar_w / max_total,
               segs, total);
    y += row;
  }
  Legend(os, kinds, x0, height - 16, totals);
  os << "</svg>\n";
}

void RenderGrid(std::ostream& os, const ArrayView& v, int64_t num_devices) {
  const Sharding sharding = v.sharding ? *v.sharding : Sharding::Replicate();
  const std::vector<int64_t>& dims = v.shape.dimensions();
  const int64_t rank = static_cast<int64_t>(dims.size());
  os << "<div class=\"grid-box\"><div class=\"gname\"><b>" << Escape(v.name) << "</b> <span "
     << "class=\"shape\">" << Escape(v.shape.ToString(false)) << "</span></div><div class=\""
     << (v.mesh_split ? "mesh-label" : "raw-label") << "\" title=\""
     << Escape(sharding.ToString(false)) << "\">" << Escape(v.label) << "</div>\n";
  // Tiles along the leading dims (flattened into rows) and the last dim.
  const bool tiled = sharding.IsTiled() && !sharding.IsManual();
  std::vector<int64_t> tile_dims(rank, 1);
  if (tiled)
    for (int64_t k = 0; k < rank; ++k) tile_dims[k] = sharding.TileDim(k);
  int64_t rows = 1, cols = rank > 0 ? tile_dims[rank - 1] : 1;
  for (int64_t k = 0; k + 1 < rank; ++k) rows *= tile_dims[k];
  if (rows * cols > 256) {
    os << "<div class=\"note\">" << rows * cols << " tiles: too many to draw</div></div>\n";
    return;
  }
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> tiles;
  if (tiled) {
    for (int64_t dev = 0; dev < num_devices; ++dev) {
      auto index = sharding.TileIndexForDevice(dev);
      if (!index) continue;
      int64_t r = 0;
      for (int64_t k = 0; k + 1 < rank; ++k) r = r * tile_dims[k] + (*index)[k];
      tiles[{r, rank > 0 ? (*index)[rank - 1] : 0}].push_back(dev);
    }
  } else if (sharding.IsMaximal()) {
    tiles[{0, 0}] = {sharding.device()};
  } else {
    std::vector<int64_t> all;
    for (int64_t dev = 0; dev < num_devices; ++dev) all.push_back(dev);
    tiles[{0, 0}] = all;
  }
  // Elements per row tile (product over the leading dims) and column tile.
  std::vector<double> row_ext(rows, 1), col_ext(cols, 1);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r;
    double e = 1;
    for (int64_t k = rank - 2; k >= 0; --k) {
      e *= static_cast<double>(TileExtent(dims[k], tile_dims[k], rest % tile_dims[k]));
      rest /= tile_dims[k];
    }
    row_ext[r] = e;
  }
  if (rank > 0)
    for (int64_t c = 0; c < cols; ++c)
      col_ext[c] = static_cast<double>(TileExtent(dims[rank - 1], cols, c));
  double total_rows = 0, total_cols = 0;
  for (double e : row_ext) total_rows += e;
  for (double e : col_ext) total_cols += e;
  // The box follows the array's aspect (clamped at 4:1; a vector is a strip).
  const double side = 168;
  double w = side, h = side;
  if (rank <= 1) {
    h = 30;
  } else if (total_cols > 0 && total_rows > 0) {
    const double ratio = std::clamp(total_cols / total_rows, 0.25, 4.0);
    if (ratio >= 1) h = side / ratio;
    else w = side * ratio;
  }
  const double left = rank >= 2 ? 18 : 0, top = rank >= 1 ? 16 : 0;
  os << "<svg class=\"grid\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Fixed(w + left + 2)
     << "\" height=\"" << Fixed(h + top + 2) << "\">\n";
  // Axis captions: the dims' sizes and the mesh axes splitting them (else
  // the tile count).
  auto caption = [&](int64_t from, int64_t to, int64_t tiles_along) {
    std::string text, axes;
    for (int64_t k = from; k < to; ++k) {
      text += (k > from ? "\u00d7" : "") + std::to_string(dims[k]);
      if (k < static_cast<int64_t>(v.dim_axes.size()))
        for (const std::string& a : v.dim_axes[k]) axes += (axes.empty() ? "" : ",") + a;
    }
    if (!axes.empty()) return text + " \u00b7 " + axes;
    return tiles_along > 1 ? text + " / " + std::to_string(tiles_along) : text;
  };
  if (rank >= 1) {
    os << "<text class=\"dim\" x=\"" << Fixed(left + w / 2) << "\" y=\"11\" text-anchor=\"middle\">"
       << Escape(caption(rank - 1, rank, cols)) << "</text>\n";
  }
  if (rank >= 2) {
    os << "<text class=\"dim\" transform=\"translate(12," << Fixed(top + h / 2)
       << ") rotate(-90)\" text-anchor=\"middle\">" << Escape(caption(0, rank - 1, rows))
       << "</text>\n";
  }
  double y = top;
  for (int64_t r = 0; r < rows; ++r) {
    const double th = total_rows > 0 ? h * row_ext[r] / total_rows : h / rows;
    double x = left;
    for (int64_t c = 0; c < cols; ++c) {
      const double tw = total_cols > 0 ? w * col_ext[c] / total_cols : w / cols;
      const int hue = static_cast<int>((r * cols + c) * 47 % 360);
      auto it = tiles.find({r, c});
      const std::string devs =
          sharding.IsManual() ? "manual" : it == tiles.end() ? "" : DeviceList(it->second);
      os << "<g class=\"tile\"><rect x=\"" << Fixed(x) << "\" y=\"" << Fixed(y) << "\" width=\""
         << Fixed(std::max(tw, 0.5)) << "\" height=\"" << Fixed(std::max(th, 0.5))
         << "\" fill=\"hsl(" << hue << ",55%,82%)\" stroke=\"#555\" stroke-width=\"0.8\">"
         << "<title>tile (" << r << ", " << c << "): " << Fixed(row_ext[r], 0) << " x "
         << Fixed(col_ext[c], 0) << " elements on device" << (it != tiles.end() && it->second.size() > 1 ? "s " : " ")
         << devs << "</title></rect>";
      // Device ids inside when they fit (about 6 px a character).
      std::string text = devs;
      if (6.2 * static_cast<double>(text.size()) > tw - 4 && it != tiles.end() &&
          it->second.size() > 2)
        text = (static_cast<int64_t>(it->second.size()) == num_devices ? "all " : "") +
               std::to_string(it->second.size()) +
               (static_cast<int64_t>(it->second.size()) == num_devices ? "" : " devs");
      if (6.2 * static_cast<double>(text.size()) <= tw - 2 && th >= 11)
        os << "<text class=\"devs\" x=\"" << Fixed(x + tw / 2) << "\" y=\"" << Fixed(y + th / 2 + 4)
           << "\" text-anchor=\"middle\">" << Escape(text) << "</text>";
      os << "</g>\n";
      x += tw;
    }
    y += th;
  }
  os << "</svg></div>\n";
}

}  // namespace meshsplit::cli
