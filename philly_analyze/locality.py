"""The locality constraint: one definition shared by the replay scheduler and the causes of
waiting (``waitcause``: a wait is "fragmentation" when the VC had quota left and enough GPUs
were free, but no placement meeting this constraint was).

Philly placed a gang job on as few servers as possible:

- a job that fits on one server (``n <= largest server``) needs one server with ``n`` free GPUs;
- a larger job needs ``ceil(n / largest server)`` servers, each with all its GPUs free
  (Philly consolidated big jobs on whole 8-GPU servers), in one rack when racks are known.

The relaxed constraint only needs ``n`` free GPUs anywhere.
"""

from __future__ import annotations

import numpy as np


def servers_needed(n: int, server_size: int) -> int:
    """Fewest servers of ``server_size`` GPUs that hold ``n`` GPUs."""
    return max(1, -(-n // server_size))


def fits_strict(
    free: np.ndarray,
    size: np.ndarray,
    n: int,
    rack: np.ndarray | None = None,
) -> bool:
    """Whether a placement of ``n`` GPUs meeting the locality constraint is free now.

    ``free[i]``/``size[i]``: free and total GPUs of server i; ``rack[i]``: its rack id (ints)
    or None when unknown (then the whole cluster counts as one rack)."""
    if n <= 0:
        return True
    largest = int(size.max()) if len(size) else 0
    if largest == 0:
        return False
    if n <= largest:
        return bool((free >= n).any())
    k = servers_needed(n, largest)
    whole = (free == size) & (size == largest)
    if rack is None:
        return int(whole.sum()) >= k
    counts = np.bincount(rack[whole], minlength=int(rack.max()) + 1 if len(rack) else 0)
    return bool((counts >= k).any())


def fits_relaxed(free: np.ndarray, n: int) -> bool:
    """Whether ``n`` GPUs are free anywhere (no locality constraint)."""
    return int(free.sum()) >= n


def fits_strict_headroom(
    max_free: np.ndarray | int,
    whole: np.ndarray | int,
    largest: int,
    n: np.ndarray | int,
) -> np.ndarray:
    """``fits_strict`` evaluated from a summary of the cluster state, vectorised over states.

    ``max_free``: the most free GPUs on any one server; ``whole``: the most wholly free servers
    of the largest size in one rack (in the whole cluster when racks are unknown); ``largest``:
    the largest server size. For a state with that summary this returns exactly what
    ``fits_strict(free, size, n, rack)`` returns (a test checks it), so an event sweep can keep
    two numbers per moment instead of every server's free count."""
    n_arr = np.asarray(n)
    if largest <= 0:
        return np.asarray(n_arr <= 0) & np.ones(np.shape(max_free), bool)
    need = -(-n_arr // largest)
    small = np.asarray(max_free) >= n_arr
    big = np.asarray(whole) >= need
    return np.where(n_arr <= 0, True, np.where(n_arr <= largest, small, big))
