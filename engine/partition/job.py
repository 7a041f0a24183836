"""The partition as one background job (the studio's partition panel): split -> train the
parts (engine/partition/run_parts.py: Ray tasks, the same path as `spirula partition
train`) -> merge, reporting engine.messages into a queue the window polls. Qt-free.

The job runs on a thread of its own, not the engine thread: with Ray every part trains in
a worker process with its own device, so the studio's device is not touched. Without Ray
the parts train one after another on this thread, through the process's shared device
(engine/device.py get_gpu), while the studio's own training should be idle; the panel
says so.
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
        from .layout import NAME, read_layout
        from .split import same_settings

        if not (self.parts_dir / NAME).is_file():
            return False
        try:
            layout = read_layout(self.parts_dir)
        except SpirulaError:
            return False
        return same_settings(layout.settings, self.settings) and layout.dataset == self.dataset.resolve()

    def _run(self) -> None:
        from .merge import merge_parts
        from .parts import split_dataset
        from .run_parts import train_parts

        emit = self.messages.put
        try:
            if not self._same_split():  # the same split again keeps its trained parts (they resume)
                emit(StageStarted("split"))
                split_dataset(self.dataset, self.parts_dir, self.settings, force=True, on_message=lambda _: None)
            out = train_parts(self.parts_dir, self.cfg, address=self.address, emit=lambda m: None if isinstance(m, Done)
                              else emit(m), should_stop=self._stop.is_set)
            if out["stopped"]:
                emit(Done({"stopped": True}))
                return
            metrics = merge_parts(self.parts_dir, self.project, emit=emit)
            emit(Done({"ply": str(self.project / "splat.ply"), "psnr": metrics.get("psnr"),
                       "num_gaussians": metrics["num_gaussians"]}))
        except SpirulaError as e:
            emit(Error(str(e)))
        except Exception as e:  # a bug must reach the window, not die on a thread
            emit(Error(f"{type(e).__name__}: {e}"))
