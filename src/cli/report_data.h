// The renderers of `meshsplit report` (cmd_report.cc) beside its JSON
// (report/report.h): text and a self-contained HTML page (report_html.cc).
#pragma once

#include <string>

#include "report/report.h"
#include "report/report_view.h"

namespace meshsplit::cli {

// A self-contained HTML page (no network): sharding grids, the collectives
// table, per-device memory bars.
std::string RenderReportHtml(const ReportData& data);

}  // namespace meshsplit::cli
