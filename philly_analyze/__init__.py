"""philly-analyze: analyse multi-tenant GPU cluster traces and replay them through other schedulers.

The command-line interface (``philly-analyze``) is a thin layer over this library:
``philly_analyze.ingest`` (raw sources -> store), ``philly_analyze.analysis`` (the ATC'19
analyses), ``philly_analyze.report`` (rendering), ``philly_analyze.sim`` (replay and MuxFlow)
and ``philly_analyze.synth`` (synthetic clusters).
"""

__version__ = "0.1.0"
