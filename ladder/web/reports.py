"""The what-if report page: the latest `manage.py simulate` report, served as it is."""

from __future__ import annotations

from django.http import HttpResponseBase
from django.views.decorators.http import require_GET

from omniroute_admin.dashboard import HtmxHttpRequest, render, viewer_required

# The report is a self-contained file with inline styles and SVG and no script at all; it
# is served under a CSP that allows exactly that.
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"


@require_GET
@viewer_required
def simulation_report(request: HtmxHttpRequest) -> HttpResponseBase:
    """The latest `manage.py simulate` report, or a page saying how to make one."""
    from django.http import HttpResponse

    from ladder.simulator.report import latest_report_path

    path = latest_report_path()
    if path is None:
        return render(request, "ladder/no_report.html", {}, partials=("report-missing",))
    response = HttpResponse(path.read_bytes(), content_type="text/html; charset=utf-8")
    response["Content-Security-Policy"] = REPORT_CSP
    return response
