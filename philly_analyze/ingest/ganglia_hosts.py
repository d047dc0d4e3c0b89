"""Which host a host-less Ganglia export belongs to (``--ganglia-host-pattern``).

ganglia-web CSV and ``rrdtool xport``/``dump`` files name no host. Two layouts are common:

- gmetad's RRD tree, ``<cluster>/<host>/<metric>.<ext>``: the host is the file's **folder**;
- one folder of exports named after host and metric, ``<host>_<metric>.csv`` (what a script
  looping ``curl 'graph.php?h=HOST&m=METRIC&csv=1' -o HOST_METRIC.csv`` writes; ganglia-web
  itself always offers ``ganglia-metrics.csv``): the host is in the **file name**.

``--ganglia-host-pattern`` chooses:

- ``auto`` (default): the file name (without extensions) is ``<host><sep><metric>`` with
  ``<sep>`` one of ``_ - .`` and ``<metric>`` the file's only series (the CSV column, the
  legend entry), or ``<host><sep><graph>_report`` for ganglia-web's report graphs
  (``m0_cpu_report.csv``); otherwise the folder. A file named just ``<metric>.csv`` therefore
  takes its folder, as before.
- ``folder``: always the folder.
- a regular expression with a named group ``host`` (and optionally ``metric``), matched against
  the whole file name without extensions, e.g. ``(?P<host>[^_]+)_(?P<metric>.+)``. ``metric``
  names the series of files whose data source is generic (gmetad RRDs call theirs ``sum``).
  A file the expression does not match takes its folder (a note counts them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.ganglia_samples import metric_rules, path_host_stem

AUTO = "auto"
FOLDER = "folder"
#: Separators between host and metric in an ``auto`` file name.
SEPARATORS = "_-."
#: ganglia-web's report graphs (``graph.php?g=cpu_report``): several metrics, one name.
_REPORT_RE = re.compile(r"(?P<host>.+?)[_.\-](?P<graph>[A-Za-z0-9]+_report)")


@dataclass(frozen=True)
class HostPattern:
    """A parsed ``--ganglia-host-pattern``."""

    text: str
    regex: re.Pattern[str] | None


@cache
def parse_host_pattern(text: str) -> HostPattern:
    """``auto``, ``folder`` or a regular expression with a ``host`` group; ``ValueError`` with
    the reason otherwise."""
    if text in (AUTO, FOLDER):
        return HostPattern(text, None)
    try:
        regex = re.compile(text)
    except re.error as e:
        raise ValueError(f"not a regular expression: {e}") from None
    if "host" not in regex.groupindex:
        raise ValueError("needs a named group (?P<host>...)")
    return HostPattern(text, regex)


def _from_file_name(
    stem: str, columns: list[str], pattern: HostPattern
) -> tuple[str, str | None] | None:
    """(host, metric or None) named by a file name, or None."""
    if pattern.text == FOLDER:
        return None
    if pattern.regex is not None:
        m = pattern.regex.fullmatch(stem)
        if m is None or not m["host"]:
            return None
        return m["host"], m.groupdict().get("metric") or None
    generic = set(metric_rules()["generic_series_names"])
    if len(columns) == 1 and columns[0].lower() not in generic:
        metric = columns[0]
        head, tail = stem[: -len(metric) - 1], stem[-len(metric) - 1 :]
        if head and tail[0] in SEPARATORS and tail[1:].lower() == metric.lower():
            return head, None
    m = _REPORT_RE.fullmatch(stem)
    return (m["host"], None) if m else None


class HostNamer:
    """Maps the column/legend/data-source names of one host-less export to (host, metric).

    ``host_from`` says where the host came from after a call: ``"file name"`` or ``"folder"``.
    """

    def __init__(self, source_name: str, pattern: str):
        self.source_name = source_name
        self.pattern = parse_host_pattern(pattern)
        self.host_from = ""

    def __call__(self, columns: list[str]) -> list[tuple[str, str]]:
        folder, stem = path_host_stem(self.source_name)
        cleaned = [c.strip() for c in columns]
        named = _from_file_name(stem, cleaned, self.pattern)
        host, metric = named if named else (folder, None)
        self.host_from = "file name" if named else "folder"
        if not host:
            raise InputFormatError(
                "no host: this export names no host; name the file <host>_<metric>.<ext>, put "
                "it in a folder named after the host (<cluster>/<host>/<metric>.<ext>, like "
                "gmetad's RRD tree), or give --ganglia-host-pattern",
                source=self.source_name,
            )
        file_metric = metric or stem
        generic = set(metric_rules()["generic_series_names"])
        if len(cleaned) == 1 and cleaned[0].lower() in generic:
            return [(host, file_metric)]
        return [(host, c if c.lower() not in generic else f"{file_metric}:{c}") for c in cleaned]
