"""The YAML loader that configs are read with: ``yaml.safe_load``'s, with a note of keys given twice and a clear
refusal of numbers too large to read."""

from __future__ import annotations

import math
import sys
from typing import Any

import yaml

from engine.config.limits import typed_number

MAX_INT_DIGITS = 4000
"""The most digits a whole number in a config may have (Python reads at most 4,300 as text by default)."""


class ConfigLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader that also notes a key given twice in one mapping: the last value wins, as in
    LLaMA-Factory (which reads configs with ``yaml.safe_load``), and :func:`engine.config.loader.read_yaml` says so;
    and names a number too large to read by its digits, with its place in the file."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.repeated: list[tuple[str, int]] = []

    def fetch_flow_collection_start(self, TokenClass: type) -> None:  # noqa: N803 (PyYAML's name)
        """A ``[`` or ``{`` that opens more flow levels than can be read ends the reading here, with the
        RecursionError the reading would end with later (the callers name it: nested too deeply). Composing takes two
        frames a level, so no text nested this deep could be read; but the scanner looks ahead up to 1,024 characters
        past each open level, against every level still open: 5,000 ``[`` on a line took seconds before the
        composer's RecursionError came (9 s on a busy 2-core machine), and a board read its last-used config so."""
        if self.flow_level >= sys.getrecursionlimit() // 2:
            raise RecursionError(f"more than {self.flow_level} nested lists or mappings")
        super().fetch_flow_collection_start(TokenClass)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _value in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value != "<<":
                if key_node.value in seen:
                    self.repeated.append((key_node.value, key_node.start_mark.line + 1))
                seen.add(key_node.value)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """A whole number, refused (with its place in the file) past Python's limit on digits read as text, which
        stopped the reading with a ValueError traceback instead of a message."""
        digits = len(node.value.replace("_", ""))
        if digits > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"a whole number of {digits:,} digits (a setting takes at most {MAX_INT_DIGITS:,}; "
                "none needs more than 19)", node.start_mark)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        """A number, refused (with its place) when it overflows a float: it read as `inf`; a written ``.inf`` is kept."""
        number = super().construct_yaml_float(node)
        if math.isinf(number) and not node.value.lstrip("+-").lower().startswith(".inf"):
            raise yaml.constructor.ConstructorError(
                None, None, f"`{typed_number(node.value)}` is too large a number (past about 1.8e308 it reads as "
                "infinity); give a real number", node.start_mark)
        return number

    def construct_foreign(self, node: yaml.Node) -> Any:
        """Refuses the tags that make values no setting is (bytes, a set, a list of pairs): each was turned into
        its Python text as the setting's value (`default_system: !!binary aGk=` trained with the system prompt
        "b'hi'", `output_dir: !!omap [a: 1]` wrote to a folder named "('a', 1)")."""
        tag = node.tag.rsplit(":", 1)[-1]
        raise yaml.constructor.ConstructorError(
            None, None, f"the `!!{tag}` tag makes {FOREIGN_TAGS[tag]}, which no setting takes; write the value out "
            "as text, a number, a list or a mapping", node.start_mark)


FOREIGN_TAGS = {"binary": "bytes", "set": "a set", "omap": "a list of pairs", "pairs": "a list of pairs"}
"""YAML's tags for values no config setting takes (``yaml.safe_load`` makes them; LLaMA-Factory's examples use
none)."""

ConfigLoader.add_constructor("tag:yaml.org,2002:int", ConfigLoader.construct_yaml_int)
ConfigLoader.add_constructor("tag:yaml.org,2002:float", ConfigLoader.construct_yaml_float)
for _tag in FOREIGN_TAGS:
    ConfigLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", ConfigLoader.construct_foreign)
