"""The Ollama ``Modelfile`` an export writes beside the model, as LLaMA-Factory 0.9.5's export writes it.

``ollama create NAME -f Modelfile`` in the export folder then serves the model with the template's turns: the
system turn, the user turn with its generation prompt and the assistant reply, written in Ollama's Go template
language, the template's default system prompt, a ``stop`` parameter per stop token and a 4096-token context.
Tool declarations and tool turns are not written (Ollama's tool support is not generated). A template that writes
named token ids (``{token:NAME}``: ChatGLM3, Yuan) has no text form, so no Modelfile is written for it.
"""

from __future__ import annotations

from typing import Any

from engine.templates.slots import Special, parse_pattern

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
    lines = [HEADER, f'FROM .\n\nTEMPLATE """{body}"""\n\n']
    if template.default_system:
        lines.append(f'SYSTEM """{template.default_system}"""\n\n')
    lines += [f'PARAMETER stop "{tokenizer.convert_ids_to_tokens(token_id)}"\n'
              for token_id in _stop_ids(template, tokenizer)]
    lines.append(f"PARAMETER num_ctx {NUM_CTX}\n")
    return "".join(lines)
