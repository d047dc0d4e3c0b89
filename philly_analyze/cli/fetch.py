"""``philly-analyze fetch``: thin wrapper over ``philly_analyze.fetch``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from philly_analyze.cli.options import PathType, quiet_option
from philly_analyze.errors import check_writable

if TYPE_CHECKING:  # the verb imports the library only when it runs (fast --help)
    from philly_analyze.fetch import Dataset


@click.command(
    "fetch",
    epilog="""\b
Each file is checked against the SHA-256 in the registry before it gets its name: a wrong
download is removed, an interrupted one is resumed (HTTP Range, from NAME.part) by the next
run, and a file already in place with the right checksum is not downloaded again. The
paths of the files are printed on stdout, so `ingest $(philly-analyze fetch NAME)` works.

\b
Examples:
  philly-analyze fetch --list
  philly-analyze fetch philly-trace  # needs: the network
  philly-analyze fetch gavel philly-machine-list --to data  # needs: the network
  philly-analyze fetch philly-trace --url https://mirror.example.org/trace-data.tar.gz  # needs: the network
""",
)
@click.argument("names", nargs=-1, metavar="NAME...")
@click.option(
    "--to",
    "dest",
    type=PathType(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Folder to put the files in (created if missing).",
)
@click.option("--list", "list_", is_flag=True, help="List the datasets and exit.")
@click.option(
    "--url",
    "url",
    metavar="URL",
    help="Download a one-file dataset from URL instead (a mirror); the checksum still applies.",
)
@click.option(
    "--registry",
    type=PathType(dir_okay=False, exists=True, path_type=Path),
    envvar="PHILLY_DATASETS",
    help="A registry file in the form of philly_analyze/data/datasets.toml to use instead. "
    "Env: PHILLY_DATASETS.",
)
@quiet_option()
def command(
    names: tuple[str, ...],
    dest: Path,
    list_: bool,
    url: str | None,
    registry: Path | None,
    quiet: bool,
) -> None:
    """Download public datasets the project reads (NAME: see --list), checked by SHA-256."""
    from philly_analyze.fetch import fetch, load_registry
    from philly_analyze.progress import human_bytes

    datasets = load_registry(registry)
    if list_:
        click.echo(_listing(datasets.values()), nl=False)
        return
    if not names:
        raise click.UsageError("name a dataset (see `philly-analyze fetch --list`)")
    unknown = [n for n in names if n not in datasets]
    if unknown:
        raise click.BadParameter(
            f"unknown dataset {', '.join(unknown)}; choose from {', '.join(datasets)}",
            param_hint="NAME",
        )

    check_writable(dest, "--to")

    def note(text: str) -> None:
        if not quiet:
            click.echo(f"note: {text}", err=True)

    for name in dict.fromkeys(names):
        ds = datasets[name]
        unverified = [f for f in ds.files if not f.checked]
        if unverified and not url:
            note(
                f"{name}: {len(unverified)} of {len(ds.files)} files have URLs nobody has "
                "verified (see `fetch --list`); their SHA-256 is checked all the same"
            )
        done = fetch(ds, dest, urls=[url] if url else None, quiet=quiet, note=note)
        for path, _ in done:
            click.echo(str(path))
        if not quiet:
            got = sum(1 for _, s in done if s == "downloaded")
            click.echo(
                f"{name}: {len(done)} file(s), {human_bytes(ds.size)}, SHA-256 verified "
                f"({got} downloaded, {len(done) - got} already present) in {dest}",
                err=True,
            )
            if ds.ingest:
                click.echo(f"next: {ds.ingest.format(dir=dest)}", err=True)


def _listing(datasets: Iterable[Dataset]) -> str:
    from philly_analyze.fetch import checked_lines
    from philly_analyze.progress import human_bytes

    out = []
    for ds in datasets:
        first, *unchecked = checked_lines(ds)
        out += [
            f"{ds.name}  ({human_bytes(ds.size)}, {len(ds.files)} file{'s' * (len(ds.files) > 1)})",
            f"  {ds.title}",
            f"  source    {ds.homepage}",
            f"  licence   {ds.licence}",
            f"  cite      {ds.citation}",
            f"  ingest    {ds.ingest.format(dir='.')}",
            f"  checked   {first}",
            *(f"  unchecked {line}" for line in unchecked),
            "",
        ]
    out.append(
        "Whatever was checked of its URL, every download is checked against the SHA-256 in "
        "the registry (philly_analyze/data/datasets.toml): a file with other bytes is refused."
    )
    return "\n".join(out) + "\n"
