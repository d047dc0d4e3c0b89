"""The lines of one application in a YARN ResourceManager log (``render_yarn`` merges them).

Hadoop 3.x wording, per class, as the real RM writes it: ``RMAppImpl`` and
``RMAppAttemptImpl`` state changes end with ``on event = ...``, ``RMContainerImpl``
transitions do not; ``SchedulerNode`` assignments report the node's occupancy after the
allocation; ``RMAuditLogger`` fields are tab-separated; ``ApplicationSummary`` is
comma-separated with ``\\,`` escapes and epoch-millisecond times.
"""

from __future__ import annotations

from collections.abc import Iterator

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


def job_lines(
    hist: History, y: dict, rng: np.random.Generator
) -> Iterator[tuple[int, list[tuple[int, int, str]]]]:
    """Per job (submission order): its lines before the horizon as (ms, tie, message)."""
    wl = hist.wl
    horizon_ms = hist.horizon * 1000
    port = int(y["nm_port"])
    mem_gpu = int(y["container_memory_mb_per_gpu"])
    vc_gpu = int(y["container_vcores_per_gpu"])
    mids = hist.cluster.machine_ids
    node_gpus = hist.cluster.gpus
    first = hist.first_started()
    n_ra = len(hist.ra_job)
    used_after = _node_usage(hist)
    ip = rng.integers(1, 255, size=(len(wl.user_names), 2))

    def res(g: int) -> str:
        return f"<memory:{g * mem_gpu}, vCores:{g * vc_gpu}, yarn.io/gpu: {g}>"

    for j in range(wl.num_jobs):
        app = hist.job_ids[j]
        ts, sq = int(hist.app_cluster_ts[j]), int(hist.app_seq[j])
        ep = int(hist.app_epoch[j])
        user = wl.user_names[wl.user[j]]
        vc = wl.vc_names[wl.vc[j]]
        # Milliseconds inside each second keep a job's lines in order: submission in
        # [0, 310) ms of its second, container allocation in [400, 610), ends in [0, 306).
        t = int(wl.submit[j]) * 1000 + int(rng.integers(0, 300))
        uip = f"10.{ip[wl.user[j], 0]}.{ip[wl.user[j], 1]}.{10 + j % 200}"
        out: list[tuple[int, str]] = [
            (t, f"INFO {C_CLIENT}: Application with id {sq} submitted by user {user}"),
            (
                t,
                f"INFO {C_AUDIT}: USER={user}\tIP={uip}\tOPERATION=Submit Application Request\tTARGET=ClientRMService\tRESULT=SUCCESS\tAPPID={app}\tQUEUENAME={vc}",
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
        gpus = int(wl.gpus[j])
        i = int(first[j])
        att_no = 1
        created = t + 5
        app_state = "ACCEPTED"
        final = "FAILED"
        launch_ms = start_ms = -1
        end_ms = -1
        while True:
            aid = f"appattempt_{ts}_{sq:04d}_{att_no:06d}"
            out += [
                (created, f"INFO {C_AMS}: Registering app attempt : {aid}"),
                (
                    created,
                    f"INFO {C_ATT}: {aid} State change from NEW to SUBMITTED on event = START",
                ),
                (
                    created + 1,
                    f"INFO {C_CS}: Added Application Attempt {aid} to scheduler from user: {user}",
                ),
                (
                    created + 1,
                    f"INFO {C_ATT}: {aid} State change from SUBMITTED to SCHEDULED on event = ATTEMPT_ADDED",
                ),
            ]
            if i < 0 or i >= n_ra or hist.ra_job[i] != j:
                # Never got containers: killed in the queue (or still waiting at the end).
                ct = int(hist.sched.cancel_time[j])
                if ct >= 0:
                    k = ct * 1000 + int(rng.integers(0, 400))
                    out += _kill_lines(k, app, aid, user, uip, app_state, None)
                    final = "KILLED"
                    end_ms = k
                else:  # a retry still waiting at the window's end: the app has not ended
                    final = "ACCEPTED"
                break
            s = int(hist.ra_start[i]) * 1000 + int(rng.integers(400, 600))
            a0, a1 = int(hist.ra_pl_offsets[i]), int(hist.ra_pl_offsets[i + 1])
            per_machine: dict[int, int] = {}
            for m in hist.pl_machine[a0:a1].tolist():
                per_machine[m] = per_machine.get(m, 0) + 1
            eprefix = f"e{ep:02d}_" if ep else ""
            conts = []
            for c_no, (m, g) in enumerate(per_machine.items(), start=1):
                cid = f"container_{eprefix}{ts}_{sq:04d}_{att_no:02d}_{c_no:06d}"
                conts.append(cid)
                used, ncont = used_after[(i, m)]
                cap = int(node_gpus[m])
                out += [
                    (s, f"INFO {C_CONT}: {cid} Container Transitioned from NEW to ALLOCATED"),
                    (
                        s,
                        f"INFO {C_NODE}: Assigned container {cid} of capacity {res(g)} on host {mids[m]}:{port}, which has {ncont} containers, {res(used)} used and {res(cap - used)} available after allocation",
                    ),
                    (
                        s,
                        f"INFO {C_AUDIT}: USER={user}\tOPERATION=AM Allocated Container\tTARGET=SchedulerApp\tRESULT=SUCCESS\tAPPID={app}\tCONTAINERID={cid}\tRESOURCE={res(g)}\tQUEUENAME={vc}",
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
                    (
                        s + 3,
                        f"INFO {C_CONT}: {cid} Container Transitioned from ALLOCATED to ACQUIRED",
                    ),
                    (
                        s + 4,
                        f"INFO {C_CONT}: {cid} Container Transitioned from ACQUIRED to RUNNING",
                    ),
                ]
            out.append(
                (
                    s + 5,
                    f"INFO {C_ATT}: {aid} State change from LAUNCHED to RUNNING on event = REGISTERED",
                )
            )
            if app_state == "ACCEPTED":
                out.append(
                    (
                        s + 5,
                        f"INFO {C_APP}: {app} State change from ACCEPTED to RUNNING on event = ATTEMPT_REGISTERED",
                    )
                )
                app_state = "RUNNING"
            if launch_ms < 0:
                launch_ms, start_ms = s + 3, s
            oc = int(hist.ra_outcome[i])
            if oc == R_RUNNING:  # the app has not ended (no summary line)
                final = "RUNNING"
                break
            e = int(hist.ra_end[i]) * 1000 + int(rng.integers(0, 300))
            end_ms = e
            cstate = "COMPLETED"
            if oc == A_PASSED:
                out += [
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
                    (
                        e + 3,
                        f"INFO {C_CONT}: {c} Container Transitioned from RUNNING to {cstate}",
                    )
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
                        f"INFO {C_AUDIT}: USER={user}\tOPERATION=Application Finished - Succeeded\tTARGET=RMAppManager\tRESULT=SUCCESS\tAPPID={app}",
                    ),
                ]
                final = "FINISHED"
                break
            if oc == A_KILLED:
                out += _kill_lines(e, app, aid, user, uip, app_state, conts)
                final = "KILLED"
                break
            assert oc == A_FAILED
            out += [
                (
                    e,
                    f"INFO {C_CONT}: {c} Container Transitioned from RUNNING to {cstate}",
                )
                for c in conts
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
            nxt = i + 1
            more = int(hist.wl.att_idx[hist.ra[i]]) < int(wl.num_attempts[j]) - 1
            if more:
                out += [
                    (
                        e + 3,
                        f"INFO {C_APP}: The number of failed attempts is {att_no}. The max attempt is {int(wl.num_attempts[j]) + 2}",
                    ),
                    (
                        e + 3,
                        f"INFO {C_APP}: {app} State change from RUNNING to ACCEPTED on event = ATTEMPT_FAILED",
                    ),
                ]
                app_state = "ACCEPTED"
                att_no += 1
                created = e + 4
                i = nxt if nxt < n_ra and hist.ra_job[nxt] == j else -1
                continue
            out += [
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
                    f"INFO {C_AUDIT}: USER={user}\tOPERATION=Application Finished - Failed\tTARGET=RMAppManager\tRESULT=FAILURE\tDESCRIPTION=App failed with state: FAILED\tPERMISSIONS=Application {app} failed {att_no} times due to AM Container for {aid} exited with  exitCode: 1\tAPPID={app}",
                ),
            ]
            final = "FAILED"
            break
        if end_ms >= 0 and final in ("FINISHED", "FAILED", "KILLED"):
            status = {"FINISHED": "SUCCEEDED", "FAILED": "FAILED", "KILLED": "KILLED"}[final]
            host = (
                mids[int(hist.pl_machine[hist.ra_pl_offsets[first[j]]])] if first[j] >= 0 else "N/A"
            )
            epoch0 = hist.window.start_epoch * 1000
            out.append(
                (
                    end_ms + 6,
                    f"INFO {C_SUMMARY}: appId={app},name={_app_name(hist, j)},user={user},queue={vc},state={final},"
                    f"trackingUrl=http://rm1:8088/proxy/{app}/,appMasterHost={host},"
                    f"submitTime={epoch0 + t},startTime={epoch0 + (start_ms if start_ms >= 0 else t)},"
                    f"launchTime={epoch0 + (launch_ms if launch_ms >= 0 else t)},finishTime={epoch0 + end_ms},"
                    f"finalStatus={status},memorySeconds=0,vcoreSeconds=0,preemptedMemorySeconds=0,"
                    f"preemptedVcoreSeconds=0,preemptedAMContainers=0,preemptedNonAMContainers=0,"
                    f"preemptedResources=<memory:0\\, vCores:0>,applicationType=YARN,resourceSeconds=0 MB-seconds\\, 0 vcore-seconds\\, {gpus} yarn.io/gpu",
                )
            )
        yield j, [(tm, j * 1000 + k, msg) for k, (tm, msg) in enumerate(out) if tm < horizon_ms]


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
