"""Deployment: ONNX export of the classifiers (:mod:`.onnx`, ``tools/deployment/export_onnx.py``)."""

from .onnx import DEFAULT_OPSET, Exportable, ExportError, export, load_exportable, onnx_session, verify

__all__ = [
    'DEFAULT_OPSET',
    'Exportable',
    'ExportError',
    'export',
    'load_exportable',
    'onnx_session',
    'verify',
]
