"""Messages that suggest a setting, written once for the Python API and the ``breadth`` command.

A message (an error's or a warning's) writes a setting it suggests as a token, ``{keyword=value}``
(``{overwrite=True}``; ``{src=,dst=}`` for keywords whose value is the caller's).  ``str()`` of the
exception renders it in the Python API's words, ``pass overwrite=True``; the command line renders the same
token with its flags, ``use --overwrite`` (:func:`breadth.pipeline.cli.cli_errors.cli_text`, whose
``KEYWORD_FLAGS`` holds the one mapping from keywords to flags).  Only the keywords of :data:`KEYWORDS` are
tokens: other braces in a message (a bad line's own text) are left alone.  The searches' errors use it as
well as the readers' (:mod:`breadth.io.errors`), so it lives at the bottom layer.

>>> from breadth.bfs.advice import keyword_text
>>> keyword_text("g.store exists; {overwrite=True} to replace it")
'g.store exists; pass overwrite=True to replace it'
>>> keyword_text("cannot tell the columns; {src=,dst=} to name them")
'cannot tell the columns; pass src= and dst= to name them'
"""

from __future__ import annotations

import re

#: the keywords a message may suggest: the readers' and the store's (breadth.io), and graph500's
KEYWORDS = ("format", "src", "dst", "header", "ids", "extra_columns", "overwrite", "min_component")

#: ``{keyword=value}`` or ``{keyword=,keyword=}`` with keywords of :data:`KEYWORDS`
TOKEN = re.compile(r"\{((?:(?:%s)=[^{},=]*,?)+)\}" % "|".join(KEYWORDS))


def settings(token: str) -> list[tuple[str, str]]:
    """``(keyword, value text)`` pairs of a token's inside.

    >>> settings("src=,dst=")
    [('src', ''), ('dst', '')]
    """
    return [tuple(part.split("=", 1)) for part in token.split(",") if part]


def keyword_text(template: str) -> str:
    """``template`` with its setting tokens in the Python API's words (see the module docstring)."""
    return TOKEN.sub(lambda m: "pass " + " and ".join(f"{k}={v}" for k, v in settings(m.group(1))), template)


class Advised:
    """A mixin for exceptions and warnings whose message is such a template: ``template`` keeps it, ``str()``
    is the API's rendering, and ``info`` keywords (``path``, ``line``, ``column``, ...) become attributes.
    Subclasses pass ``self._advise(message, info)`` to their base's ``__init__``."""

    def _advise(self, message: str, info: dict) -> str:
        self.template = message
        self.info = info
        for k, v in info.items():
            setattr(self, k, v)
        return keyword_text(message)

    def __reduce__(self):  # template + keyword attributes, so a worker's exception reaches the client whole
        return (_rebuild, (type(self), self.template, self.info))


def _rebuild(cls, message, info):
    return cls(message, **info)


class AdvisedValueError(Advised, ValueError):
    """A ``ValueError`` whose message may suggest a setting (see the module docstring).

    >>> str(AdvisedValueError("no root reaches 1,000 vertices; {min_component=} with a smaller value"))
    'no root reaches 1,000 vertices; pass min_component= with a smaller value'
    """

    def __init__(self, message: str, **info):
        super().__init__(self._advise(message, info))
