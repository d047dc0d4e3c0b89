"""Failure messages for failed attempts' logs, taken from the signature rules.

The rules file ``philly_analyze/data/failure_signatures.toml`` (loaded by
``philly_analyze.failures.load_rules()``) is the one definition of what each Table 7 reason
looks like in a log: every rule carries ``examples``, real log lines it matches. A failed
attempt's log ends with one example of its true reason, chosen at random, so the classifier is
tested on the lines it was written for.

Until that module is available (it is built on another branch), ``INTERIM_EXAMPLES`` holds one
line per reason taken from ``formats.md`` §4 and the real failure excerpts it cites; it is used
only when ``philly_analyze.failures`` cannot be imported.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Reason -> example lines, used only while ``philly_analyze.failures`` is missing.
INTERIM_EXAMPLES: dict[str, list[str]] = {
    "CPU out of memory": ["MemoryError"],
    "Incorrect inputs": [
        "FileNotFoundError: [Errno 2] No such file or directory: '/hdfs/data/train.ctf'"
    ],
    "Semantic error": ["AttributeError: module 'tensorflow' has no attribute 'contrib'"],
    "Core dump": ["Segmentation fault (core dumped)"],
    "Invalid mem access": ["RuntimeError: CUDA error: an illegal memory access was encountered"],
    "Model ckpt error": [
        "java.net.ConnectException: Call From host/10.0.0.1 to nn:9000 failed on connection exception: java.net.ConnectException: Connection refused"
    ],
    "CUDA failure": [
        "CUDA failure 2: out of memory ; GPU=0 ; hostname=m17 ; expr=cudaMalloc((void**) &deviceBufferPtr, sizeof(AllocatedElemType) * AsMultipleOf(numElements, 2))"
    ],
    "Syntax error": ["SyntaxError: invalid syntax"],
    "Traceback from crash": ["Traceback (most recent call last):"],
    "MPI error": [
        "mpirun noticed that process rank 3 with PID 1234 on node n17 exited on signal 11 (Segmentation fault)."
    ],
    "GPU out of memory": [
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 11.17 GiB total capacity; 9.12 GiB already allocated)"
    ],
    "MPI runtime failure": [
        "mpirun noticed that process rank 0 with PID 77967 on node n342 exited on signal 9 (Killed)."
    ],
    "Permission error": ["PermissionError: [Errno 13] Permission denied: '/hdfs/output/model'"],
    "Import error": ["ImportError: No module named 'cntk'"],
    "Job preempted": ["Container preempted by scheduler"],
    "CUDA init failed": ["RuntimeError: cuda runtime error (3) : initialization error"],
    "Model diverged": ["ValueError: Loss is NaN; the model diverged"],
    "CUDA ver. mismatch": [
        "RuntimeError: CUDA driver version is insufficient for CUDA runtime version"
    ],
    "GPU ECC error": ["RuntimeError: CUDA error: uncorrectable ECC error encountered"],
    "Output node error": ["ERROR: output node 'ce' not found in the network"],
    "Cannot load libs": [
        "OSError: libcudnn.so.7: cannot open shared object file: No such file or directory"
    ],
}
#: The last line of a log whose failure matches no signature.
NO_SIGNATURE_LINE = "process exited with status 1"


def _get(obj: Any, key: str) -> Any:
    return obj[key] if isinstance(obj, dict) else getattr(obj, key)


def load_examples() -> tuple[dict[str, list[str]], str]:
    """Reason name -> example lines, and where they came from (``rules`` or ``interim``)."""
    if importlib.util.find_spec("philly_analyze.failures") is None:
        return dict(INTERIM_EXAMPLES), "interim"
    failures = importlib.import_module("philly_analyze.failures")
    out: dict[str, list[str]] = {}
    for reason in failures.load_rules():
        name = str(_get(reason, "name"))
        lines = [str(x) for rule in _get(reason, "rules") for x in (_get(rule, "examples") or [])]
        if lines:
            out[name] = lines
    return out, "rules"
