"""The argparse pieces every memray command shares: a help formatter that states each option's
default, and the data directory argument, given the same way to every command.

They live apart from :mod:`memray.cli` so that the commands defined elsewhere (the batch jobs in
:mod:`memray.jobs`, ``serve``/``mcp``/``keys`` in :mod:`memray.server.commands`) use them without
importing the command line that imports those commands.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["DefaultsHelpFormatter", "add_data_dir"]


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Every option says its default: ``(default: X)`` unless its help already words it (a None
    default means something specific: the help says what), ``(required)``, or ``(off by
    default)`` for a flag."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is argparse.SUPPRESS or "default" in text:
            return text
        if action.required:
            return f"{text} (required)"
        if isinstance(action, argparse._StoreTrueAction):
            return f"{text} (off by default)"
        if action.option_strings or action.nargs in ("?", "*"):
            return f"{text} (default: %(default)s)"
        return text


class _DeprecatedPath(argparse.Action):
    """``--path DIR``, the old spelling of a command's PATH argument: still taken, with a note."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option: str | None = None
    ) -> None:
        print(
            f"{parser.prog}: note: --path is deprecated; give the data directory as the first argument "
            f"({parser.prog} {values} ...)",
            file=sys.stderr,
        )
        namespace.path = values


def add_data_dir(parser: argparse.ArgumentParser, help: str, default: str | None = None) -> None:
    """The data directory, given the same way to every command: ``PATH``, the first argument
    (optional when it has a ``default``; a command that needs one checks it with
    :func:`memray.store.layout.data_directory`). ``--path PATH`` is still accepted, with a
    deprecation note, and not shown by ``--help``."""
    # neither spelling has a default of its own (an absent PATH would overwrite --path's value):
    # the parser's default applies when both are absent
    first = parser.add_argument("path", nargs="?", metavar="PATH", help=help)
    old = parser.add_argument("--path", dest="path", action=_DeprecatedPath, help=argparse.SUPPRESS)
    parser.set_defaults(path=default)
    first.default = old.default = argparse.SUPPRESS
