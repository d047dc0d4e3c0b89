"""The MuxFlow model's interference predictor against real colocation measurements: its error
(|normalized throughput - predicted|) on Gavel's pairs (5-fold held out, and leave one job type
out) for each GPU type, and on Lucid's pairs with Gavel's coefficients (validation only:
nothing is fitted on Lucid), beside a constant predictor (``const_mae``: every pair predicted as
the median). Needs ``../shared/reference/colocation`` (skipped without it).

On other copies of the files: ``python -m bench.muxflow_predictor GAVEL_JSON [LUCID_CSV]``.

Also the maintainers' way to regenerate the shipped calibration (never written by the package
itself at run time)::

    python -m bench.muxflow_predictor calibrate GAVEL_JSON philly_analyze/data/muxflow_interference.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

COLOCATION = Path(__file__).resolve().parent.parent.parent / "shared" / "reference" / "colocation"
GAVEL = COLOCATION / "gavel_physical_cluster_throughputs.json"
LUCID = COLOCATION / "lucid_colocate_info.csv"


def error_rows(gavel: Path, lucid: Path | None) -> list[dict[str, Any]]:
    """One row per data set and test: pairs, mae, median, p90 (``error_summary``), const_mae."""
    import numpy as np

    from philly_analyze.sim.sharing.interference import (
        GPU_TYPES,
        error_summary,
        heldout_errors,
        leave_type_out_errors,
        load_gavel_pairs,
        load_interference,
        load_lucid_pairs,
        predictor_errors,
        probe_triples,
    )

    rows = []
    for gpu in GPU_TYPES:
        pairs = load_gavel_pairs(gavel, gpu)
        off = pairs.r[pairs.j != pairs.k]
        const = float(np.abs(off - np.median(off)).mean())
        for what, err in (
            ("held-out pairs (5-fold)", heldout_errors(pairs)),
            ("leave-one-type-out", leave_type_out_errors(pairs)),
        ):
            rows.append(
                {"data": f"Gavel {gpu}", "test": what, **error_summary(err), "const_mae": const}
            )
    if lucid is not None:
        lp = load_lucid_pairs(lucid)
        off = lp.r[lp.j != lp.k]
        const = float(np.abs(off - np.median(off)).mean())
        for gpu in GPU_TYPES:
            err = predictor_errors(load_interference(gpu).theta, lp, probe_triples(lp))
            rows.append(
                {
                    "data": "Lucid",
                    "test": f"Gavel {gpu} theta, all pairs",
                    **error_summary(err),
                    "const_mae": const,
                }
            )
    return rows


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def run(gavel: Path = GAVEL, lucid: Path | None = LUCID) -> None:
    """Print the error table (Markdown) for the Gavel file and, if present, Lucid's."""
    if not gavel.exists():
        print(f"skipped: {gavel} not present")
        return
    rows = error_rows(gavel, lucid if lucid is not None and lucid.exists() else None)
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(_cell(r[c]) for c in cols) + " |")


def calibrate_to(gavel: Path, out: Path) -> None:
    """Write the calibration ``interference.calibrate`` derives from Gavel's measurements."""
    from philly_analyze.sim.sharing.interference import calibrate

    out.write_text(json.dumps(calibrate(gavel), indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "calibrate":
        calibrate_to(Path(args[1]), Path(args[2]))
    elif len(args) <= 2 and "calibrate" not in args:
        run(*[Path(a) for a in args])
    else:
        sys.exit(
            "usage: python -m bench.muxflow_predictor [GAVEL_JSON [LUCID_CSV]]\n"
            "       python -m bench.muxflow_predictor calibrate GAVEL_JSON OUT_JSON"
        )
