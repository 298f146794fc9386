"""LF Board's browser workbench (gradio). Start it with ``lf-board`` or ``python -m app``."""
