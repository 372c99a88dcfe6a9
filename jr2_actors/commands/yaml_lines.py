"""Where a dotted key (`states.code.on.finish`, `a.repos[0].slot`) sits in a YAML text: the line `jr2-actors
lint` and `graph` name beside each error."""

from __future__ import annotations

import functools
from typing import Any


def line_of(text: str, key: str) -> int | None:
    """The 1-based line of the deepest node of the dotted `key` (`states.code.on.finish`, `a.repos[0].slot`)
    that the text holds; None when the text is not YAML or has none of it."""
    import yaml

    node = _composed(text)
    line = None
    rest = key.replace("[", ".[")
    while node is not None and rest:
        found = None
        if isinstance(node, yaml.MappingNode):
            # the longest key that begins the rest: names may hold '.' themselves
            for k, v in node.value:
                name = str(k.value)
                if (rest == name or rest.startswith(name + ".")) and (found is None or len(name) > len(found[0])):
                    found = (name, k, v)
        elif isinstance(node, yaml.SequenceNode) and rest.startswith("["):
            index = rest[1:rest.index("]")] if "]" in rest else ""
            if index.isdigit() and int(index) < len(node.value):
                item = node.value[int(index)]
                found = (f"[{index}]", item, item)
        if found is None:
            break
        name, k, node = found
        line = k.start_mark.line + 1
        rest = rest[len(name) + 1:]
    return line


@functools.lru_cache(maxsize=1)
def _composed(text: str) -> Any:
    """The text's YAML node tree (only read, never changed), or None: composed once for all of a file's errors,
    not once an error."""
    import yaml

    from jr2_actors.values.workflow import yaml_loader

    try:
        return yaml.compose(text, Loader=yaml_loader())
    except (yaml.YAMLError, RecursionError):
        return None
