"""The synthesizer's codes for job statuses, attempt outcomes and frameworks."""

from __future__ import annotations

#: Job statuses (codes), in Table 6's order.
PASSED, KILLED, UNSUCCESSFUL = 0, 1, 2
#: Attempt outcomes (codes): the job statuses' last attempts, plus failed.
A_PASSED, A_KILLED, A_FAILED = 0, 1, 2
FRAMEWORKS = ("cntk", "tensorflow", "pytorch")
