"""Hand-made stores shared by the replay tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from philly_analyze.store import Store

T0 = datetime(2017, 10, 2, 12, 0, tzinfo=UTC)


def observed_store(path: Path) -> Path:
    """Three observed jobs on one idle 8-GPU server: observed queueing delays 60 s, 0 s and
    30 s, where an idle cluster starts each at once: errors 60, 0, 30 -> median 30 s."""
    rows = [("a", 0, 60, 100), ("b", 10, 0, 100), ("c", 20, 30, 100)]
    with Store(path) as st, st.batch() as b:
        b.write(
            "machines",
            {"machine_id": ["m0"], "listed_num_gpus": pa.array([8], pa.int16()), "source": ["x"]},
        )
        b.write(
            "jobs",
            {
                "job_id": [r[0] for r in rows],
                "vc": ["v"] * 3,
                "status": ["passed"] * 3,
                "submit_time": [T0 + timedelta(seconds=r[1]) for r in rows],
                "num_gpus": pa.array([1] * 3, pa.int32()),
                "source": ["philly_job_log"] * 3,
            },
        )
        b.write(
            "attempts",
            {
                "job_id": [r[0] for r in rows],
                "attempt_idx": pa.array([0] * 3, pa.int32()),
                "start_time": [T0 + timedelta(seconds=r[1] + r[2]) for r in rows],
                "end_time": [T0 + timedelta(seconds=r[1] + r[2] + r[3]) for r in rows],
                "num_gpus": pa.array([1] * 3, pa.int32()),
                "num_machines": pa.array([1] * 3, pa.int32()),
                "duration_s": [float(r[3]) for r in rows],
                "outcome": ["passed"] * 3,
                "source": ["philly_job_log"] * 3,
            },
        )
        st.commit(
            b, [{"source": "hand", "format": "philly_job_log"}], source_format="philly_job_log"
        )
    return path
