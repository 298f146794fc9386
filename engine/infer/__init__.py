"""Inference: chat with a model (``ChatModel``), an OpenAI-compatible server (``serve``) and the terminal chat.

Submodules are imported on use so that ``import engine.infer`` stays light.
"""

__all__ = ["chat", "cli_chat", "generation", "server"]
