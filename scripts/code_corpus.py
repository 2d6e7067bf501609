"""Write a JSON-lines corpus of Python code: one record per top-level function or class, for generate jobs.

Function- and class-sized prompts have the varied lengths of code-completion requests (a one-line helper to
a whole class); the Python standard library is on every machine that runs padbench, so the corpus needs no
download:

    python scripts/code_corpus.py "$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" code.jsonl
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

MAX_CHARACTERS = 8000  # a record keeps a definition's head: prompts are cut to data.max_length tokens anyway
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def definitions(source: str) -> list[str]:
    """The source of every top-level function and class, in file order; none for a file that does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    segments = (ast.get_source_segment(source, node) for node in tree.body if isinstance(node, DEFINITIONS))
    return [segment for segment in segments if segment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="directory whose source files become records")
    parser.add_argument("output", type=Path, help="the .jsonl file to write")
    args = parser.parse_args()
    files = sorted(path for path in args.root.rglob("*.py") if path.is_file())
    written = 0
    with args.output.open("w") as output:
        for path in files:
            for text in definitions(path.read_text(errors="replace")):
                output.write(json.dumps({"text": text[:MAX_CHARACTERS], "path": str(path.relative_to(args.root))})
                             + "\n")
                written += 1
    print(f"{written} records from {len(files)} files under {args.root} -> {args.output}")


if __name__ == "__main__":
    main()
