"""Write a Template as a Jinja chat template, for the tokenizer of an exported model.

The generated template reproduces ``Template.render`` through ``tokenizer.apply_chat_template`` for conversations
of system, user, assistant and tool-result (``tool``/``observation``) messages, including thinking (a
``thinking``/``reasoning_content`` field or a thought block inside the content) and the ``enable_thinking``
switch. Tool declarations and ``tool_calls`` are not written by the exported template: a conversation with them
is rendered by the engine itself.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.templates.base import Template

_PLACEHOLDER = re.compile(r"(\{content\}|\{bos\}|\{eos\})")


def jinja_literal(text: str) -> str:
    """A Jinja string literal for ``text``."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r") + "'"


def _expr(pattern: str, content: str = "''") -> str:
    """A Jinja expression writing ``pattern`` with ``content`` (an expression) for ``{content}``."""
    parts = []
    for piece in _PLACEHOLDER.split(pattern):
        if piece == "{content}":
            parts.append(content)
        elif piece == "{bos}":
            parts.append("(bos_token or '')")
        elif piece == "{eos}":
            parts.append("(eos_token or '')")
        elif piece:
            parts.append(jinja_literal(piece))
    return " + ".join(parts) if parts else "''"


def template_to_jinja(template: Template) -> str:
    """The Jinja chat template equivalent to ``template.render``."""
    t = template
    open_word, close_word = t.thought_words
    block = open_word + close_word
    lines = [
        f"{{%- set default_system = {jinja_literal(t.default_system)} -%}}",
        f"{{%- set thinking = {'true' if t.enable_thinking else 'false'} if enable_thinking is not defined "
        "else enable_thinking -%}",
        "{%- if messages and messages[0]['role'] == 'system' -%}",
        "{%- set system_message = messages[0]['content'] or default_system -%}",
        "{%- set loop_messages = messages[1:] -%}",
        "{%- else -%}",
        "{%- set system_message = default_system -%}",
        "{%- set loop_messages = messages -%}",
        "{%- endif -%}",
        "{%- set ns = namespace(last_user=-1, merge=true) -%}",
        "{%- for message in loop_messages -%}",
        "{%- if message['role'] == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}",
        "{%- endfor -%}",
    ]
    if t.prefix:
        lines.append(f"{{{{- {_expr(t.prefix)} -}}}}")
    if not t.system_in_user:
        lines += [
            f"{{%- set signal = {jinja_literal(t.think_signal)} if thinking else '' -%}}",
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
            "{%- if ns.merge and system_message -%}",
            f"{{%- set content = {_expr(t.system, 'system_message')} + content -%}}",
            "{%- endif -%}",
            "{%- set ns.merge = false -%}",
        ]
    lines += [
        f"{{{{- {_expr(t.user, 'content')} -}}}}",
        "{%- elif message['role'] == 'tool' or message['role'] == 'observation' -%}",
        f"{{{{- {_expr(t.observation or t.user, 'message[' + jinja_literal('content') + ']')} -}}}}",
        "{%- elif message['role'] == 'assistant' -%}",
        "{%- set content = message['content'] or '' -%}",
        "{%- set reasoning = none -%}",
        "{%- if message['thinking'] is defined and message['thinking'] is not none -%}",
        "{%- set reasoning = message['thinking'] -%}",
        "{%- elif message['reasoning_content'] is defined and message['reasoning_content'] is not none -%}",
        "{%- set reasoning = message['reasoning_content'] -%}",
    ]
    if t.reasoning:
        open_mark, close_mark = jinja_literal(open_word.strip()), jinja_literal(close_word.strip())
        lines += [
            f"{{%- elif {close_mark} in content -%}}",
            f"{{%- set reasoning = content.split({close_mark})[0].rstrip('\\n').split({open_mark})[-1].lstrip('\\n') -%}}",
            f"{{%- set content = content.split({close_mark})[-1].lstrip('\\n') -%}}",
        ]
    lines += [
        "{%- endif -%}",
        "{%- set current = loop.index0 > ns.last_user -%}",
        "{%- if not (current and thinking) -%}{%- set reasoning = none -%}{%- endif -%}",
        f"{{%- set prompt = {_expr(t.gen_prompt)} -%}}",
        "{%- if reasoning is not none -%}",
        f"{{%- set content = {jinja_literal(open_word)} + reasoning.strip('\\n') + {jinja_literal(close_word)} "
        "+ content -%}",
    ]
    if t.reasoning and t.empty_thought:
        lines += [
            "{%- elif current and loop.last -%}",
            f"{{%- if thinking -%}}{{%- set content = {jinja_literal(block)} + content -%}}"
            f"{{%- else -%}}{{%- set prompt = prompt + {jinja_literal(block)} -%}}{{%- endif -%}}",
        ]
    lines += [
        "{%- endif -%}",
        "{{- prompt -}}",
        f"{{{{- {_expr(t.assistant, 'content')} -}}}}",
        "{%- else -%}",
        "{{- raise_exception('Unsupported message role ' + message['role'] + ': use system, user, assistant or tool.') -}}",
        "{%- endif -%}",
        "{%- endfor -%}",
        "{%- if add_generation_prompt -%}",
        f"{{{{- {_expr(t.gen_prompt)} -}}}}",
    ]
    if t.reasoning and t.empty_thought:
        lines.append(f"{{%- if not thinking -%}}{{{{- {jinja_literal(block)} -}}}}{{%- endif -%}}")
    lines.append("{%- endif -%}")
    return "\n".join(lines)
