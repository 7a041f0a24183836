"""The training / held-out / excluded split of a studio run, by image name: what the
Dataset panel chose before Start (StartTraining's ``held_out`` and ``excluded``), else the
dataset's every-k-th rule."""

from __future__ import annotations

from ..errors import DatasetError


def choose_split(dataset, eval_every: int, held_out=(), excluded=()) -> tuple[list[int], list[int], str | None]:
    """(train, test, note) by image name: ``held_out`` / ``excluded`` when given, else the
    dataset's every-k-th rule (Dataset.holdout). DatasetError names a name the dataset lacks
    and a split that leaves nothing to train on."""
    names = [c.name for c in dataset.cameras]
    unknown = sorted((set(held_out) | set(excluded)) - set(names))
    if unknown:
        raise DatasetError(f"{dataset.root}: no image named {', '.join(unknown[:3])} to hold out or exclude")
    if not held_out and not excluded:
        return dataset.holdout(eval_every)
    out, test = set(excluded), set(held_out) - set(excluded)
    train = [i for i, n in enumerate(names) if n not in out and n not in test]
    if not train:
        raise DatasetError(f"{dataset.root}: every image is held out or excluded: nothing is left to train on")
    return train, [i for i, n in enumerate(names) if n in test], None
