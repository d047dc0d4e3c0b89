"""Which job attempt a framework log belongs to: path, content, mapping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from philly_analyze.ingest.framework_ids import AttemptId, Mapping, from_content, from_path, resolve

APP = "application_1506638472019_14199"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # The synthesizer's layout.
        (f"/x/framework/{APP}/attempt_0/stdout.txt", (APP, 0)),
        (f"/x/framework/{APP}/attempt_3/stderr.txt", (APP, 3)),
        (f"/x/{APP}/attempt-2/log.txt", (APP, 2)),
        (f"/x/{APP}/attempt1/log.txt", (APP, 1)),
        # YARN: appattempt_..._000002 is the 2nd attempt, index 1; container ..._01_... attempt 1.
        ("/x/appattempt_1506638472019_14199_000002/stdout", (APP, 1)),
        (f"/nm/userlogs/{APP}/container_e26_1506638472019_14199_01_000002/stdout", (APP, 0)),
        (f"/nm/userlogs/{APP}/container_1506638472019_14199_03_000001/stderr", (APP, 2)),
        # An appattempt id beats an attempt_<N> folder; the first application wins.
        (f"/x/{APP}/attempt_5/appattempt_1506638472019_14199_000001.log", (APP, 0)),
        (f"/x/{APP}/application_1_2/attempt_0/out.txt", (APP, 0)),
        # Container of another application does not give this job an attempt.
        (f"/x/{APP}/container_e1_1_2_05_000001/out.txt", (APP, None)),
        (f"/x/{APP}/stdout.txt", (APP, None)),
        # Inside an archive member.
        (f"/x/logs.tar.gz!framework/{APP}/attempt_1/stdout.txt", (APP, 1)),
        ("/x/logs/attempt_0/stdout.txt", None),
        ("/x/train.log", None),
    ],
)
def test_from_path(path: str, expected: tuple[str, int | None] | None) -> None:
    got = from_path(path)
    assert (None if got is None else (got.job_id, got.attempt_idx)) == expected


def test_from_content_prefers_container_ids_and_detects_conflicts() -> None:
    head = (
        b"resuming from /hdfs/models/application_1_1/model.ckpt\n"
        b"CONTAINER_ID=container_e26_1506638472019_14199_02_000001\n"
    )
    assert from_content(head) == AttemptId(APP, 1, "content")
    assert from_content(b"job application_7_8 starting\n") == AttemptId(
        "application_7_8", None, "content"
    )
    msg = from_content(b"container_e1_1_1_01_000001\ncontainer_e1_2_2_01_000001\n")
    assert isinstance(msg, str) and "several applications" in msg
    assert from_content(b"Epoch: [0][1/10] Loss 1.0\n") is None
    # Attempts that disagree: job known, attempt not.
    two = b"appattempt_5_6_000001 appattempt_5_6_000002\n"
    assert from_content(two) == AttemptId("application_5_6", None, "content")


def test_path_without_attempt_takes_it_from_content_of_same_job() -> None:
    head = b"container_e26_1506638472019_14199_02_000003 started\n"
    assert resolve(f"/x/{APP}/stdout.txt", head, Mapping({})) == AttemptId(APP, 1, "path")
    other = b"container_e26_1_1_02_000003 started\n"
    assert resolve(f"/x/{APP}/stdout.txt", other, Mapping({})) == AttemptId(APP, None, "path")


def test_mapping_beats_path_and_matches_absolute_relative_and_suffix(tmp_path: Path) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        m = Mapping(
            {
                "logs/run7/stdout.txt": ("application_9_9", 4),
                str(tmp_path / "a" / "x.log"): ("application_8_8", 0),
                "x.log": ("application_3_3", 1),
            }
        )
        assert m.lookup(str(tmp_path / "logs/run7/stdout.txt")) == AttemptId(
            "application_9_9", 4, "mapping"
        )
        assert m.lookup("/elsewhere/logs/run7/stdout.txt") == AttemptId(
            "application_9_9", 4, "mapping"
        )
        assert m.lookup(str(tmp_path / "a" / "x.log")) == AttemptId("application_8_8", 0, "mapping")
        assert m.lookup("/other/x.log") == AttemptId("application_3_3", 1, "mapping")
        assert m.lookup("/other/y.log") is None
        assert m.lookup("/t.tar!logs/run7/stdout.txt") == AttemptId("application_9_9", 4, "mapping")
        # The mapping wins over an application id in the path.
        got = resolve(f"/z/{APP}/attempt_0/x.log", b"", m)
        assert got == AttemptId("application_3_3", 1, "mapping")
    finally:
        os.chdir(cwd)


def test_unknown_job_message_says_how_to_fix() -> None:
    msg = resolve("/x/train.log", b"hello\n", Mapping({}))
    assert isinstance(msg, str)
    assert "unknown job" in msg and "--framework-mapping" in msg and "attempt_<N>" in msg
