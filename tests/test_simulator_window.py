"""A stage's layout from the buffers it can see (simulator.window) equals the one from the whole graph."""
import os
from pathlib import Path

import pytest

from memflow.model_file import load_model_file
from memflow.simulator.layout import build_layout
from memflow.simulator.synthetic import chain_graph, gpt2_like_graph, random_graph
from memflow.simulator.window import BufferWindow

ROOT = Path(__file__).resolve().parent.parent


def _same_layouts(g):
    win = BufferWindow(g)
    for a in range(g.n):
        for b in range(a + 1, g.n + 1):
            assert build_layout(win.view(a, b), a, b) == build_layout(g, a, b), (a, b)


@pytest.mark.parametrize("seed", range(12))
def test_window_layouts_equal_whole_graph_random(seed):
    _same_layouts(random_graph(3 + seed % 8, seed))


def test_window_layouts_equal_whole_graph_synthetic():
    _same_layouts(chain_graph(6))
    _same_layouts(gpt2_like_graph(2, 64, d=32))


@pytest.mark.parametrize("name", ["gpt2", "lstm", "resnet"])
def test_window_layouts_equal_whole_graph_captured(name, monkeypatch):
    """Captured graphs: tied embeddings (a gradient read on two stages), relayed and odd-direction buffers."""
    from memflow.profile.build import capture_graph

    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    _same_layouts(capture_graph(load_model_file(ROOT / "examples" / f"{name}.py"), 2))
