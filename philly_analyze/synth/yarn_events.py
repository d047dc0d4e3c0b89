"""The lines of one application in a YARN ResourceManager log (``render_yarn`` merges them).

Hadoop 3.x wording, per class, as the real RM writes it: ``RMAppImpl`` and
``RMAppAttemptImpl`` state changes end with ``on event = ...``, ``RMContainerImpl``
transitions do not; ``SchedulerNode`` assignments report the node's occupancy after the
allocation; ``RMAuditLogger`` fields are tab-separated; ``ApplicationSummary`` is
comma-separated with ``\\,`` escapes and epoch-millisecond times.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from philly_analyze.synth.history import R_RUNNING, History
from philly_analyze.synth.workload import A_FAILED, A_KILLED, A_PASSED, FRAMEWORKS

PKG = "org.apache.hadoop.yarn.server.resourcemanager"
C_APP = f"{PKG}.rmapp.RMAppImpl"
C_ATT = f"{PKG}.rmapp.attempt.RMAppAttemptImpl"
C_CONT = f"{PKG}.rmcontainer.RMContainerImpl"
C_CS = f"{PKG}.scheduler.capacity.CapacityScheduler"
C_NODE = f"{PKG}.scheduler.SchedulerNode"
C_AUDIT = f"{PKG}.RMAuditLogger"
C_CLIENT = f"{PKG}.ClientRMService"
C_SUMMARY = f"{PKG}.RMAppManager$ApplicationSummary"
C_AMS = f"{PKG}.ApplicationMasterService"
C_RM = f"{PKG}.ResourceManager"
C_MGR = f"{PKG}.RMAppManager"


@dataclass
class _Rm:
    """What every application's lines share: the history, the node list and the resource
    units the RM prints (memory and vcores per GPU, from the calibration's ``yarn`` table)."""

    hist: History
    port: int
    mem_gpu: int
    vc_gpu: int
    used_after: dict[tuple[int, int], tuple[int, int]]

    def res(self, g: int) -> str:
        """A resource vector of ``g`` GPUs as the RM prints it."""
        return f"<memory:{g * self.mem_gpu}, vCores:{g * self.vc_gpu}, yarn.io/gpu: {g}>"


@dataclass
class _App:
    """One application being written: its names, its lines so far and the state the RM
    would be in (the next line's wording depends on it)."""

    j: int
    app: str
    ts: int
    sq: int
    ep: int
    user: str
    vc: str
    uip: str
    t: int
    out: list[tuple[int, str]] = field(default_factory=list)
    att_no: int = 1
    app_state: str = "ACCEPTED"
    final: str = "FAILED"
    launch_ms: int = -1
    start_ms: int = -1
    end_ms: int = -1


def job_lines(
    hist: History, y: dict, rng: np.random.Generator
) -> Iterator[tuple[int, list[tuple[int, int, str]]]]:
    """Per job (submission order): its lines before the horizon as (ms, tie, message)."""
    wl = hist.wl
    horizon_ms = hist.horizon * 1000
    rm = _Rm(
        hist,
        int(y["nm_port"]),
        int(y["container_memory_mb_per_gpu"]),
        int(y["container_vcores_per_gpu"]),
        _node_usage(hist),
    )
    first = hist.first_started()
    # The random draws below happen in a fixed order (user IPs first, then per job its
    # submission, allocation and end milliseconds): the sample's bytes depend on it.
    ip = rng.integers(1, 255, size=(len(wl.user_names), 2))
    for j in range(wl.num_jobs):
        user_no = int(wl.user[j])
        # Milliseconds inside each second keep a job's lines in order: submission in
        # [0, 310) ms of its second, container allocation in [400, 610), ends in [0, 306).
        a = _App(
            j=j,
            app=hist.job_ids[j],
            ts=int(hist.app_cluster_ts[j]),
            sq=int(hist.app_seq[j]),
            ep=int(hist.app_epoch[j]),
            user=wl.user_names[user_no],
            vc=wl.vc_names[wl.vc[j]],
            t=int(wl.submit[j]) * 1000 + int(rng.integers(0, 300)),
            uip=f"10.{ip[user_no, 0]}.{ip[user_no, 1]}.{10 + j % 200}",
        )
        a.out = _submit_lines(a)
        _attempts(rm, a, int(first[j]), rng)
        if a.end_ms >= 0 and a.final in ("FINISHED", "FAILED", "KILLED"):
            a.out.append(_summary_line(hist, a, int(first[j])))
        yield j, [(tm, j * 1000 + k, msg) for k, (tm, msg) in enumerate(a.out) if tm < horizon_ms]


def _submit_lines(a: _App) -> list[tuple[int, str]]:
    """The submission of an application, up to its acceptance into the queue."""
    t, app, user, vc = a.t, a.app, a.user, a.vc
    return [
        (t, f"INFO {C_CLIENT}: Application with id {a.sq} submitted by user {user}"),
        (
            t,
            f"INFO {C_AUDIT}: USER={user}\tIP={a.uip}\tOPERATION=Submit Application Request\tTARGET=ClientRMService\tRESULT=SUCCESS\tAPPID={app}\tQUEUENAME={vc}",
        ),
        (t + 1, f"INFO {C_APP}: Storing application with id {app}"),
        (t + 1, f"INFO {C_APP}: {app} State change from NEW to NEW_SAVING on event = START"),
        (
            t + 3,
            f"INFO {C_APP}: {app} State change from NEW_SAVING to SUBMITTED on event = APP_NEW_SAVED",
        ),
        (t + 4, f"INFO {C_CS}: Accepted application {app} from user: {user}, in queue: {vc}"),
        (
            t + 4,
            f"INFO {C_APP}: {app} State change from SUBMITTED to ACCEPTED on event = APP_ACCEPTED",
        ),
    ]


def _attempts(rm: _Rm, a: _App, i: int, rng: np.random.Generator) -> None:
    """Append the lines of the application's attempts, from realized attempt ``i`` on
    (-1: none started), and leave its final state and times in ``a``."""
    hist = rm.hist
    wl = hist.wl
    n_ra = len(hist.ra_job)
    created = a.t + 5
    while True:
        aid = f"appattempt_{a.ts}_{a.sq:04d}_{a.att_no:06d}"
        a.out += _attempt_added_lines(a, aid, created)
        if i < 0 or i >= n_ra or hist.ra_job[i] != a.j:
            _never_allocated(hist, a, aid, rng)
            return
        s = int(hist.ra_start[i]) * 1000 + int(rng.integers(400, 600))
        conts = _allocate(rm, a, aid, i, s)
        oc = int(hist.ra_outcome[i])
        if oc == R_RUNNING:  # the app has not ended (no summary line)
            a.final = "RUNNING"
            return
        e = int(hist.ra_end[i]) * 1000 + int(rng.integers(0, 300))
        a.end_ms = e
        if oc == A_PASSED:
            a.out += _finished_lines(a, aid, conts, e)
            a.final = "FINISHED"
            return
        if oc == A_KILLED:
            a.out += _kill_lines(e, a.app, aid, a.user, a.uip, a.app_state, conts)
            a.final = "KILLED"
            return
        assert oc == A_FAILED
        a.out += _attempt_failed_lines(aid, conts, e)
        if int(wl.att_idx[hist.ra[i]]) >= int(wl.num_attempts[a.j]) - 1:
            a.out += _app_failed_lines(a, aid, e)
            a.final = "FAILED"
            return
        a.out += _retry_lines(a, int(wl.num_attempts[a.j]), e)
        a.app_state = "ACCEPTED"
        a.att_no += 1
        created = e + 4
        nxt = i + 1
        i = nxt if nxt < n_ra and hist.ra_job[nxt] == a.j else -1


def _attempt_added_lines(a: _App, aid: str, created: int) -> list[tuple[int, str]]:
    """A new attempt registered and added to the scheduler."""
    return [
        (created, f"INFO {C_AMS}: Registering app attempt : {aid}"),
        (
            created,
            f"INFO {C_ATT}: {aid} State change from NEW to SUBMITTED on event = START",
        ),
        (
            created + 1,
            f"INFO {C_CS}: Added Application Attempt {aid} to scheduler from user: {a.user}",
        ),
        (
            created + 1,
            f"INFO {C_ATT}: {aid} State change from SUBMITTED to SCHEDULED on event = ATTEMPT_ADDED",
        ),
    ]


def _never_allocated(hist: History, a: _App, aid: str, rng: np.random.Generator) -> None:
    """An attempt that never got containers: killed in the queue (or still waiting at the
    end)."""
    ct = int(hist.sched.cancel_time[a.j])
    if ct >= 0:
        k = ct * 1000 + int(rng.integers(0, 400))
        a.out += _kill_lines(k, a.app, aid, a.user, a.uip, a.app_state, None)
        a.final = "KILLED"
        a.end_ms = k
    else:  # a retry still waiting at the window's end: the app has not ended
        a.final = "ACCEPTED"


def _allocate(rm: _Rm, a: _App, aid: str, i: int, s: int) -> list[str]:
    """Append the allocation and launch of realized attempt ``i``'s containers (one per
    machine) at ``s`` ms; return the container ids."""
    hist = rm.hist
    a0, a1 = int(hist.ra_pl_offsets[i]), int(hist.ra_pl_offsets[i + 1])
    per_machine: dict[int, int] = {}
    for m in hist.pl_machine[a0:a1].tolist():
        per_machine[m] = per_machine.get(m, 0) + 1
    eprefix = f"e{a.ep:02d}_" if a.ep else ""
    conts = []
    out = a.out
    for c_no, (m, g) in enumerate(per_machine.items(), start=1):
        cid = f"container_{eprefix}{a.ts}_{a.sq:04d}_{a.att_no:02d}_{c_no:06d}"
        conts.append(cid)
        used, ncont = rm.used_after[(i, m)]
        cap = int(hist.cluster.gpus[m])
        host = hist.cluster.machine_ids[m]
        out += [
            (s, f"INFO {C_CONT}: {cid} Container Transitioned from NEW to ALLOCATED"),
            (
                s,
                f"INFO {C_NODE}: Assigned container {cid} of capacity {rm.res(g)} on host {host}:{rm.port}, which has {ncont} containers, {rm.res(used)} used and {rm.res(cap - used)} available after allocation",
            ),
            (
                s,
                f"INFO {C_AUDIT}: USER={a.user}\tOPERATION=AM Allocated Container\tTARGET=SchedulerApp\tRESULT=SUCCESS\tAPPID={a.app}\tCONTAINERID={cid}\tRESOURCE={rm.res(g)}\tQUEUENAME={a.vc}",
            ),
        ]
    out += [
        (
            s + 1,
            f"INFO {C_ATT}: {aid} State change from SCHEDULED to ALLOCATED_SAVING on event = CONTAINER_ALLOCATED",
        ),
        (
            s + 2,
            f"INFO {C_ATT}: {aid} State change from ALLOCATED_SAVING to ALLOCATED on event = ATTEMPT_NEW_SAVED",
        ),
        (
            s + 3,
            f"INFO {C_ATT}: {aid} State change from ALLOCATED to LAUNCHED on event = LAUNCHED",
        ),
    ]
    for cid in conts:
        out += [
            (s + 3, f"INFO {C_CONT}: {cid} Container Transitioned from ALLOCATED to ACQUIRED"),
            (s + 4, f"INFO {C_CONT}: {cid} Container Transitioned from ACQUIRED to RUNNING"),
        ]
    _registered(a, aid, s)
    return conts


def _registered(a: _App, aid: str, s: int) -> None:
    """The attempt's master registered: the attempt (and, the first time, the app) runs."""
    a.out.append(
        (
            s + 5,
            f"INFO {C_ATT}: {aid} State change from LAUNCHED to RUNNING on event = REGISTERED",
        )
    )
    if a.app_state == "ACCEPTED":
        a.out.append(
            (
                s + 5,
                f"INFO {C_APP}: {a.app} State change from ACCEPTED to RUNNING on event = ATTEMPT_REGISTERED",
            )
        )
        a.app_state = "RUNNING"
    if a.launch_ms < 0:  # the summary line reports the first attempt's start and launch
        a.launch_ms, a.start_ms = s + 3, s


def _finished_lines(a: _App, aid: str, conts: list[str], e: int) -> list[tuple[int, str]]:
    """An attempt (and so its application) that ended successfully at ``e`` ms."""
    app = a.app
    out = [
        (
            e,
            f"INFO {C_ATT}: {aid} State change from RUNNING to FINAL_SAVING on event = UNREGISTERED",
        ),
        (
            e + 1,
            f"INFO {C_ATT}: {aid} State change from FINAL_SAVING to FINISHING on event = ATTEMPT_UPDATE_SAVED",
        ),
        (
            e + 1,
            f"INFO {C_APP}: {app} State change from RUNNING to FINAL_SAVING on event = ATTEMPT_UNREGISTERED",
        ),
        (
            e + 2,
            f"INFO {C_APP}: {app} State change from FINAL_SAVING to FINISHING on event = APP_UPDATE_SAVED",
        ),
    ]
    out += [
        (e + 3, f"INFO {C_CONT}: {c} Container Transitioned from RUNNING to COMPLETED")
        for c in conts
    ]
    out += [
        (
            e + 4,
            f"INFO {C_ATT}: {aid} State change from FINISHING to FINISHED on event = CONTAINER_FINISHED",
        ),
        (e + 4, f"INFO {C_CS}: Application Attempt {aid} is done. finalState=FINISHED"),
        (
            e + 5,
            f"INFO {C_APP}: {app} State change from FINISHING to FINISHED on event = ATTEMPT_FINISHED",
        ),
        (
            e + 5,
            f"INFO {C_AUDIT}: USER={a.user}\tOPERATION=Application Finished - Succeeded\tTARGET=RMAppManager\tRESULT=SUCCESS\tAPPID={app}",
        ),
    ]
    return out


def _attempt_failed_lines(aid: str, conts: list[str], e: int) -> list[tuple[int, str]]:
    """An attempt that failed at ``e`` ms: its containers complete, then the attempt fails."""
    out = [
        (e, f"INFO {C_CONT}: {c} Container Transitioned from RUNNING to COMPLETED") for c in conts
    ]
    out += [
        (
            e + 1,
            f"INFO {C_ATT}: {aid} State change from RUNNING to FINAL_SAVING on event = CONTAINER_FINISHED",
        ),
        (
            e + 2,
            f"INFO {C_ATT}: {aid} State change from FINAL_SAVING to FAILED on event = ATTEMPT_UPDATE_SAVED",
        ),
        (e + 2, f"INFO {C_CS}: Application Attempt {aid} is done. finalState=FAILED"),
    ]
    return out


def _retry_lines(a: _App, num_attempts: int, e: int) -> list[tuple[int, str]]:
    """A failed attempt with retries left: the application goes back to the queue."""
    return [
        (
            e + 3,
            f"INFO {C_APP}: The number of failed attempts is {a.att_no}. The max attempt is {num_attempts + 2}",
        ),
        (
            e + 3,
            f"INFO {C_APP}: {a.app} State change from RUNNING to ACCEPTED on event = ATTEMPT_FAILED",
        ),
    ]


def _app_failed_lines(a: _App, aid: str, e: int) -> list[tuple[int, str]]:
    """The last attempt failed: the application fails."""
    app = a.app
    return [
        (
            e + 3,
            f"INFO {C_APP}: {app} State change from RUNNING to FINAL_SAVING on event = ATTEMPT_FAILED",
        ),
        (
            e + 4,
            f"INFO {C_APP}: {app} State change from FINAL_SAVING to FAILED on event = APP_UPDATE_SAVED",
        ),
        (
            e + 4,
            f"INFO {C_AUDIT}: USER={a.user}\tOPERATION=Application Finished - Failed\tTARGET=RMAppManager\tRESULT=FAILURE\tDESCRIPTION=App failed with state: FAILED\tPERMISSIONS=Application {app} failed {a.att_no} times due to AM Container for {aid} exited with  exitCode: 1\tAPPID={app}",
        ),
    ]


def _summary_line(hist: History, a: _App, first: int) -> tuple[int, str]:
    """The ``ApplicationSummary`` line of an ended application (epoch-millisecond times)."""
    status = {"FINISHED": "SUCCEEDED", "FAILED": "FAILED", "KILLED": "KILLED"}[a.final]
    mids = hist.cluster.machine_ids
    host = mids[int(hist.pl_machine[hist.ra_pl_offsets[first]])] if first >= 0 else "N/A"
    epoch0 = hist.window.start_epoch * 1000
    t = a.t
    gpus = int(hist.wl.gpus[a.j])
    return (
        a.end_ms + 6,
        f"INFO {C_SUMMARY}: appId={a.app},name={_app_name(hist, a.j)},user={a.user},queue={a.vc},state={a.final},"
        f"trackingUrl=http://rm1:8088/proxy/{a.app}/,appMasterHost={host},"
        f"submitTime={epoch0 + t},startTime={epoch0 + (a.start_ms if a.start_ms >= 0 else t)},"
        f"launchTime={epoch0 + (a.launch_ms if a.launch_ms >= 0 else t)},finishTime={epoch0 + a.end_ms},"
        f"finalStatus={status},memorySeconds=0,vcoreSeconds=0,preemptedMemorySeconds=0,"
        f"preemptedVcoreSeconds=0,preemptedAMContainers=0,preemptedNonAMContainers=0,"
        f"preemptedResources=<memory:0\\, vCores:0>,applicationType=YARN,resourceSeconds=0 MB-seconds\\, 0 vcore-seconds\\, {gpus} yarn.io/gpu",
    )


def _kill_lines(
    e: int, app: str, aid: str, user: str, uip: str, app_state: str, conts: list[str] | None
) -> list[tuple[int, str]]:
    """A user's kill of a queued or running application."""
    att_from = "RUNNING" if conts else "SCHEDULED"
    out = [
        (
            e,
            f"INFO {C_AUDIT}: USER={user}\tIP={uip}\tOPERATION=Kill Application Request\tTARGET=ClientRMService\tRESULT=SUCCESS\tAPPID={app}",
        ),
        (e, f"INFO {C_APP}: {app} State change from {app_state} to KILLING on event = KILL"),
        (
            e + 1,
            f"INFO {C_ATT}: {aid} State change from {att_from} to FINAL_SAVING on event = KILL",
        ),
        (
            e + 2,
            f"INFO {C_ATT}: {aid} State change from FINAL_SAVING to KILLED on event = ATTEMPT_UPDATE_SAVED",
        ),
    ]
    out += [
        (e + 2, f"INFO {C_CONT}: {c} Container Transitioned from RUNNING to KILLED")
        for c in conts or []
    ]
    out += [
        (e + 3, f"INFO {C_CS}: Application Attempt {aid} is done. finalState=KILLED"),
        (
            e + 3,
            f"INFO {C_APP}: {app} State change from KILLING to FINAL_SAVING on event = ATTEMPT_KILLED",
        ),
        (
            e + 4,
            f"INFO {C_APP}: {app} State change from FINAL_SAVING to KILLED on event = APP_UPDATE_SAVED",
        ),
        (
            e + 4,
            f"INFO {C_AUDIT}: USER={user}\tOPERATION=Application Finished - Killed\tTARGET=RMAppManager\tRESULT=SUCCESS\tAPPID={app}",
        ),
    ]
    return out


def _app_name(hist: History, j: int) -> str:
    """The application name the synthesizer gives job ``j`` (its framework and number)."""
    return f"{FRAMEWORKS[int(hist.wl.framework[j])]}-job-{int(hist.app_seq[j])}"


def _node_usage(hist: History) -> dict[tuple[int, int], tuple[int, int]]:
    """(realized attempt, machine) -> (GPUs in use on that machine, containers on it) right
    after the attempt's container was allocated there."""
    rows: list[tuple[int, int, int, int, int]] = []  # machine, time, kind(0 end,1 start), ra, g
    for i in range(len(hist.ra)):
        a0, a1 = int(hist.ra_pl_offsets[i]), int(hist.ra_pl_offsets[i + 1])
        ms, cnt = np.unique(hist.pl_machine[a0:a1], return_counts=True)
        end = int(hist.ra_end[i]) if hist.ra_end[i] >= 0 else 1 << 62
        for m, g in zip(ms.tolist(), cnt.tolist(), strict=True):
            rows.append((m, int(hist.ra_start[i]), 1, i, g))
            rows.append((m, end, 0, i, g))
    rows.sort()
    out: dict[tuple[int, int], tuple[int, int]] = {}
    cur_m, used, conts = -1, 0, 0
    for m, _t, kind, i, g in rows:
        if m != cur_m:
            cur_m, used, conts = m, 0, 0
        if kind:
            used += g
            conts += 1
            out[(i, m)] = (used, conts)
        else:
            used -= g
            conts -= 1
    return out
