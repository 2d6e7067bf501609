"""How a client command ends: its exit status, and one line on stderr naming the command and the reason."""

from __future__ import annotations

import sys
from collections.abc import Callable

from padbench.http import ApiError

EXIT_FAILED = 1  # the server or the job said no
EXIT_USAGE = 2  # the command line, a spec or a file was wrong


def reported(command: str, call: Callable[[], int], usage_errors: tuple[type[Exception], ...]) -> int:
    """`call()`'s status; a usage error or an API error becomes its message and exit status instead."""
    try:
        return call()
    except usage_errors as error:
        print(f"padbench {command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as error:
        print(f"padbench {command}: {error}", file=sys.stderr)
        return EXIT_FAILED
