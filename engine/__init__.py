"""LF Board's engine: model loading, data, training, evaluation, chat and export. Never imports gradio."""

__version__ = "0.1.0"
