"""The codecs of a store's other files (``schemas.ARTIFACTS``): Parquet, JSON and CSV, each
conforming what it writes and what it reads to the file's declaration, so a reader gets the
declared columns and fields whichever version wrote the file. Used through
``store.Batch.write_artifact`` and ``store.Store.read_artifact`` (and by ``vcquota`` for quota
files outside a store, which share the ``vc_quotas`` format)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from philly_analyze import schemas
from philly_analyze.errors import StoreError


def write(art: schemas.Artifact, data: Any, path: Path) -> None:
    """Write ``data`` as ``art`` at ``path``: an Arrow table (or dict of columns) for Parquet
    and CSV artefacts, a dict of the declared fields for JSON ones. Data that does not match
    the declaration is a bug of the writer: ``ValueError``."""
    _WRITERS[art.format](art, data, path)


def read(art: schemas.Artifact, path: Path) -> Any:
    """Read ``art`` from ``path``: an Arrow table with the declared columns, or a dict of the
    declared fields (an optional field an older file lacks is absent, so a reader can tell it
    from null). ``StoreError`` (naming the file, and the line where there is one) when the
    file cannot be read as declared."""
    return _READERS[art.format](art, path)


def _table(art: schemas.Artifact) -> schemas.Table:
    if art.table is None:
        raise ValueError(f"artefact {art.name} has no columns")
    return art.table


def _write_parquet(art: schemas.Artifact, data: Any, path: Path) -> None:
    pq.write_table(schemas.conform(_table(art), data), path, compression="zstd")


def _read_parquet(art: schemas.Artifact, path: Path) -> pa.Table:
    try:
        tbl = pq.read_table(path)
        return schemas.conform(_table(art), tbl)
    except (OSError, pa.ArrowException, ValueError) as e:
        raise StoreError(f"cannot read as {art.name}: {e}", source=str(path)) from e


def field_problems(art: schemas.Artifact, doc: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``doc`` as ``art``: unknown or missing fields, wrong JSON types."""
    declared = {f.name: f for f in art.fields}
    out = [f"unknown field {k!r}" for k in doc if k not in declared]
    for f in art.fields:
        if f.name not in doc:
            if f.required:
                out.append(f"missing field {f.name!r}")
            continue
        value = doc[f.name]
        if value is None:
            if not f.nullable:
                out.append(f"field {f.name!r} is null")
            continue
        kinds = schemas.JSON_TYPES[f.type]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            out.append(f"field {f.name!r} is {type(value).__name__}, not {f.type}")
    return out


def _write_json(art: schemas.Artifact, doc: Mapping[str, Any], path: Path) -> None:
    problems = field_problems(art, doc)
    if problems:
        raise ValueError(f"{art.name}: {'; '.join(problems)}")
    # Sorted keys: the same run gives the same bytes, whatever order a dict was built in.
    path.write_text(json.dumps(dict(doc), indent=2, sort_keys=True) + "\n")


def _read_json(art: schemas.Artifact, path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise StoreError(f"not valid JSON: {e.msg}", source=str(path), line=e.lineno) from e
    except (OSError, UnicodeDecodeError) as e:
        raise StoreError(f"cannot read: {e}", source=str(path)) from e
    if not isinstance(doc, dict):
        raise StoreError(f"expected a JSON object ({art.name})", source=str(path))
    # Fields added since (``required=False``) are absent from older files: not a problem.
    problems = [p for p in field_problems(art, doc) if not p.startswith("unknown field")]
    if problems:
        raise StoreError(f"not a {art.name} file: {'; '.join(problems)}", source=str(path))
    return doc


def _write_csv(art: schemas.Artifact, data: Any, path: Path) -> None:
    tbl = schemas.conform(_table(art), data)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(tbl.column_names)
    columns = [tbl.column(i).to_pylist() for i in range(tbl.num_columns)]
    for row in zip(*columns, strict=True):
        w.writerow(["" if v is None else v for v in row])
    path.write_text(buf.getvalue())


def _parser(type_: pa.DataType) -> tuple[Callable[[str], Any], str]:
    """How a CSV cell becomes a value of ``type_``, and what it must be (for errors)."""
    if pa.types.is_integer(type_):
        return int, "an integer"
    if pa.types.is_floating(type_):
        return float, "a number"
    if pa.types.is_string(type_):
        return str, "text"
    raise ValueError(f"no CSV parser for {type_}")


def _read_csv(art: schemas.Artifact, path: Path) -> pa.Table:
    t = _table(art)
    names = [c.name for c in t.physical_columns]
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise StoreError(f"cannot read: {e}", source=str(path)) from e
    rows = list(csv.reader(lines))
    if not rows or [h.strip() for h in rows[0]] != names:
        raise StoreError(f"expected the header {','.join(names)}", source=str(path), line=1)
    parsers = [_parser(c.type) for c in t.physical_columns]
    values: list[list[Any]] = [[] for _ in names]
    for i, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(names):
            raise StoreError(f"expected {len(names)} fields", source=str(path), line=i)
        for col, (c, (parse, kind), text) in enumerate(
            zip(t.physical_columns, parsers, row, strict=True)
        ):
            text = text.strip()
            if text == "" and c.nullable:
                values[col].append(None)
                continue
            try:
                values[col].append(parse(text))
            except ValueError:
                raise StoreError(
                    f"{c.name} {text!r} is not {kind}", source=str(path), line=i
                ) from None
    return schemas.conform(t, dict(zip(names, values, strict=True)))


_WRITERS: dict[str, Callable[[schemas.Artifact, Any, Path], None]] = {
    "parquet": _write_parquet,
    "json": _write_json,
    "csv": _write_csv,
}
_READERS: dict[str, Callable[[schemas.Artifact, Path], Any]] = {
    "parquet": _read_parquet,
    "json": _read_json,
    "csv": _read_csv,
}
