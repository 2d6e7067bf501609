"""Text written by other people, made safe to print on a terminal: what they sent is what the reader sees.

A job's name, its submitter, a worker's name and labels, an error message or a model name comes from whoever
submitted the job or runs the worker. Printed as it is, a control character in it is an instruction to the
reader's terminal, not text: ESC starts sequences that clear the screen, retitle the window, set the
clipboard, hide text or draw a link, and a carriage return or a newline can overwrite or forge a line of
the table around it. `literal` writes every such character as an escape instead.

Rich markup (`[bold]`, `[link=…]`) is the other half: a string rich parses as markup draws its tags. Strings
from others reach rich as `rich.text.Text` (never parsed) or through `rich.markup.escape`.
"""

from __future__ import annotations

import unicodedata

# Unicode categories written as escapes: Cc (C0 controls, DEL, C1 controls: the terminal's instructions),
# Cf (format characters: bidirectional overrides reorder what is shown, zero-width ones hide what is
# there), Zl and Zp (line and paragraph separators, which some terminals break lines at) and Cs (a lone
# surrogate, which cannot be encoded for output at all, so printing it would end the command).
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
# The three that Python's repr writes by name; every other one is `\xNN`, `\uNNNN` or `\UNNNNNNNN`.
NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(character: str) -> str:
    code = ord(character)
    if character in NAMED_ESCAPES:
        return NAMED_ESCAPES[character]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def literal(text: str) -> str:
    """`text` with each control, format or separator character written as Python writes it in a repr:
    ESC as `\\x1b`, a newline as `\\n`, a right-to-left override as `\\u202e`.

    Escapes rather than the Control Pictures symbols (U+2400…): those exist only for C0 and DEL, not for
    the C1 controls or format characters, and need a font that has them, whereas an escape is plain ASCII
    that every terminal shows and that reads back in Python as the character it stands for. Backslashes
    themselves are kept, so paths and patterns read as they were written; a name that spells out `\\x1b`
    looks like one holding ESC, which misleads no terminal.
    """
    if text.isprintable():  # the usual case; every escaped category is one isprintable() refuses
        return text
    return "".join(_escape(character) if unicodedata.category(character) in ESCAPED_CATEGORIES else character
                   for character in text)
