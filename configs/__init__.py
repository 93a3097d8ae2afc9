"""Device and cluster presets, shipped as package data (``memflow.configs``)."""
