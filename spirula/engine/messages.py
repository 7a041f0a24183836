"""What a job reports (spirula/engine/jobs/, spirula/engine/profile): a closed set of frozen dataclasses.

Long work reports through a callback ``emit(message)``; the studio's engine thread puts
them on its queue to the window (spirula/engine/studio/protocol.py adds the studio's own messages
and commands), the CLI turns them into progress bars. Heavy data (preview images) does
not travel here but through a latest-value slot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Union



@dataclass(frozen=True)
class StageStarted:
    stage: str                 # "decode", "select", "sfm", "train", "export", "mesh", ...
    total: int | None = None   # units of work when known (frames, steps, ...)
    detail: str = ""


@dataclass(frozen=True)
class StageProgress:
    stage: str
    done: int
    total: int | None = None
    detail: str = ""           # short human text, e.g. "loss 0.081, 312,004 Gaussians"


@dataclass(frozen=True)
class StageFinished:
    stage: str
    seconds: float
    summary: dict = field(default_factory=dict)
    cached: bool = False       # skipped because its inputs and settings did not change


@dataclass(frozen=True)
class TrainMetrics:
    step: int
    loss: float
    num_gaussians: int
    steps_per_sec: float
    psnr: float | None = None  # held-out PSNR when an evaluation ran at this step


@dataclass(frozen=True)
class ProfilerSnapshot:
    data: dict                 # see spirula/engine/profile: timing buckets, per-kernel ms, VRAM


@dataclass(frozen=True)
class Warning:
    text: str


@dataclass(frozen=True)
class Error:
    text: str                  # names the file and the problem
    path: str = ""             # the file or folder it is about, when known (the GUI shows it apart)


@dataclass(frozen=True)
class Done:
    result: dict = field(default_factory=dict)


Message = Union[StageStarted, StageProgress, StageFinished, TrainMetrics, ProfilerSnapshot, Warning, Error, Done]
Emit = Callable[[Message], Any]


def ignore(_: Message) -> None:
    """An ``emit`` that drops everything."""
