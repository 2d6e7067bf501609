"""Write padbench/contract/model_types.py: the transformers model types the worker can measure.

    .venv/bin/python scripts/model_types.py

The contract cannot import transformers (the server and the client do without it), so it keeps the list of
model types as data, taken from the installed transformers with the worker's own check
(`check_model_type`): a causal LM whose attention goes through transformers' attention interface. Run it
after changing the transformers version the workers install; tests/unit/test_model_types.py says when the
list and the installed transformers disagree.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import transformers
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from padbench.worker.engine.model.support import UnsupportedModel, check_model_type

TARGET = Path(__file__).resolve().parents[1] / "padbench" / "contract" / "model_types.py"
HEADER = '''"""The transformers model types padbench measures, as data: the contract checks `model.config.model_type`
at submission without importing transformers. Written by scripts/model_types.py from transformers {version}
(causal LMs whose attention goes through transformers' attention interface); the worker checks again
with its own transformers before it builds anything.
"""

from __future__ import annotations

TRANSFORMERS_VERSION = "{version}"
CAUSAL_LM_MODEL_TYPES: frozenset[str] = frozenset({{
'''


def runnable_model_types() -> list[str]:
    runnable = []
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            check_model_type(model_type, "model_type")
        except UnsupportedModel:
            continue
        runnable.append(model_type)
    return runnable


def main() -> int:
    names = ", ".join(f'"{name}"' for name in runnable_model_types())
    body = textwrap.fill(names, width=112, initial_indent="    ", subsequent_indent="    ")
    TARGET.write_text(HEADER.format(version=transformers.__version__) + body + ",\n})\n", encoding="utf-8")
    print(f"wrote {TARGET} from transformers {transformers.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
