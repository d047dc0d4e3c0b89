"""Per-attempt framework logs: ``framework/<application_id>/attempt_<idx>/stdout.txt``.

``idx`` is the 0-based attempt index of the published trace. Each log holds a short framework
banner, one or two progress lines per epoch the attempt finished (``formats.md`` §4 shapes), and:

- CNTK (``MM/dd/yyyy HH:mm:ss:`` prefixes, like CNTK's own logs): a minibatch line and
  ``Finished Epoch[ e of N]: [Training] ce = <loss> * ...`` per epoch, ``__COMPLETED__`` at the
  end of a passed job;
- TensorFlow: ``INFO:tensorflow:loss = <loss>, step = <e * steps_per_epoch>`` per epoch (unit
  ``step``), checkpoint lines, ``Loss for final step`` when the job passed;
- PyTorch (imagenet example shape): ``Epoch: [e-1][i/n]\\t... Loss <loss> (<loss>)`` at the
  end of each epoch (PyTorch numbers epochs from 0);

then, for a failed attempt, a failure message: an example line of its true Table 7 reason from
the signature rules (a Python traceback header first for Python errors). Killed attempts just
stop (a SIGTERM message would read as "Job preempted"); attempts still running at the window's
end stop at the last epoch before it.
The loss printed for epoch ``e`` is the ground truth's (``ground_truth/loss.parquet``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from philly_analyze.synth.calibration import Calibration
from philly_analyze.synth.clock import Clock
from philly_analyze.synth.failure_text import NO_SIGNATURE_LINE, load_examples
from philly_analyze.synth.history import History
from philly_analyze.synth.workload import A_FAILED, A_PASSED, FRAMEWORKS

#: Steps per epoch of TensorFlow jobs (their loss lines count steps).
TF_STEPS_PER_EPOCH = 500
PYTORCH_ITERS = 5005
_PY_ERRORS = ("Error:", "Error ", "Exception")


def steps_per_epoch(framework: int) -> int:
    """How many logged units an epoch is (1 except TensorFlow's steps)."""
    return TF_STEPS_PER_EPOCH if FRAMEWORKS[framework] == "tensorflow" else 1


def write_framework(
    out: Path, cal: Calibration, hist: History, clock: Clock, rng: np.random.Generator
) -> list[Path]:
    """Write one log per realized attempt; returns the files."""
    wl = hist.wl
    c = hist.curves
    examples = load_examples()
    reasons = cal.reasons
    # Epochs finished inside the window, grouped by the workload attempt that finished them.
    ran = (hist.ep_time >= 0) & (hist.ep_time < hist.horizon)
    ep_job = np.repeat(np.arange(wl.num_jobs), c.epochs)
    ep_no = np.arange(len(ep_job)) - c.offsets[ep_job] + 1
    order = np.flatnonzero(ran)
    order = order[np.argsort(hist.ep_attempt[order], kind="stable")]
    ep_att_sorted = hist.ep_attempt[order]
    stamps = clock.strings(hist.window.start_epoch + hist.ep_time[order])
    start_stamps = clock.strings(hist.window.start_epoch + hist.ra_start)
    end_stamps = clock.strings(hist.window.start_epoch + np.maximum(hist.ra_end, 0))
    bounds = (
        np.searchsorted(ep_att_sorted, hist.ra, side="left"),
        np.searchsorted(ep_att_sorted, hist.ra, side="right"),
    )
    pick = rng.random(len(hist.ra))
    root = str(out)
    files: list[Path] = []
    for i in range(len(hist.ra)):
        j = int(hist.ra_job[i])
        fw = FRAMEWORKS[int(wl.framework[j])]
        planned = int(c.planned[j])
        lines = _banner(fw, start_stamps[i], int(wl.gpus[j]))
        for k in range(int(bounds[0][i]), int(bounds[1][i])):
            e_idx = int(order[k])
            e = int(ep_no[e_idx])
            lines += _progress(fw, e, planned, float(c.loss[e_idx]), stamps[k])
        oc = int(hist.ra_outcome[i])
        last_job_attempt = int(wl.att_idx[hist.ra[i]]) == int(wl.num_attempts[j]) - 1
        if oc == A_FAILED:
            lines += _failure_lines(fw, examples.get(reasons[int(hist.ra_reason[i])].name), pick[i])
        elif oc == A_PASSED and last_job_attempt:
            lines += _finish(
                fw, end_stamps[i], float(c.loss[c.offsets[j + 1] - 1]) if c.epochs[j] else 0.0
            )
        d = os.path.join(root, hist.job_ids[j], f"attempt_{int(hist.ra_idx[i])}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "stdout.txt")
        with open(path, "w", newline="") as f:
            f.write("\n".join(lines) + "\n")
        files.append(Path(path))
    return files


def _failure_lines(fw: str, choices: list[str] | None, pick: float) -> list[str]:
    """The last lines of a failed attempt: an example message of its failure reason (chosen
    by ``pick`` in [0, 1)), under a Python traceback header where a Python framework would
    print one; a line no signature matches when the reason has no example."""
    if not choices:
        return [NO_SIGNATURE_LINE]
    msg = choices[int(pick * len(choices))]
    lines: list[str] = []
    if fw != "cntk" and any(x in msg for x in _PY_ERRORS) and not msg.startswith("Traceback"):
        lines += [
            "Traceback (most recent call last):",
            '  File "train.py", line 212, in <module>',
            "    main(args)",
        ]
    lines.append(msg)
    return lines


def _cntk_stamp(s: str) -> str:
    """``YYYY-MM-DD HH:MM:SS`` -> CNTK's ``MM/dd/yyyy HH:mm:ss``."""
    return f"{s[5:7]}/{s[8:10]}/{s[0:4]} {s[11:]}"


def _banner(fw: str, stamp: str, gpus: int) -> list[str]:
    if fw == "cntk":
        t = _cntk_stamp(stamp)
        return [
            f"{t}: -------------------------------------------------------------------",
            f"{t}: Build info: ",
            f"{t}: \t\tBuild type: release",
            f"{t}: \t\tBuild target: GPU",
            f"{t}: \t\tWith 1bit-SGD: yes",
            f"{t}: -------------------------------------------------------------------",
            f"{t}: Using {gpus} GPU(s)",
        ]
    if fw == "tensorflow":
        return [
            f"{stamp}.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1030] Found device 0 with properties: ",
            "INFO:tensorflow:Create CheckpointSaverHook.",
            "INFO:tensorflow:Graph was finalized.",
        ]
    return [
        f"=> creating model 'resnet50' on {gpus} GPU(s)",
        "=> using pre-trained model: False",
    ]


def _progress(fw: str, e: int, planned: int, loss: float, stamp: str) -> list[str]:
    if fw == "cntk":
        t = _cntk_stamp(stamp)
        errs = min(99.0, 40.0 * loss)
        done = f"{t}: Finished Epoch[{e:2d} of {planned}]: [Training] ce = {loss:.8f} * 51200; errs = {errs:.3f}% * 51200; totalSamplesSeen = {51200 * e}; learningRatePerSample = 0.0099999998; epochTime=20.5371s"
        if e % 10 != 1:
            return [done]
        # A minibatch progress line now and then (CNTK prints them every N minibatches).
        mb = f"{t}:  Epoch[{e:2d} of {planned}]-Minibatch[   1- 100, 50.00%]: ce = {loss * 1.0004:.8f} * 25600; errs = {errs:.3f}% * 25600; time = 10.2874s; samplesPerSecond = 2488.5"
        return [mb, done]
    if fw == "tensorflow":
        step = e * TF_STEPS_PER_EPOCH
        out = [f"INFO:tensorflow:loss = {loss:.6g}, step = {step} (41.080 sec)"]
        if e % 5 == 0:
            out.append(f"INFO:tensorflow:Saving checkpoints for {step} into /tmp/job/model.ckpt.")
        return out
    return [
        f"Epoch: [{e - 1}][{PYTORCH_ITERS - 1}/{PYTORCH_ITERS}]\tTime  0.412 ( 0.398)\tData  0.001 ( 0.012)\tLoss {loss:.4e} ({loss:.4e})\tAcc@1  32.81 ( 31.10)\tAcc@5  58.59 ( 56.72)"
    ]


def _finish(fw: str, stamp: str, last_loss: float) -> list[str]:
    if fw == "cntk":
        t = _cntk_stamp(stamp)
        return [f'{t}: Action "train" complete.', "", f"{t}: __COMPLETED__"]
    if fw == "tensorflow":
        return [f"INFO:tensorflow:Loss for final step: {last_loss:.6g}."]
    return ["=> training finished"]
