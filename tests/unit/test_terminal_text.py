"""`literal`: text from others printed on a terminal shows every control character as an escape."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from padbench.terminal_text import ESCAPED_CATEGORIES, literal


@pytest.mark.parametrize(("sent", "shown"), [
    ("seed-7 run", "seed-7 run"),
    ("\x1b]0;owned\x07", "\\x1b]0;owned\\x07"),  # a window title (OSC), ended by BEL
    ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear the screen, cursor home
    ("ok\rFAILED\nerror  forged", "ok\\rFAILED\\nerror  forged"),  # overwrite a line, forge another
    ("a\tb\x7f\x00", "a\\tb\\x7f\\x00"),
    ("\x9b31m\x85", "\\x9b31m\\x85"),  # C1: a one-byte CSI, a next-line
    ("txt.exe\u202egpj", "txt.exe\\u202egpj"),  # a right-to-left override reorders what follows
    ("a\u200bb\u2028c", "a\\u200bb\\u2028c"),  # zero-width space, line separator
    ("\ud800", "\\ud800"),  # a lone surrogate, which no terminal encoding could write
    ("tag\U000e0041", "tag\\U000e0041"),
    ("naïve 日本語 😀 [bold]x[/] C:\\runs", "naïve 日本語 😀 [bold]x[/] C:\\runs"),
])
def test_controls_are_escaped_and_everything_else_kept(sent: str, shown: str) -> None:
    assert literal(sent) == shown


def test_no_character_of_any_escaped_kind_is_left() -> None:
    every = "".join(chr(code) for code in range(sys.maxunicode + 1))
    shown = literal(every)
    assert not any(unicodedata.category(character) in ESCAPED_CATEGORIES for character in shown)
    shown.encode("utf-8")  # nothing left that cannot be written out
