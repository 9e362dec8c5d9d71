"""Diagnosis: one window of one stream → a class with its evidence and hints.

Pure: data in, data out; no I/O and no clock. The public surface::

    from app.diagnose import diagnose, DiagnosisConfig
    d = diagnose(window, DiagnosisConfig(slo_ttft_p99=1.0))
    d.cls, d.sub_cause, d.confidence, d.evidence, d.hints, d.to_dict()
"""

from app.diagnose.classes import DiagnosisClass, SubCause
from app.diagnose.classify import diagnose
from app.diagnose.config import DEFAULT_CONFIG, DiagnosisConfig, Slo, SloOverride
from app.diagnose.records import Diagnosis, Evidence, Finding, Hint, Roofline
from app.diagnose.roofline import Hardware

__all__ = [
    "DEFAULT_CONFIG",
    "Diagnosis",
    "DiagnosisClass",
    "DiagnosisConfig",
    "Evidence",
    "Finding",
    "Hardware",
    "Hint",
    "Roofline",
    "Slo",
    "SloOverride",
    "SubCause",
    "diagnose",
]
