"""The NYC flights 2013 pipeline (`flowledger pipeline run`, `flowledger demo`): raw CSV
landed as FlowFiles, typed, cleaned and joined on Spark, curated tables written through the
timeline, provenance for every stage (see docs/pipeline.md)."""

from .record import Recorder, file_uuid
from .report import print_result
from .run import PipelineOptions, PipelineResult, run_pipeline
from .sources import RawFile, raw_files
from .trace import TraceNode, trace

__all__ = [
    "PipelineOptions",
    "PipelineResult",
    "RawFile",
    "Recorder",
    "TraceNode",
    "file_uuid",
    "print_result",
    "raw_files",
    "run_pipeline",
    "trace",
]
