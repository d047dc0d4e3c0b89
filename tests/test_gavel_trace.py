"""gavel_trace ingest: Gavel's 7-field (msr) and current 10-field layouts, durations from a
throughputs JSON. Hand-made lines are written with Gavel's own format strings."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.store import Store

ORIGIN = datetime(2017, 11, 1, tzinfo=UTC).timestamp()


def ingest(store: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(main, ["ingest", *map(str, args), "--store", str(store), "--json"])


def current(job_type: str, steps: int, scale: int, arrival: int, weight: int = 1, slo=-1) -> str:
    """A line as Gavel writes it today: Job.__str__ ('%s\\t%s\\t%s\\t%s\\t%d\\t%d\\t%d\\t%d\\t%f'
    over job_type, command, working_directory, num_steps_arg, needs_data_dir, total_steps,
    scale_factor, priority_weight, SLO), then '\\t%d\\n' % arrival_time (generate_trace)."""
    job = "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%f" % (  # noqa: UP031 - Gavel's own formatting
        job_type,
        "python3 main.py --data_dir=%s/cifar10 --batch_size 128",
        "image_classification/cifar10",
        "--num_steps",
        1,
        steps,
        scale,
        weight,
        slo,
    )
    return "%s\t%d\n" % (job, arrival)  # noqa: UP031


def msr(job_type: str, steps: int, arrival: float, scale: int) -> str:
    """A line of Gavel's msr traces (7 fields, as in scheduler/traces/msr/seed=0/*.trace)."""
    return "%s\t%s\t%s\t%d\t%d\t%f\t%d\n" % (  # noqa: UP031
        job_type,
        "cd %s/gpusched/workloads/pytorch/translation && python3 train.py -batch_size 128",
        "-step",
        1,
        steps,
        arrival,
        scale,
    )


def throughputs(path: Path) -> Path:
    # Gavel's layout: GPU type -> "('job type', scale)" -> {"null": alone, "(other)": [a, b]}.
    iso: dict[str, dict[str, Any]] = {
        "('ResNet-18 (batch size 128)', 1)": {"null": 20.0, "('LM (batch size 10)', 1)": [9, 3]},
        "('ResNet-18 (batch size 128)', 2)": {"null": 36.0},
        "('LM (batch size 10)', 1)": {"null": 4.0},
    }
    slow = {k: {"null": v["null"] / 2} for k, v in iso.items()}
    path.write_text(json.dumps({"v100": iso, "p100": slow}))
    return path


def durations(store: Path) -> dict[str, tuple]:
    with Store(store, read_only=True) as st:
        rows = st.con.execute(
            "SELECT job_id, epoch(submit_time), j.num_gpus, a.duration_s, j.flags, j.vc "
            "FROM jobs j JOIN attempts a USING (job_id)"
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def test_current_and_msr_layouts_with_hand_computed_durations(tmp_path: Path) -> None:
    (tmp_path / "now.trace").write_text(
        current("ResNet-18 (batch size 128)", 36030, 1, 0)  # 36030 / 20 = 1801.5 s
        # Scale 4 not measured: 36 x 4 / 2 = 72 steps/s from scale 2 -> 7200 / 72 = 100 s.
        + current("ResNet-18 (batch size 128)", 7200, 4, 120)
        + current("LM (batch size 10)", 8601, 1, 3600, weight=5, slo=1.2)  # 8601 / 4 = 2150.25
        + current("A3C", 8857, 1, 7200)  # not in the throughputs file: no duration
    )
    (tmp_path / "vc1.trace").write_text(msr("LM (batch size 10)", 1000, 30.5, 1))  # 250 s
    thr = throughputs(tmp_path / "thr.json")
    store = tmp_path / "s"
    r = ingest(store, tmp_path / "now.trace", tmp_path / "vc1.trace", "--gavel-throughputs", thr,
               "--origin", "2017-11-01")  # fmt: skip
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["rejected"] == 0
    got = durations(store)
    assert got == {
        # A trace gives one run per job: its attempts are not recorded (attempts_unknown).
        "now-1": (ORIGIN, 1, 1801.5, ["attempts_unknown"], "now"),
        "now-2": (ORIGIN + 120, 4, 100.0, ["attempts_unknown"], "now"),
        "now-3": (ORIGIN + 3600, 1, 2150.25, ["attempts_unknown"], "now"),
        "now-4": (ORIGIN + 7200, 1, None, ["attempts_unknown", "no_throughput"], "now"),
        "vc1-1": (ORIGIN + 30.5, 1, 250.0, ["attempts_unknown"], "vc1"),
    }
    notes = out["notes"]
    assert (
        "gavel_trace: durations = total_steps / isolated throughput on v100 (--gavel-gpu) from "
        "thr.json; arrival seconds counted from 2017-11-01T00:00:00+00:00 (--origin); 1 jobs at "
        "scale factors not measured there scaled linearly from the largest measured one"
    ) in notes
    assert (
        "gavel_trace: 1 jobs of 1 job types with no v100 throughput in thr.json (A3C): duration "
        "unknown (NULL), flagged no_throughput"
    ) in notes
    assert (
        "gavel_trace: 1 jobs set a priority weight other than 1 or an SLO: not stored (the store "
        "has no column for them)"
    ) in notes


def test_gpu_type_and_throughputs_among_the_paths(tmp_path: Path) -> None:
    (tmp_path / "t.trace").write_text(current("LM (batch size 10)", 8601, 1, 0))
    thr = throughputs(tmp_path / "thr.json")
    r = ingest(tmp_path / "s", tmp_path / "t.trace", thr, "--gavel-gpu", "p100")
    assert r.exit_code == 0, r.output
    assert durations(tmp_path / "s")["t-1"][2] == 8601 / 2.0  # p100: half of v100's 4.0
    r = ingest(tmp_path / "s2", tmp_path / "t.trace", thr, "--gavel-gpu", "a100")
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: {thr}: no 'a100' throughputs (the file has p100, v100); choose one with "
        "--gavel-gpu (nothing kept of the 2 gavel_trace files of this run)"
    )


