"""Spirula Studio engine: Qt-free. Datasets, GPU splat training (Slang via slangpy), export."""

__version__ = "0.1.0"
