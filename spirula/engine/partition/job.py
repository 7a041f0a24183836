"""The partition as one job: split -> train the parts (spirula/engine/partition/run_parts.py: Ray
tasks, the same path as `spirula partition train`) -> merge, reporting spirula.engine.messages.
Qt-free.

:func:`run_partition` runs it on the caller's thread: the studio's engine thread, which
owns the device (spirula/engine/studio/partitioning.py, the partition panel's TrainPartition):
with Ray every part trains in a worker process with its own device; without Ray the parts
train one after another, and the merge's fine-tune runs, through the engine thread's
device. :class:`PartitionJob` runs it on a thread of its own for a caller without an
engine thread (a script, the tests), reporting into a queue it polls.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

from ..config import RunConfig
from ..errors import SpirulaError
from ..messages import Done, Error, StageStarted


class PartitionJob:
    """``start()`` runs split, train and merge of ``dataset`` into ``parts_dir`` and
    ``project``; ``poll()`` returns the messages so far; ``stop()`` asks the parts to
    checkpoint and end (a later job resumes them). The last message is Done({"ply": path})
    or Error."""

    def __init__(self, dataset: Path, parts_dir: Path, project: Path, settings, cfg: RunConfig,
                 address: str | None = None):
        self.dataset, self.parts_dir, self.project = Path(dataset), Path(parts_dir), Path(project)
        self.settings, self.cfg, self.address = settings, cfg, address
        self.messages: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="partition-job", daemon=True)

    def start(self) -> PartitionJob:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

    def poll(self) -> list:
        out = []
        while True:
            try:
                out.append(self.messages.get_nowait())
            except queue.Empty:
                return out

    def _same_split(self) -> bool:
        return same_split(self.parts_dir, self.dataset, self.settings)

    def _run(self) -> None:
        run_partition(self.dataset, self.parts_dir, self.project, self.settings, self.cfg, self.messages.put,
                      self._stop.is_set, self.address)


def same_split(parts_dir: Path, dataset: Path, settings) -> bool:
    """Whether ``parts_dir`` holds a split of ``dataset`` by ``settings`` already."""
    from .parts_layout import NAME, read_layout
    from .split import same_settings

    if not (Path(parts_dir) / NAME).is_file():
        return False
    try:
        layout = read_layout(Path(parts_dir))
    except SpirulaError:
        return False
    return same_settings(layout.settings, settings) and layout.dataset == Path(dataset).resolve()


def run_partition(dataset: Path, parts_dir: Path, project: Path, settings, cfg: RunConfig, emit,
                  should_stop=lambda: False, address: str | None = None) -> None:
    """Split ``dataset`` by ``settings`` into ``parts_dir`` (the same split again keeps its
    trained parts, which resume), train the parts with ``cfg`` and merge them into
    ``project``, on this thread, reporting spirula.engine.messages to ``emit``; ``should_stop()``
    true: the parts checkpoint and end. The last message is Done({"ply", "psnr",
    "num_gaussians"}), Done({"stopped": True}) or Error (one line; never raises for a
    SpirulaError or a bug: the caller is a window's job)."""
    from .merge import merge_parts
    from .parts import split_dataset
    from .run_parts import train_parts

    dataset, parts_dir, project = Path(dataset), Path(parts_dir), Path(project)
    try:
        if not same_split(parts_dir, dataset, settings):
            emit(StageStarted("split"))
            split_dataset(dataset, parts_dir, settings, force=True, on_message=lambda _: None)
        out = train_parts(parts_dir, cfg, address=address, emit=lambda m: None if isinstance(m, Done) else emit(m),
                          should_stop=should_stop)
        if out["stopped"]:
            emit(Done({"stopped": True}))
            return
        metrics = merge_parts(parts_dir, project, emit=emit)
        emit(Done({"ply": str(project / "splat.ply"), "psnr": metrics.get("psnr"),
                   "num_gaussians": metrics["num_gaussians"]}))
    except SpirulaError as e:
        emit(Error(str(e)))
    except Exception as e:  # a bug must reach the window, not die on a thread
        emit(Error(f"{type(e).__name__}: {e}"))
