"""The ``tubemq`` argument parser: a misspelt command or action gets a "did you mean" and the usage of
the command the reader most likely meant, rather than a list of every choice."""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with suggestions for an unknown choice; subparsers inherit the class."""

    _meant: argparse.ArgumentParser | None = None

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices or not isinstance(value, str):
            super()._check_value(action, value)
            return
        names = [str(c) for c in choices]
        guess = difflib.get_close_matches(value, names, n=1, cutoff=0.6)
        hint = f"; did you mean {guess[0]!r}?" if guess else ""
        if guess and isinstance(action, argparse._SubParsersAction) and self._is_top_level():
            self._meant = action.choices[guess[0]]
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint} (choose from {', '.join(names)})")

    def _is_top_level(self) -> bool:
        """Whether this is the top level (``tubemq``): there the meant command's usage is the useful one;
        under a group (``tubemq topic``) the group's own usage already lists its actions."""
        return " " not in self.prog

    def error(self, message: str) -> NoReturn:
        meant, self._meant = self._meant, None
        (meant or self).print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")
