"""Write a JSON-lines corpus of source code: one record per file of a directory tree, for generate jobs.

A prompt corpus of code has the long, varied prompt lengths of coding assistants; the Python standard
library is on every machine that runs padbench, so the corpus needs no download:

    python scripts/code_corpus.py "$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" code.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

MAX_CHARACTERS = 8000  # a record keeps a file's head: prompts are cut to data.max_length tokens anyway


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="directory whose source files become records")
    parser.add_argument("output", type=Path, help="the .jsonl file to write")
    parser.add_argument("--suffix", default=".py", help="file suffix to take (default .py)")
    args = parser.parse_args()
    files = sorted(path for path in args.root.rglob(f"*{args.suffix}") if path.is_file())
    written = 0
    with args.output.open("w") as output:
        for path in files:
            text = path.read_text(errors="replace").strip()[:MAX_CHARACTERS]
            if text:
                output.write(json.dumps({"text": text, "path": str(path.relative_to(args.root))}) + "\n")
                written += 1
    print(f"{written} records from {len(files)} files under {args.root} -> {args.output}")


if __name__ == "__main__":
    main()
