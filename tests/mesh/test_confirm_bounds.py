"""The box the studio's user confirms (engine/studio/meshing.py confirmed_region): the proposal
as it is, unless edited; an edited box is meshed as `--bounds` numbers are."""

import numpy as np
import pytest

from engine.errors import SpirulaError
from engine.mesh.bounds import Bounds
from engine.studio.meshing import confirmed_region


def _proposal():
    a = np.radians(30)
    frame = np.array([[np.cos(a), np.sin(a), 0], [-np.sin(a), np.cos(a), 0], [0, 0, 1.0]])  # turned about z
    return Bounds("object", frame, np.array([-1.0, -0.5, 0.0]), np.array([1.0, 0.5, 2.0]), "the orbit's subject",
                  floor=0.0)


def test_the_proposal_as_it_is_when_unedited():
    p = _proposal()
    assert confirmed_region(p, ()) is p
    assert confirmed_region(p, p.aabb()) is p                    # the fields as proposed
    assert confirmed_region(p, tuple(np.asarray(p.aabb()) + 1e-9)) is p


def test_an_edited_box_is_meshed_as_given():
    p = _proposal()
    box = np.asarray(p.aabb())
    box[5] -= 0.5                                                 # the top lowered
    r = confirmed_region(p, tuple(box))
    assert r.mode == "explicit" and np.allclose(r.aabb(), box) and np.allclose(r.frame, np.eye(3))
    assert "confirmed in the studio" in r.reason and p.reason in r.reason
    box[3] = box[0] - 1                                           # a max below its min
    with pytest.raises(SpirulaError, match="max must be above its min"):
        confirmed_region(p, tuple(box))
