"""Stage-list estimates measured on a real job (issue 50 item 1): run ``spirula run`` in-process
with a recording ``emit`` (every StageStarted / StageProgress / StageFinished with a
time.monotonic() stamp), save the trace, then replay it through
spirula/engine/studio/stage_list.py StageList and report, per stage, the share of the
estimates taken past 10 % done that are within 25 % of the stage's actual remaining time...
measured as the predicted total (elapsed since the stage started + estimate left) against
the stage's actual duration, the worst such error; the training also with the GPU's profile (TRAIN_PROFILE) against the
software device's constant rate (stage_list.train_profile).

    python benchmarks/stage_estimates.py record OUT_DIR -- <spirula run arguments>
    python benchmarks/stage_estimates.py report TRACE.json [...]
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path


def record(out_dir: Path, run_argv: list[str]) -> Path:
    """Run the job of ``spirula run <run_argv>`` and write OUT_DIR/trace.json: {"argv", "events":
    [[t_seconds, kind, fields], ...]} with t on time.monotonic() from the job's start."""
    from spirula.engine import messages as msg
    from spirula.engine.cli.main import build_parser
    from spirula.engine.cli.run_command import config_from_args
    from spirula.engine.jobs.pipeline import run_pipeline

    args = build_parser().parse_args(["run", *run_argv])
    cfg = config_from_args(args)
    t0 = time.monotonic()
    events = []

    def emit(m) -> None:
        t = time.monotonic() - t0
        if isinstance(m, (msg.StageStarted, msg.StageProgress, msg.StageFinished)):
            d = asdict(m)
            if isinstance(m, msg.StageFinished):
                d["summary"] = {}
            events.append([t, type(m).__name__, d])
            if not isinstance(m, msg.StageProgress) or m.done == m.total:
                print(f"{t:8.1f} s  {type(m).__name__} {m.stage} {d.get('done', '')}/{d.get('total', '')}",
                      flush=True)

    run_pipeline(args.source, args.output, cfg, emit=emit, from_stage=args.from_stage,
                 until_stage=args.until_stage)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "trace.json"
    path.write_text(json.dumps({"argv": run_argv, "events": events}, indent=0))
    return path


def _messages(events):
    from spirula.engine import messages as msg

    kinds = {"StageStarted": msg.StageStarted, "StageProgress": msg.StageProgress, "StageFinished": msg.StageFinished}
    return [(t, kinds[k](**d)) for t, k, d in events]


def replay(events, software: bool) -> dict:
    """Per stage with progress: {"seconds": actual duration (StageStarted to StageFinished on
    the trace's clock), "errors": relative errors (elapsed + estimate left - actual) / actual
    at every StageProgress at or past 10 % done and before the last unit}, from a
    StageList(software=software) (the training's profile: stage_list.train_profile)."""
    import numpy as np

    from spirula.engine.studio.stage_list import StageList

    msgs = _messages(events)
    started = {m.stage: t for t, m in msgs if type(m).__name__ == "StageStarted"}
    ended = {m.stage: t for t, m in msgs if type(m).__name__ == "StageFinished"}
    sl = StageList(software=software)
    out: dict = {}
    for t, m in msgs:
        sl.on_message(m, t)
        if type(m).__name__ != "StageProgress" or m.stage not in sl.clocks or m.stage not in ended:
            continue
        actual = ended[m.stage] - started[m.stage]
        rec = out.setdefault(m.stage, {"seconds": actual, "errors": [], "reports": 0})
        rec["reports"] += 1
        if m.total and m.done / m.total >= 0.1 and m.done < m.total:
            left = sl.clocks[m.stage].remaining(t)
            if left is not None:
                rec["errors"].append(((t - started[m.stage]) + left - actual) / actual)
    for rec in out.values():
        rec["errors"] = np.array(rec["errors"])
    return out


def report(paths: list[Path]) -> str:
    """A markdown table per trace: per stage, its duration, the share of the estimates past 10 %
    within 25 % and the worst error, as the studio estimates on a software device (the training at a
    constant rate) and with the GPU's training profile (the other stages: the same constant rate)."""
    import numpy as np

    lines = []
    for path in paths:
        events = json.loads(Path(path).read_text())["events"]
        prof = replay(events, software=True)
        flat = replay(events, software=False)
        lines += [f"{path}:", "",
                  "| stage | seconds | progress reports | estimates past 10 % | within 25 % | worst error "
                  "| GPU train profile: within 25 % | GPU train profile: worst |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for stage, rec in prof.items():
            e, f = rec["errors"], flat[stage]["errors"]
            if len(e) == 0:
                lines.append(f"| {stage} | {rec['seconds']:.1f} | {rec['reports']} | 0 | - | - | - | - |")
                continue
            i, j = int(np.argmax(np.abs(e))), int(np.argmax(np.abs(f)))
            lines.append(f"| {stage} | {rec['seconds']:.1f} | {rec['reports']} | {len(e)} | "
                         f"{np.mean(np.abs(e) <= 0.25):.0%} | {e[i]:+.0%} | {np.mean(np.abs(f) <= 0.25):.0%} | "
                         f"{f[j]:+.0%} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["record"]:
        cut = argv.index("--")
        print(record(Path(argv[1]), argv[cut + 1:]))
        return 0
    if argv[:1] == ["report"]:
        print(report([Path(p) for p in argv[1:]]))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
