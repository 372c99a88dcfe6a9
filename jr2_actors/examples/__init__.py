"""The workflows that ship inside the package, found wherever it is installed (not only from a checkout):

    from jr2_actors import examples
    examples.names()                    # ['fix-and-review', 'neighbour']
    examples.path("fix-and-review")     # the installed file: a pathlib.Path
    examples.text("fix-and-review")     # its YAML

`jr2-actors examples [NAME] [--path]` lists them, prints one, or prints where it is.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

SUFFIX = ".yaml"
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class UnknownExample(LookupError):
    """A name no packaged example has; its text names the ones there are."""


def names() -> list[str]:
    """Every packaged example, by name (its file name without `.yaml`), sorted."""
    return sorted(f.name.removesuffix(SUFFIX) for f in resources.files(__name__).iterdir()
                  if f.name.endswith(SUFFIX) and f.is_file())


def path(name: str) -> Path:
    """The installed file of the example `name` (`fix-and-review`); `UnknownExample` for any other name."""
    known = names()
    if not isinstance(name, str) or not _NAME.match(name) or name not in known:
        raise UnknownExample(f"no example {name!r}: the examples are {', '.join(known)}")
    return Path(str(resources.files(__name__).joinpath(name + SUFFIX)))


def text(name: str) -> str:
    """The example's YAML, as the file holds it."""
    return path(name).read_text(encoding="utf-8")


def summary(name: str) -> str:
    """The example's opening comment's first sentence: what it is, in a few words."""
    said: list[str] = []
    for line in text(name).splitlines():
        if not line.startswith("#"):
            break
        said.append(line.lstrip("#").strip())
    words = " ".join(said)
    return words.split(". ", 1)[0].rstrip(".") + "." if words else ""
