"""Capture a training step as a task graph (see :mod:`memflow.graph.record`)."""
from .build import capture_graph, capture_program, fingerprint
from .program import StepProgram
from .record import Buffer, Node, TaskGraph, replay

__all__ = ["capture_graph", "capture_program", "fingerprint", "StepProgram", "Buffer", "Node", "TaskGraph", "replay"]
