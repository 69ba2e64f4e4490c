"""A Griffe extension for the API reference (mkdocs.yml): memray's docstrings cross-reference with
reStructuredText roles (:class:`Memory`, :meth:`~memray.Memory.close`), which Markdown would show
as they are typed; each becomes inline code (``~`` keeps the last name only, as in Sphinx)."""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class RolesAsCode(Extension):
    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)
