"""The monthly capacity report: build (pure: inputs -> report model) and render (Markdown, HTML, JSON, charts).

The shell writes it (:mod:`planner.workflows.report_files`, under the reports folder's lock,
:mod:`planner.workflows.report_lock`).
"""

from planner.report.build import build_report
from planner.report.inputs import ReportInputs
from planner.report.model import ReportModel, Section, Table

__all__ = ["ReportInputs", "ReportModel", "Section", "Table", "build_report"]
