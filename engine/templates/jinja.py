"""Write a Template as a Jinja chat template, for the tokenizer of an exported model.

The generated template reproduces ``Template.render_oneturn`` (inference semantics, as LLaMA-Factory's chat
engine encodes a conversation) through ``tokenizer.apply_chat_template`` for conversations of system, user,
assistant and tool-result (``tool``/``observation``) messages: every user and tool-result turn ends with the
generation prompt, history thoughts are removed (unless ``preserve_thinking``), the last reply of a reasoning
template gets the empty thought block when it has none, and ``add_generation_prompt`` adds that block after a
final user turn while thinking is off or mixed. Thinking may come in a ``thinking``/``reasoning_content`` field or
inside the content; ``enable_thinking`` switches it (true, false, or none: LLaMA-Factory's mixed mode). Tool
declarations and ``tool_calls`` are not written by the exported template: a conversation with them is rendered
by the engine itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.templates.slots import Special, parse_pattern

if TYPE_CHECKING:
    from engine.templates.base import Template


def jinja_literal(text: str) -> str:
    """A Jinja string literal for ``text``."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r") + "'"


def _expr(pattern: str, content: str = "''") -> str:
    """A Jinja expression writing ``pattern`` with ``content`` (an expression) for ``{content}``."""
    parts = []
    for piece in parse_pattern(pattern):
        if isinstance(piece, Special):
            if piece.kind == "token":
                parts.append(jinja_literal(piece.token))
            else:
                parts.append(f"({piece.kind}_token or '')")
            continue
        before, found, after = piece.partition("{content}")
        if before:
            parts.append(jinja_literal(before))
        if found:
            parts.append(content)
        if after:
            parts.append(jinja_literal(after))
    return " + ".join(parts) if parts else "''"


def _strip_thought(t: Template) -> list[str]:
    open_word, close_word = (jinja_literal(word) for word in t.thought_words)
    return [
        f"{{%- if {open_word} in content and {close_word} in content.split({open_word}, 1)[1] -%}}",
        f"{{%- set content = (content.split({open_word}, 1)[0] + content.split({open_word}, 1)[1]"
        f".split({close_word}, 1)[1]).lstrip('\\n') -%}}",
        "{%- endif -%}",
    ]


def _thinking_literal(enable_thinking: bool | None) -> str:
    """``enable_thinking`` as Jinja: none is the mixed mode (a reply's own thought is kept, and a generation prompt
    gets the empty block, as with thinking off)."""
    return "none" if enable_thinking is None else ("true" if enable_thinking else "false")


def template_to_jinja(template: Template) -> str:
    """The Jinja chat template equivalent to ``template.render_oneturn``; "" for a template that writes single tokens
    by name (``{token:...}``, ChatGLM3, Yuan), whose text need not tokenize back to those tokens: the tokenizer's own
    chat template is kept then, as LLaMA-Factory keeps it ("Dict is not supported")."""
    t = template
    patterns = (t.prefix, t.system, t.user, t.gen_prompt, t.assistant, t.observation, t.observation_gen or "", t.function)
    if any("{token:" in pattern for pattern in patterns):
        return ""
    open_word, close_word = t.thought_words
    block = jinja_literal(t.add_thought())
    gen = t.gen_prompt
    obs_gen = gen if t.observation_gen is None else t.observation_gen
    lines = [
        f"{{%- set default_system = {jinja_literal(t.default_system)} -%}}",
        f"{{%- set thinking = {_thinking_literal(t.enable_thinking)} if enable_thinking is not defined "
        "else enable_thinking -%}",
        "{%- if messages and messages[0]['role'] == 'system' -%}",
        "{%- set system_message = messages[0]['content'] or default_system -%}",
        "{%- set loop_messages = messages[1:] -%}",
        "{%- else -%}",
        "{%- set system_message = default_system -%}",
        "{%- set loop_messages = messages -%}",
        "{%- endif -%}",
        f"{{%- set signal = {jinja_literal(t.think_signal)} if thinking else '' -%}}",
        "{%- set ns = namespace(merge=true) -%}",
        f"{{{{- {_expr(t.prefix)} -}}}}" if t.prefix else "",
    ]
    if not t.system_in_user:
        lines += [
            "{%- if system_message or signal -%}",
            f"{{{{- {_expr(t.system, 'signal + system_message')} -}}}}",
            "{%- endif -%}",
        ]
    lines += [
        "{%- for message in loop_messages -%}",
        "{%- if message['role'] == 'user' -%}",
        "{%- set content = message['content'] -%}",
    ]
    if t.system_in_user:
        lines += [
            "{%- if ns.merge and (system_message or signal) -%}",
            f"{{%- set content = {_expr(t.system, 'signal + system_message')} + content -%}}",
            "{%- endif -%}",
        ]
    lines += [
        "{%- set ns.merge = false -%}",
        f"{{{{- {_expr(t.user + gen, 'content')} -}}}}",
        "{%- elif message['role'] == 'tool' or message['role'] == 'observation' -%}",
        "{%- set ns.merge = false -%}",
        f"{{{{- {_expr((t.observation or t.user) + obs_gen, 'message[' + jinja_literal('content') + ']')} -}}}}",
        "{%- elif message['role'] == 'assistant' -%}",
        "{%- set content = message['content'] or '' -%}",
    ]
    if t.reasoning:
        lines += [
            "{%- if message['thinking'] is defined and message['thinking'] is not none -%}",
            f"{{%- set content = {jinja_literal(open_word)} + message['thinking'] + {jinja_literal(close_word)} "
            "+ content -%}",
            "{%- elif message['reasoning_content'] is defined and message['reasoning_content'] is not none -%}",
            f"{{%- set content = {jinja_literal(open_word)} + message['reasoning_content'] + "
            f"{jinja_literal(close_word)} + content -%}}",
            "{%- endif -%}",
            f"{{%- if (not loop.last and not {'true' if t.preserve_thinking else 'false'}) or thinking is false -%}}",
            *_strip_thought(t),
            "{%- endif -%}",
        ]
        if t.empty_thought:
            marks = " or ".join(f"{jinja_literal(word.strip())} in content" for word in t.thought_words)
            lines += [f"{{%- if loop.last and not ({marks}) -%}}{{{{- {block} -}}}}{{%- endif -%}}"]
    lines += [
        f"{{{{- {_expr(t.assistant, 'content')} -}}}}",
        "{%- else -%}",
        "{{- raise_exception('Unsupported message role ' + message['role'] + ': use system, user, assistant or tool.') -}}",
        "{%- endif -%}",
        "{%- endfor -%}",
    ]
    if t.reasoning and t.empty_thought:
        lines += [
            "{%- if add_generation_prompt and not thinking and loop_messages and "
            "loop_messages[-1]['role'] != 'assistant' -%}",
            f"{{{{- {block} -}}}}",
            "{%- endif -%}",
        ]
    return "\n".join(line for line in lines if line)
