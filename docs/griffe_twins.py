"""A Griffe extension for the API reference (mkdocs.yml): a handle's sync method is written
``add = blocking(aadd)`` (:mod:`memray.facade.runner`), which Griffe reads as an attribute; it is
shown as the method it is, with its async twin's parameters, return type and docstring."""

from __future__ import annotations

import ast
import re
from typing import Any

from griffe import Attribute, Class, Extension, Function, Parameter, Parameters

_TWIN = re.compile(r"^blocking\((\w+)\)$")


class SyncTwins(Extension):
    def on_class_members(self, *, node: ast.AST | object, cls: Class, **kwargs: Any) -> None:
        for name, member in list(cls.members.items()):
            if not isinstance(member, Attribute) or member.value is None:
                continue
            match = _TWIN.match(str(member.value))
            twin = cls.members.get(match.group(1)) if match else None
            if not isinstance(twin, Function):
                continue
            sync = Function(
                name,
                lineno=member.lineno,
                endlineno=member.endlineno,
                parameters=Parameters(
                    *(
                        Parameter(p.name, annotation=p.annotation, kind=p.kind, default=p.default)
                        for p in twin.parameters
                    )
                ),
                returns=twin.returns,
                docstring=twin.docstring,
            )
            sync.labels = twin.labels - {"async"}
            cls.set_member(name, sync)
