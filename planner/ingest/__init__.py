"""Request logs -> demand history, streamed with DuckDB.

``ingest_logs`` reads Azure-trace CSV, Mooncake JSONL or any CSV/TSV/Parquet/JSONL
with a column mapping and returns per-bucket demand and token histograms;
``write_ingest_outputs`` writes them. ``ingest_rates`` turns aggregated tables (request
counts or rates per interval) into the same demand history; ``write_rates_output``
writes it. See ``data/README.d/ingest.md`` for the columns.
"""

from planner.contracts import HISTOGRAM_COLUMNS
from planner.ingest.aggregate import DEMAND_COLUMNS, FREQ_EXAMPLES, parse_freq
from planner.ingest.formats import FORMATS, PRESETS, parse_mapping
from planner.ingest.pipeline import IngestResult, ingest_logs
from planner.ingest.rates_pipeline import RatesResult, ingest_rates
from planner.ingest.writer import output_paths, reuse_path, write_ingest_outputs, write_rates_output

__all__ = [
    "DEMAND_COLUMNS",
    "FORMATS",
    "FREQ_EXAMPLES",
    "HISTOGRAM_COLUMNS",
    "PRESETS",
    "IngestResult",
    "RatesResult",
    "ingest_logs",
    "ingest_rates",
    "output_paths",
    "parse_freq",
    "parse_mapping",
    "reuse_path",
    "write_ingest_outputs",
    "write_rates_output",
]
