"""Same seed, same bytes: every output file, whatever the number of worker processes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from click.testing import CliRunner

from philly_analyze.cli import main

ARGS = ["--jobs", "250", "--machines", "10", "--days", "1.5", "--start", "2017-11-04", "-q"]


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _run(out: Path, *extra: str) -> dict[str, str]:
    res = CliRunner().invoke(main, ["synth", "--out", str(out), *ARGS, *extra])
    assert res.exit_code == 0, res.output
    return _digest(out)


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", "--seed", "3", "--workers", "1")
    b = _run(tmp_path / "b", "--seed", "3", "--workers", "2")
    assert len(a) > 100
    assert a == b


def test_other_seed_other_bytes(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", "--seed", "3", "--formats", "philly")
    c = _run(tmp_path / "c", "--seed", "4", "--formats", "philly")
    assert a.keys() == c.keys()
    assert all(a[k] != c[k] for k in a if k.startswith("cluster_"))


def test_refuses_to_mix_outputs_without_force(tmp_path: Path) -> None:
    out = tmp_path / "o"
    _run(out, "--formats", "philly")
    (out / "notes.txt").write_text("mine")
    res = CliRunner().invoke(main, ["synth", "--out", str(out), *ARGS, "--formats", "philly"])
    assert res.exit_code == 1
    assert "--force" in res.output
    res = CliRunner().invoke(
        main, ["synth", "--out", str(out), *ARGS, "--formats", "yarn", "--force"]
    )
    assert res.exit_code == 0, res.output
    # --force removed the earlier outputs, and only those.
    assert not (out / "cluster_gpu_util").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "yarn" / "yarn-resourcemanager.log").exists()


def test_bad_format_is_a_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        main, ["synth", "--out", str(tmp_path / "x"), "--formats", "philly,csv"]
    )
    assert res.exit_code == 2
    assert "unknown format csv" in res.output
