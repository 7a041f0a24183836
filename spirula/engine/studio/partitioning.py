"""The partition panel's training in the studio: TrainPartition runs spirula/engine/partition/job.py
run_partition (split -> the parts, as Ray tasks or one after another -> merge; what
`spirula partition` runs) on the engine thread, which owns the device: without Ray the parts
and the merge's fine-tune train through it, never beside the studio's own GPU work from
another thread. Its messages go out wrapped in PartitionMessage (the panel's progress rows);
Cancel reaches it out of band (Session.cancel_requested: the control queue is not read while
it runs), and the parts checkpoint and end, to resume at the next TrainPartition."""

from __future__ import annotations

from pathlib import Path

from . import protocol as M


class Partitioning:
    def __init__(self, engine):
        self.e = engine
        self.running = False

    def train(self, cmd: M.TrainPartition) -> None:
        from ..config import run_config
        from ..partition.job import run_partition
        from ..partition.run_parts import FIXED_SETTINGS

        e = self.e
        training = "a training is under way (stop it first)" if e.training.unfinished() is not None else ""
        busy = e.loads.busy_reason() or training
        if busy:  # to the panel, whose run then ends
            e.emit(M.PartitionMessage(M.Error(f"cannot train the parts of {cmd.dataset}: {busy}", cmd.dataset)))
            return
        # as `spirula partition train` (spirula/engine/settings.py resolve), on this device
        cfg = run_config(FIXED_SETTINGS, device=e.gpu.backend)
        self.running = True  # cancel_requested was cleared when the command was sent (Session.send)
        e.state("partitioning", f"{Path(cmd.dataset).name} -> {cmd.parts_dir}")
        ended = []

        def emit(m) -> None:
            ended.append(m)
            e.emit(M.PartitionMessage(m))

        try:
            run_partition(Path(cmd.dataset), Path(cmd.parts_dir), Path(cmd.project), cmd.split, cfg, emit,
                          e.s.cancel_requested.is_set)
        finally:
            self.running = False
            e.s.cancel_requested.clear()
            e.viewport.view_dirty = True
        last = ended[-1] if ended else None
        failed = isinstance(last, M.Error)
        e.state("failed" if failed else "idle", last.text if failed else "partition finished")
