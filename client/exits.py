"""How a client command ends: its exit status, and one line on stderr naming the command and the reason.

The reason is often the server's, quoting what a submitter or worker sent: it is printed through `literal`,
so it stays one line and a control character in it shows as an escape.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from padbench.http import ApiError
from padbench.terminal_text import literal

EXIT_FAILED = 1  # the server or the job said no
EXIT_USAGE = 2  # the command line, a spec or a file was wrong


def reported(command: str, call: Callable[[], int], usage_errors: tuple[type[Exception], ...]) -> int:
    """`call()`'s status; a usage error or an API error becomes its message and exit status instead."""
    try:
        return call()
    except usage_errors as error:
        print(f"padbench {command}: {literal(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as error:
        print(f"padbench {command}: {literal(str(error))}", file=sys.stderr)
        return EXIT_FAILED
