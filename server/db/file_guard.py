"""Is the SQLite file this server opened still the file at its path?

A SQLite file deleted (or replaced, say by `mv`) under a running server stays open: every connection
already in the pool goes on reading and writing the unlinked inode, so submits are acknowledged into a
file nobody will ever open again, and a connection opened later creates a fresh, empty file at the path.
The guard remembers the file's identity (device and inode) when the first connection opens it and, before
every transaction and every new connection, compares it with what the path names now; a mismatch raises
`DatabaseCondition(unlinked)`, which every route answers with 503 and the reason.

The identity is compared by `os.stat` on the path rather than `fstat` on a descriptor of our own: SQLite
holds POSIX advisory locks on the file, and closing any other descriptor of the same file in this process
would silently release them (https://www.sqlite.org/howtocorrupt.html, section 2.2).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from padbench.server.db.failures import DatabaseCondition, DatabaseFailure


@dataclass(frozen=True)
class FileIdentity:
    device: int
    inode: int

    @classmethod
    def at(cls, path: Path) -> FileIdentity | None:
        """The identity of the file `path` names now; None when nothing is there."""
        try:
            status = os.stat(path)
        except FileNotFoundError:
            return None
        return cls(status.st_dev, status.st_ino)


class SqliteFileGuard:
    """Remembers the database file first opened and refuses to go on once its path names another (or none)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._opened: FileIdentity | None = None
        self._lock = threading.Lock()

    def remember_opened_file(self) -> None:
        """Called when a connection has opened the file: the first one fixes the identity."""
        with self._lock:
            if self._opened is None:
                self._opened = FileIdentity.at(self.path)

    def still_linked(self) -> bool:
        return self._opened is None or FileIdentity.at(self.path) == self._opened

    def check(self) -> None:
        """Raise DatabaseCondition(unlinked) when the opened file is no longer the one at the path."""
        if not self.still_linked():
            raise DatabaseCondition(DatabaseFailure.unlinked)
