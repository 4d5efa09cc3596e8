"""Rewrite the golden outputs (and, with ``--inputs``, the simulated input).

Run only for a deliberate behaviour change, in the commit that makes it, so the
diff of ``tests/golden/outputs/`` shows exactly which outputs the change moved::

    python -m tests.golden.regenerate            # outputs only
    python -m tests.golden.regenerate --inputs   # simulate missing inputs first

``--inputs`` writes only the simulated inputs that do not exist yet: delete one
to re-simulate it (its outputs then change with the simulator, not the engine).
"""

from __future__ import annotations

import gzip
import sys

from spanguard.streams.sim import simulate
from tests.golden.traces import INPUTS, OUTPUTS, SIM_FLEETS, golden_traces, replay


def main(argv: list[str]) -> None:
    """Regenerate the checked-in golden files."""
    if "--inputs" in argv:
        INPUTS.mkdir(parents=True, exist_ok=True)
        for name, config in SIM_FLEETS.items():
            path = INPUTS / f"{name}.jsonl.gz"
            if not path.exists():
                data = b"".join(line + b"\n" for line in simulate(config).lines)
                path.write_bytes(gzip.compress(data, 9, mtime=0))
    OUTPUTS.mkdir(parents=True, exist_ok=True)
    for name, lines in golden_traces().items():
        outputs = replay(lines)
        (OUTPUTS / f"{name}.jsonl").write_bytes(b"".join(o + b"\n" for o in outputs))
        print(f"{name}: {len(lines)} events -> {len(outputs)} outputs")


if __name__ == "__main__":
    main(sys.argv[1:])
