"""The Ollama ``Modelfile`` an export writes beside the model, as LLaMA-Factory 0.9.5's export writes it.

``ollama create NAME -f Modelfile`` in the export folder then serves the model with the template's turns: the
system turn, the user turn with its generation prompt and the assistant reply, written in Ollama's Go template
language, the template's default system prompt, a ``stop`` parameter per stop token and a 4096-token context.
Tool declarations and tool turns are not written (Ollama's tool support is not generated). A template that writes
named token ids (``{token:NAME}``: ChatGLM3, Yuan) has no text form, so no Modelfile is written for it.

Nor is one written when a value cannot be quoted as it is (LLaMA-Factory writes it anyway): Ollama ends a
triple-quoted value at the next three quotes, so a default system prompt (from a config, or read from a model folder's chat
template) holding one would end the SYSTEM line there and have the rest read as directives of the Modelfile's own
(``ADAPTER``, ``FROM``, ``MESSAGE``: another model or a made-up conversation for ``ollama create``); and a stop
token holding a quote or a line break does the same to its ``PARAMETER stop`` line.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.templates.slots import Special, parse_pattern

logger = logging.getLogger(__name__)

MODELFILE_NAME = "Modelfile"
HEADER = "# Ollama Modelfile written by lf-engine export\n\n"
"""The comment line that opens the file (LLaMA-Factory's names itself; everything after it is the same)."""
NUM_CTX = 4096
"""The context length the Modelfile asks Ollama for (LLaMA-Factory's value)."""


def _go_text(pattern: str, tokenizer: Any, placeholder: str) -> str | None:
    """``pattern`` as Go template text with ``{{ placeholder }}`` for its content; None for a named-token slot."""
    out: list[str] = []
    for piece in parse_pattern(pattern):
        if isinstance(piece, Special):
            if piece.kind == "token":
                return None
            token_id = getattr(tokenizer, f"{piece.kind}_token_id", None)
            if token_id is not None:
                out.append(getattr(tokenizer, f"{piece.kind}_token"))
            continue
        before, found, after = piece.partition("{content}")
        out.append(before)
        if found:
            out.append("{{ " + placeholder + " }}")
            out.append(after)
    return "".join(out)


def _unquotable(value: str, triple: bool) -> bool:
    """Whether ``value`` cannot be written between triple quotes (``triple``) or plain ones as it is: Ollama's reader
    ends the value at the first closing quotes it meets, and has no escape for them."""
    if triple:
        return '"""' in value or value.startswith('"') or value.endswith('"')
    return any(char in value for char in '"\\\n\r')


def _stop_ids(template: Any, tokenizer: Any) -> list[int]:
    """The EOS id and the stop words' ids in LLaMA-Factory's order (it collects them in a set of ids)."""
    ids = {tokenizer.eos_token_id}
    for word in template.stop_words:
        ids.add(tokenizer.convert_tokens_to_ids(word))
    return list(ids)


def ollama_modelfile(template: Any, tokenizer: Any) -> str | None:
    """The Modelfile text for ``template`` with ``tokenizer`` (already fixed by the template), or None when the
    template writes named token ids, which an Ollama template cannot spell."""
    prefix = _go_text(template.prefix, tokenizer, ".Content")
    system = _go_text(template.system, tokenizer, ".System")
    user = _go_text(template.user + template.gen_prompt, tokenizer, ".Content")
    assistant = _go_text(template.assistant, tokenizer, ".Content")
    if None in (prefix, system, user, assistant):
        return None
    body = (f"{prefix}{{{{ if .System }}}}{system}{{{{ end }}}}"
            f'{{{{ range .Messages }}}}{{{{ if eq .Role "user" }}}}{user}'
            f'{{{{ else if eq .Role "assistant" }}}}{assistant}{{{{ end }}}}{{{{ end }}}}')
    stops = [str(tokenizer.convert_ids_to_tokens(token_id)) for token_id in _stop_ids(template, tokenizer)]
    values = [("the chat template", body, True), ("the default system prompt", template.default_system or "", True)]
    values += [("the stop token", stop, False) for stop in stops]
    for what, value, triple in values:
        if _unquotable(value, triple):
            logger.warning("No Ollama Modelfile is written: %s %r holds quotes or a line break that the Modelfile "
                           "cannot hold (the rest would be read as Modelfile lines of its own). Change it, or write "
                           "the Modelfile by hand.", what, value[:200])
            return None
    lines = [HEADER, f'FROM .\n\nTEMPLATE """{body}"""\n\n']
    if template.default_system:
        lines.append(f'SYSTEM """{template.default_system}"""\n\n')
    lines += [f'PARAMETER stop "{stop}"\n' for stop in stops]
    lines.append(f"PARAMETER num_ctx {NUM_CTX}\n")
    return "".join(lines)
