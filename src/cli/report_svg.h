// The drawn parts of the HTML report (report_html.cc): inline SVG charts and
// sharding grids. Plain SVG, no scripts or external resources; every bar
// carries a <title> with its exact value.
#pragma once

#include <ostream>
#include <string>

#include "report/report_view.h"

namespace meshsplit::cli {

// "<" ">" "&" and quotes escaped for text and attribute values.
std::string Escape(const std::string& s);

// The peak by kind: one stacked bar for the unpartitioned program and one per
// device, on one scale, with a caret at 1/N of the unpartitioned peak.
void RenderMemoryChart(std::ostream& os, const ReportData& d);

// Wire bytes per device: one stacked bar per mesh axis, a segment per
// collective kind. Nothing when there are no collectives.
void RenderWireChart(std::ostream& os, const ReportData& d);

// One value's device grid: tiles along the leading dims (rows) and the last
// dim (columns), sized by the elements each tile holds, labelled with the
// devices holding it; titled with the name, shape and mesh_split label.
void RenderGrid(std::ostream& os, const ArrayView& v, int64_t num_devices);

}  // namespace meshsplit::cli
