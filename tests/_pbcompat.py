"""Descriptor questions asked the same way on every supported protobuf (4.21 .. 7.x).

protobuf 4.x has ``FieldDescriptor.label`` only; 7.x (upb) has ``is_repeated`` / ``is_required`` only.
"""

from __future__ import annotations

from typing import Any


def is_repeated(fd: Any) -> bool:
    """Whether the field is ``repeated``."""
    flag = getattr(fd, "is_repeated", None)
    return bool(flag) if flag is not None else fd.label == fd.LABEL_REPEATED


def is_required(fd: Any) -> bool:
    """Whether the field is ``required`` (proto2)."""
    flag = getattr(fd, "is_required", None)
    return bool(flag) if flag is not None else fd.label == fd.LABEL_REQUIRED
