"""The monthly capacity report: build (pure: inputs -> report model) and render (Markdown, HTML, JSON, charts)."""

from planner.report.build import build_report
from planner.report.inputs import ReportInputs
from planner.report.lock import ReportLock, ReportLockedError, report_lock
from planner.report.model import ReportModel, Section, Table
from planner.report.write import WrittenReport, write_report

__all__ = ["ReportInputs", "ReportLock", "ReportLockedError", "ReportModel", "Section", "Table", "WrittenReport",
           "build_report", "report_lock", "write_report"]