def test_nine_field_layout_and_bad_lines(tmp_path: Path) -> None:
    # Gavel's 2020 parse_trace: the current layout without working_directory.
    nine = "A3C\tpython3 main.py --env PongDeterministic-v4\t--max_steps\t0\t8857\t1\t1\t-1\t60\n"
    (tmp_path / "t.trace").write_text(
        current("LM (batch size 10)", 400, 1, 0)
        + nine
        + "LM (batch size 10)\tx\t-n\t1\tmany\n"
        + current("A3C", 1, 99_999_999_999, 0)  # would overflow num_gpus (int32)
        + current("A3C", 1, 1, 0).replace("\t0\n", "\t1e300\n")
    )
    thr = tmp_path / "thr.json"
    # A byte that is not UTF-8 inside a string of the JSON (a type name) is replaced.
    thr.write_bytes(b'{"v100": {"(\'A3C\', 1)": {"null": 11.0}, "(\'B\xff\', 1)": {"null": 1}}}')
    r = ingest(tmp_path / "s", tmp_path / "t.trace", "--gavel-throughputs", thr)
    assert r.exit_code == 1, r.output  # the 3 rejects below, beyond --max-rejects 0
    assert r.stderr.splitlines()[-1].startswith(
        f"error: {tmp_path / 't.trace'}:3: expected 7, 9 or 10 tab-separated fields"
    )
    assert json.loads(r.stdout)["rejected"] == 3
    got = durations(tmp_path / "s")
    assert got["t-2"][1:3] == (1, 8857 / 11.0)
    assert got["t-1"][2:4] == (None, ["attempts_unknown", "no_throughput"])
    with Store(tmp_path / "s", read_only=True) as st:
        rej = st.con.execute("SELECT line_no, reason FROM rejects ORDER BY 1").fetchall()
    assert rej == [
        (3, "expected 7, 9 or 10 tab-separated fields (Gavel traces), found 5"),
        (4, "scale_factor: GPUs of a job '99999999999' out of range (0 to 1,000,000)"),
        (5, "arrival: relative time (s) '1e300' out of range (-1e10 to 1e10)"),
    ]


def test_msr_traces_with_the_real_throughputs(reference: Path, store_dir: Path) -> None:
    traces = sorted((reference / "gavel-msr-traces").glob("*.trace"))
    thr_file = reference / "colocation/gavel_simulation_throughputs.json"
    r = ingest(store_dir, reference / "gavel-msr-traces", thr_file)
    assert r.exit_code == 0, r.output
    lines = [ln for t in traces for ln in t.read_text().splitlines() if ln.strip()]
    thr = json.loads(thr_file.read_text())["v100"]
    first = (reference / "gavel-msr-traces/795a4c.trace").read_text().splitlines()[0].split("\t")
    want_first = int(first[4]) / thr[str((first[0], int(first[6])))]["null"]
    # A 16-GPU job: Gavel measured up to 8 GPUs, so throughput scales 8 -> 16 linearly.
    big = next(
        (t.stem, i + 1, ln.split("\t"))
        for t in traces
        for i, ln in enumerate(t.read_text().splitlines())
        if ln.split("\t")[6] == "16" and str((ln.split("\t")[0], 8)) in thr
    )
    want_big = int(big[2][4]) / (thr[str((big[2][0], 8))]["null"] * 2)
    got = durations(store_dir)
    assert len(got) == len(lines) == 15_264
    assert abs(got["795a4c-1"][2] - want_first) < 1e-6
    assert abs(got[f"{big[0]}-{big[1]}"][2] - want_big) < 1e-6
    assert got["795a4c-1"][0] == datetime(2017, 10, 1, tzinfo=UTC).timestamp() + float(first[5])
    assert got["795a4c-1"][4] == "795a4c"


def test_gavel_traces_without_throughputs_fail_clearly(reference: Path, store_dir: Path) -> None:
    r = ingest(store_dir, reference / "gavel-msr-traces/795a4c.trace")
    assert r.exit_code == 1
    assert "give --gavel-throughputs FILE or name it in the same ingest command" in r.stderr
