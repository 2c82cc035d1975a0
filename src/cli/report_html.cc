// HTML rendering of `meshsplit report` (report_data.h). Filled in below.
#include "cli/report_data.h"

namespace meshsplit::cli {

std::string RenderReportHtml(const ReportData& data) {
  return "<!DOCTYPE html><html><body><p>" + data.file + "</p></body></html>\n";
}

}  // namespace meshsplit::cli
