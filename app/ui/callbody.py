"""A UI callback's JSON body, read with a bound on how deeply it nests.

Python's ``json`` recurses once per array or object, so a body nested a few thousand
deep — a few kilobytes, well under the body cap — raised ``RecursionError`` inside Dash:
a 500 and a logged traceback per request. The UI's Flask app reads its JSON through
:class:`BoundedJson` instead: a body nested deeper than :data:`MAX_DEPTH` (or one deep
enough to exhaust the stack anyway) is not JSON it takes, a ``ValueError``, which Flask
answers 400 without a traceback.

Depth is counted on the text before parsing (:func:`nesting`): brackets outside strings,
a linear scan with no recursion. A callback's body holds component trees at most a few
dozen levels deep (``{"props": {"children": [...]}}`` per component).
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any

from flask.json.provider import DefaultJSONProvider

__all__ = ["MAX_DEPTH", "BoundedJson", "nesting"]

MAX_DEPTH = 256
"""The deepest nesting of arrays and objects a callback body may have."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text``: ``[[1], {}]`` is 2.

    Brackets inside strings do not count; an unclosed string's do (the text is not JSON
    then anyway, and counting more only refuses it sooner).
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


class BoundedJson(DefaultJSONProvider):
    """Flask's JSON, refusing (``ValueError``: 400) text nested deeper than
    :data:`MAX_DEPTH`."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        # Latin-1 maps bytes one to one: UTF-8's brackets, quotes and backslashes are
        # single bytes no other character's bytes contain.
        text = s.decode("latin-1") if isinstance(s, bytes | bytearray) else s
        if nesting(text) > MAX_DEPTH:
            raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
        try:
            return super().loads(s, **kwargs)
        except RecursionError:  # less deep, but the stack was already deep
            raise ValueError("JSON nested too deeply to read") from None
