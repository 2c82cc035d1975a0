// HTML rendering of `meshsplit report` (report_data.h): one self-contained
// page (no network, no external scripts or fonts). Top to bottom: the
// headline numbers, memory at the peak by kind (unpartitioned vs per
// device), wire bytes by mesh axis x collective kind, the collectives grouped
// by (kind, cause) in a sortable table, the sharding grids of the entry's
// parameters and outputs in mesh_split notation, then the full collective
// list and the largest memory holders. The charts and grids are SVG
// (report_svg.cc); a small inline script sorts the tables and records what
// the page drew on <body> (data-* attributes the browser test reads).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "cli/report_data.h"
#include "cli/report_svg.h"

namespace meshsplit::cli {
namespace {

const char kStyle[] = R"css(
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#f6f8fa}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px 32px;color:var(--fg);max-width:1280px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:14px;margin:16px 0 6px;color:var(--muted)}
.sub{color:var(--muted);font-size:13px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 14px;min-width:180px;background:#fff}
.card .k{font-size:12px;color:var(--muted)}
.card .v{font-size:20px;font-weight:600;margin:2px 0}
.card .c{font-size:12px;color:var(--muted)}
.chart{display:block;margin:4px 0 8px;font-size:12px}
table.pipe td{text-align:center;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:11px;padding:3px 4px;border:1px solid #fff}
table.pipe td.F{background:#cfe2ff}table.pipe td.B{background:#b6ecea}table.pipe td.W{background:#cdeccd}
table.pipe td.FB{background:linear-gradient(90deg,#cfe2ff 50%,#b6ecea 50%)}table.pipe td.idle{background:#f0f0f0}
.chart .row-label{font-size:13px;fill:var(--fg)}
.chart .in-bar{font-size:11px;fill:#fff;pointer-events:none}
.chart .bar-total{font-size:12px;fill:var(--fg);font-weight:600}
.chart .legend{font-size:12px;fill:var(--muted)}
table.t{border-collapse:collapse;font-size:13px;margin:6px 0}
table.t td,table.t th{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
table.t th{background:var(--bg);font-weight:600;white-space:nowrap}
table.t td:first-child{white-space:nowrap}
table.t td.n,table.t th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th:hover{background:#eaeef2}
table.sortable th[aria-sort=ascending]::after{content:" \25B2";font-size:10px}
table.sortable th[aria-sort=descending]::after{content:" \25BC";font-size:10px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:-1px}
.share{display:inline-block;height:8px;background:#4e79a7;border-radius:2px;margin-right:6px;vertical-align:0}
details summary{cursor:pointer;color:var(--muted);font-size:12px}
details ul{margin:4px 0 0 0;padding-left:18px;font-size:12px}
.grids{display:flex;flex-wrap:wrap;gap:10px;align-items:flex-start}
.grid-box{border:1px solid var(--line);border-radius:6px;padding:6px 8px;background:#fff}
.gname{font-size:12px;margin-bottom:2px;max-width:220px;overflow-wrap:anywhere}
.gname .shape{color:var(--muted);font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11px}
.mesh-label{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;color:#0b5cad;margin-bottom:4px}
.raw-label{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:10px;color:var(--muted);margin-bottom:4px;max-width:220px;overflow-wrap:anywhere}
svg.grid .dim{font-size:10px;fill:var(--muted)}
svg.grid .devs{font-size:10px;fill:#1f2328;font-family:ui-monospace,Menlo,Consolas,monospace}
.note{font-size:12px;color:var(--muted)}
.nw{white-space:nowrap}
)css";

// Sorts a table.sortable by the clicked column (numbers by data-v), and
// records on <body> what the page drew, for the browser test. With
// #selftest in the URL it also sorts the groups table both ways and checks.
const char kScript[] = R"js(
(function(){
function key(td){var v=td.getAttribute('data-v');return v===null?td.textContent.trim():v;}
function sortBy(th,dir){
  var table=th.closest('table'),tbody=table.tBodies[0];
  var idx=Array.prototype.indexOf.call(th.parentNode.children,th);
  var num=th.classList.contains('n');
  if(!dir)dir=th.getAttribute('aria-sort')==='descending'?'ascending':'descending';
  var rows=Array.prototype.slice.call(tbody.rows);
  rows.sort(function(a,b){
    var x=key(a.cells[idx]),y=key(b.cells[idx]);
    var c=num?parseFloat(x)-parseFloat(y):x.localeCompare(y);
    return dir==='ascending'?c:-c;});
  rows.forEach(function(r){tbody.appendChild(r);});
  th.parentNode.querySelectorAll('th').forEach(function(h){h.removeAttribute('aria-sort');});
  th.setAttribute('aria-sort',dir);
}
document.querySelectorAll('table.sortable th').forEach(function(th){
  th.addEventListener('click',function(){sortBy(th);});});
function drawn(sel){var n=0;document.querySelectorAll(sel).forEach(function(r){
  if(parseFloat(r.getAttribute('width'))>0&&r.getBBox().width>0)n++;});return n;}
var b=document.body,mem=drawn('#memory-chart rect.mem'),wire=drawn('#wire-chart rect.wire');
b.setAttribute('data-memory-bars',mem);
b.setAttribute('data-wire-bars',wire);
b.setAttribute('data-groups',document.querySelectorAll('#collective-groups tbody tr').length);
b.setAttribute('data-grids',document.querySelectorAll('.grid-box svg.grid').length);
b.setAttribute('data-mesh-labels',document.querySelectorAll('.grid-box .mesh-label').length);
b.setAttribute('data-chart-ok',mem>0?'yes':'no');
if(location.hash==='#selftest'){
  var th=document.querySelector('#collective-groups th.wire'),ok=!!th;
  function col(){return Array.prototype.map.call(document.querySelectorAll(
    '#collective-groups tbody tr td.wire'),function(td){return parseFloat(td.getAttribute('data-v'));});}
  function sorted(v,asc){for(var i=1;i<v.length;i++)if(asc?v[i-1]>v[i]:v[i-1]<v[i])return false;return true;}
  if(ok){sortBy(th,'ascending');ok=sorted(col(),true);sortBy(th,'descending');ok=ok&&sorted(col(),false);}
  b.setAttribute('data-sort-ok',ok?'yes':'no');
}
})();
)js";

// Escaped cause text whose arrows and bracketed mesh_splits ("[data, _]")
// do not break across lines ("-" and ", " are line-break opportunities).
std::string CauseHtml(const std::string& cause) {
  const std::string text = Escape(cause);
  std::string out;
  for (size_t k = 0; k < text.size();) {
    size_t end = std::string::npos;
    if (text.compare(k, 5, "-&gt;") == 0) end = k + 5;
    else if (text[k] == '[') end = text.find(']', k);
    if (end != std::string::npos && text[k] == '[') ++end;
    if (end == std::string::npos) {
      out += text[k++];
      continue;
    }
    out += "<span class=\"nw\">" + text.substr(k, end - k) + "</span>";
    k = end;
  }
  return out;
}

std::string Percent(double part, double whole) {
  if (whole <= 0) return "";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * part / whole);
  return buf;
}

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void Card(std::ostream& os, const std::string& k, const std::string& v, const std::string& c) {
  os << "<div class=\"card\"><div class=\"k\">" << k << "</div><div class=\"v\">" << v
     << "</div><div class=\"c\">" << c << "</div></div>\n";
}

void RenderCards(std::ostream& os, const ReportData& d) {
  const bool un = !d.input_partitioned;
  double wire = 0;
  for (const auto& [k, v] : d.per_device.wire_bytes_by_kind) wire += v;
  os << "<div class=\"cards\">\n";
  Card(os, "FLOPs per device", HumanFlops(d.per_device.flops),
       un ? "of " + HumanFlops(d.unpartitioned.flops) + " unpartitioned (" +
                Percent(d.per_device.flops, d.unpartitioned.flops) + ")"
          : "input already partitioned");
  Card(os, "peak memory per device", HumanBytes(d.per_device.peak_memory_bytes),
       un ? "of " + HumanBytes(d.unpartitioned.peak_memory_bytes) + " unpartitioned (" +
                Percent(d.per_device.peak_memory_bytes, d.unpartitioned.peak_memory_bytes) + ")"
          : "");
  Card(os, "wire bytes per device", HumanBytes(wire), "sent per step, ring algorithms");
  const size_t groups = GroupCollectives(d).size();
  Card(os, "collectives", std::to_string(d.per_device.collectives.size()),
       "in " + std::to_string(groups) + " (kind, cause) group" + (groups == 1 ? "" : "s"));
  os << "</div>\n";
}

void RenderCostTable(std::ostream& os, const ReportData& d) {
  os << "<table class=\"t\"><thead><tr><th></th><th class=\"n\">per device</th>"
        "<th class=\"n\">unpartitioned</th></tr></thead><tbody>\n";
  auto row = [&](const char* name, const std::string& a, const std::string& b) {
    os << "<tr><td>" << name << "</td><td class=\"n\">" << a << "</td><td class=\"n\">"
       << (d.input_partitioned ? "-" : b) << "</td></tr>\n";
  };
  const MemoryByKind dev = MemoryAtPeak(d.per_device), un = MemoryAtPeak(d.unpartitioned);
  row("FLOPs", HumanFlops(d.per_device.flops), HumanFlops(d.unpartitioned.flops));
  row("peak memory", HumanBytes(d.per_device.peak_memory_bytes),
      HumanBytes(d.unpartitioned.peak_memory_bytes));
  row("&nbsp;&nbsp;parameters", HumanBytes(dev.parameters), HumanBytes(un.parameters));
  row("&nbsp;&nbsp;activations", HumanBytes(dev.activations), HumanBytes(un.activations));
  row("&nbsp;&nbsp;outputs (computed by the peak)", HumanBytes(dev.outputs), HumanBytes(un.outputs));
  row("all parameters", HumanBytes(d.per_device.parameter_bytes),
      HumanBytes(d.unpartitioned.parameter_bytes));
  row("all outputs", HumanBytes(d.per_device.output_bytes), HumanBytes(d.unpartitioned.output_bytes));
  row("bytes read", HumanBytes(d.per_device.bytes_read), HumanBytes(d.unpartitioned.bytes_read));
  row("bytes written", HumanBytes(d.per_device.bytes_written),
      HumanBytes(d.unpartitioned.bytes_written));
  os << "</tbody></table>\n";
}

void RenderGroups(std::ostream& os, const ReportData& d) {
  const std::vector<CollectiveGroup> groups = GroupCollectives(d);
  double total = 0;
  for (const CollectiveGroup& g : groups) total += g.wire_bytes;
  os << "<h2>Collectives by kind and cause</h2>\n";
  if (groups.empty()) {
    os << "<p class=\"note\">no collectives</p>\n";
    return;
  }
  os << "<p class=\"sub\">" << d.per_device.collectives.size() << " collectives in "
     << groups.size() << " groups; click a column to sort, a cause to list its instructions."
     << "</p>\n<table class=\"t sortable\" id=\"collective-groups\"><thead><tr>"
        "<th>kind</th><th class=\"n\">count</th><th class=\"n\">executions</th>"
        "<th class=\"n wire\" aria-sort=\"descending\">wire / device</th><th class=\"n\">share</th>"
        "<th>mesh axes</th><th>cause</th></tr></thead><tbody>\n";
  for (const CollectiveGroup& g : groups) {
    const double share = total > 0 ? g.wire_bytes / total : 0;
    os << "<tr class=\"group\"><td data-v=\"" << Escape(g.kind) << "\"><span class=\"swatch\" "
       << "style=\"background:" << (g.kind == "all-reduce"           ? "#4e79a7"
                                    : g.kind == "all-gather"         ? "#f28e2b"
                                    : g.kind == "reduce-scatter"     ? "#e15759"
                                    : g.kind == "all-to-all"         ? "#76b7b2"
                                    : g.kind == "collective-permute" ? "#59a14f"
                                                                     : "#9c755f")
       << "\"></span>" << Escape(g.kind) << "</td><td class=\"n\" data-v=\"" << g.members.size()
       << "\">" << g.members.size() << "</td><td class=\"n\" data-v=\"" << g.executions << "\">"
       << g.executions << "</td><td class=\"n wire\" data-v=\"" << Num(g.wire_bytes) << "\">"
       << HumanBytes(g.wire_bytes) << "</td><td class=\"n\" data-v=\"" << Num(share)
       << "\"><span class=\"share\" style=\"width:" << static_cast<int>(share * 60 + 0.5)
       << "px\"></span>" << Percent(g.wire_bytes, total) << "</td><td>"
       << Escape(g.mesh_axes.empty() ? "-" : g.mesh_axes) << "</td><td data-v=\""
       << Escape(g.cause) << "\"><span class=\"mono\">" << CauseHtml(g.cause)
       << "</span><details><summary>" << g.members.size() << " instruction"
       << (g.members.size() == 1 ? "" : "s") << "</summary><ul>";
    for (size_t k : g.members)
      os << "<li><code>" << Escape(d.per_device.collectives[k].instruction) << "</code>: "
         << CauseHtml(d.causes[k].ToString()) << "</li>";
    os << "</ul></details></td></tr>\n";
  }
  os << "</tbody></table>\n";
}

void RenderShardings(std::ostream& os, const ReportData& d) {
  os << "<h2>Shardings</h2>\n<p class=\"sub\">";
  if (d.has_named_mesh)
    os << "Labels in mesh_split notation over <code>" << Escape(d.mesh.ToString())
       << "</code> (raw sharding on hover). ";
  else
    os << "No named mesh (give <code>--mesh</code> for mesh_split labels). ";
  os << "Rows: the leading dims, columns: the last dim; tiles drawn in proportion to the "
        "elements they hold (the box follows the array's shape, clamped at 4:1), labelled "
        "with the devices holding them.";
  if (d.input_partitioned) os << " The input is partitioned: shapes are per device.";
  os << "</p>\n";
  const std::vector<ArrayView> params = EntryParameterViews(d);
  const std::vector<ArrayView> outputs = EntryOutputViews(d);
  os << "<h3>Parameters (" << params.size() << ")</h3><div class=\"grids\" id=\"param-grids\">\n";
  for (const ArrayView& v : params) RenderGrid(os, v, d.num_partitions);
  os << "</div>\n<h3>Outputs (" << outputs.size()
     << ")</h3><div class=\"grids\" id=\"output-grids\">\n";
  for (const ArrayView& v : outputs) RenderGrid(os, v, d.num_partitions);
  os << "</div>\n";
}

void RenderCollectiveList(std::ostream& os, const ReportData& d) {
  const auto& cols = d.per_device.collectives;
  os << "<h2>Collectives (" << cols.size() << ")</h2>\n<details><summary>every collective in "
     << "program order</summary>\n<table class=\"t sortable\" id=\"collectives\"><thead><tr>"
        "<th>kind</th><th>instruction</th><th class=\"n\">count</th><th class=\"n\">group</th>"
        "<th class=\"n\">operand</th><th class=\"n\">result</th><th class=\"n\">wire/device</th>"
        "<th>mesh axes</th><th>cause</th></tr></thead><tbody>\n";
  for (size_t k = 0; k < cols.size(); ++k) {
    const CollectiveCost& c = cols[k];
    os << "<tr><td>" << Escape(c.kind) << "</td><td>" << Escape(c.instruction)
       << "</td><td class=\"n\">" << c.count << "</td><td class=\"n\">" << c.group_size
       << "</td><td class=\"n\" data-v=\"" << c.operand_bytes << "\">"
       << HumanBytes(c.operand_bytes) << "</td><td class=\"n\" data-v=\"" << c.result_bytes
       << "\">" << HumanBytes(c.result_bytes) << "</td><td class=\"n\" data-v=\""
       << Num(c.wire_bytes) << "\">" << HumanBytes(c.wire_bytes) << "</td><td>"
       << Escape(c.mesh_axes) << "</td><td>" << Escape(d.causes[k].ToString()) << "</td></tr>\n";
  }
  os << "</tbody></table></details>\n";
}

void RenderPipeline(std::ostream& os, const ReportData& d) {
  if (d.pipeline.loops.empty()) return;
  os << "<h2>Pipeline</h2>\n";
  for (const PipelineSchedule& p : d.pipeline.loops) {
    os << "<p class=\"sub\">loop <code>%" << Escape(p.loop) << "</code>: " << p.layers
       << " layers on " << p.stages << " stages, " << p.microbatches << " microbatches, "
       << Escape(p.schedule) << ", " << p.ticks << " ticks, bubble "
       << Percent(p.bubble_fraction, 1)
       << " (F forward, B backward, W weight gradients, grey idle)</p><table class=\"t pipe\">";
    for (size_t s = 0; s < p.table.size(); ++s) {
      os << "<tr><th>stage " << s << "</th>";
      for (const std::string& a : p.table[s]) {
        // A cell of one action takes its colour; a paired cell (several) a mix.
        const std::string kind = a.empty() ? "idle"
                                 : a.find('+') != std::string::npos ? "FB"
                                                                     : a.substr(0, 1);
        os << "<td class=\"" << kind << "\">" << Escape(a) << "</td>";
      }
      os << "</tr>";
    }
    os << "</table>\n";
  }
}

}  // namespace

std::string RenderReportHtml(const ReportData& d) {
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>meshsplit report: "
     << Escape(d.file) << "</title>\n<style>" << kStyle << "</style></head><body>\n";
  std::string mesh;
  for (const MeshAxis& a : d.mesh.axes())
    mesh += (mesh.empty() ? "" : " \u00d7 ") + a.name + "=" + std::to_string(a.size);
  os << "<h1>meshsplit report</h1><div class=\"sub\"><code>" << Escape(d.file) << "</code> &middot; "
     << d.num_partitions << " devices &middot; mesh <code>" << Escape(mesh) << "</code>"
     << (d.input_partitioned ? " &middot; input already partitioned" : "") << "</div>\n";
  RenderCards(os, d);

  os << "<h2>Memory at the peak, by kind</h2>\n<p class=\"sub\">What is live when memory peaks: "
        "entry parameters, temporaries (activations) and outputs already computed. The caret "
        "marks an even split of the unpartitioned peak over the devices.</p>\n";
  RenderMemoryChart(os, d);
  RenderCostTable(os, d);

  os << "<h2>Wire bytes per device, by mesh axis and kind</h2>\n";
  if (d.per_device.collectives.empty())
    os << "<p class=\"note\">no collectives</p>\n";
  else
    RenderWireChart(os, d);

  RenderGroups(os, d);
  RenderShardings(os, d);
  RenderPipeline(os, d);
  RenderCollectiveList(os, d);

  os << "<h2>Largest memory holders (per device, at the peak)</h2><table class=\"t\"><thead><tr>"
        "<th>value</th><th>shape</th><th class=\"n\">bytes</th></tr></thead><tbody>\n";
  for (size_t k = 0; k < d.per_device.live_at_peak.size() && k < 10; ++k) {
    const MemoryHolder& h = d.per_device.live_at_peak[k];
    os << "<tr><td>" << Escape(h.name)
       << (h.is_parameter ? " (parameter)" : h.is_output ? " (output)" : "") << "</td><td><code>"
       << Escape(h.shape) << "</code></td><td class=\"n\">" << HumanBytes(h.bytes) << "</td></tr>\n";
  }
  os << "</tbody></table>\n";
  for (const std::string& n : d.per_device.notes)
    os << "<p class=\"note\">note: " << Escape(n) << "</p>\n";
  os << "<script>" << kScript << "</script>\n</body></html>\n";
  return os.str();
}

}  // namespace meshsplit::cli
