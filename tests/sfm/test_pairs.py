"""Pair planning (spirula.engine.sfm.pairs / matching.plan_pairs) and pose comparison (align)."""

import numpy as np
from spirula.engine.sfm.align import compare_poses
from spirula.engine.sfm.sfm_config import SfmConfig
from spirula.engine.sfm.matching import choose_matching, plan_pairs
from spirula.engine.sfm.pairs import exhaustive_pairs, loop_pairs, sequential_pairs
from scipy.spatial.transform import Rotation


def test_sequential_pairs_cover_neighbours_and_powers_of_two():
    p = sequential_pairs(40, overlap=3)
    assert all(i < j for i, j in p)
    assert {(5, 6), (5, 7), (5, 8), (5, 9)} <= p and (5, 10) not in p and (5, 11) not in p
    assert {(0, 4), (0, 8), (0, 16), (0, 32)} <= p      # quadratic overlap beyond the window
    assert (30, 46) not in p                              # never past the end
    assert len(sequential_pairs(40, overlap=3, quadratic=False)) == 3 * 40 - 6


def test_loop_pairs_join_far_apart_keyframes_only():
    p = loop_pairs(100, overlap=10, every=5, max_keyframes=60)
    assert (0, 95) in p and (5, 90) in p                  # the end of an orbit meets its start
    assert all(j - i > 10 and i % 5 == 0 and j % 5 == 0 for i, j in p)
    wide = loop_pairs(1000, overlap=10, every=5, max_keyframes=20)
    keys = {i for pair in wide for i in pair}
    assert len(keys) <= 20
    assert loop_pairs(100, 10, every=0, max_keyframes=60) == set()


def test_exhaustive_and_choice():
    assert len(exhaustive_pairs(7)) == 21
    cfg = SfmConfig()
    assert choose_matching(cfg, "video", 500) == "sequential"
    assert choose_matching(cfg, "photos", 100) == "exhaustive"
    assert choose_matching(cfg, "photos", 101) == "sequential"
    assert choose_matching(SfmConfig(matching="exhaustive"), "video", 10) == "exhaustive"
    names = [f"f{i:03d}.jpg" for i in range(30)]
    pairs = plan_pairs(names, "sequential", cfg)
    assert ("f000.jpg", "f001.jpg") in pairs and ("f000.jpg", "f025.jpg") in pairs
    assert len(set(pairs)) == len(pairs)


def random_poses(n, rng):
    rots = Rotation.random(n, random_state=rng.integers(1 << 31)).as_matrix()
    centres = rng.normal(size=(n, 3)) * 3
    return rots, centres


def test_pose_comparison_recovers_a_similarity_exactly():
    rng = np.random.default_rng(0)
    rots, centres = random_poses(20, rng)
    ref = {f"{i}.jpg": (rots[i], centres[i]) for i in range(20)}
    # the estimate lives in another frame: world_est = s * R * world_ref + t
    s, r, t = 0.37, Rotation.random(random_state=1).as_matrix(), np.array([1.0, -2.0, 0.5])
    est = {k: (rk @ r.T, s * r @ c + t) for k, (rk, c) in ref.items()}
    est["extra.jpg"] = (np.eye(3), np.zeros(3))           # only in the estimate: ignored
    acc = compare_poses(est, ref)
    assert len(acc.names) == 20
    assert acc.median_rot_err_deg < 1e-4 and acc.median_center_err_pct < 1e-6


def test_pose_comparison_measures_known_errors():
    rng = np.random.default_rng(3)
    rots, centres = random_poses(30, rng)
    ref = {f"{i}": (rots[i], centres[i]) for i in range(30)}
    tilt = Rotation.from_rotvec([0, 0, np.radians(2.0)]).as_matrix()   # every camera turned 2 degrees
    est = {k: (tilt @ rk, c) for k, (rk, c) in ref.items()}
    acc = compare_poses(est, ref)
    assert abs(acc.median_rot_err_deg - 2.0) < 1e-6
    assert acc.median_center_err_pct < 1e-6
    # relative rotations: one camera turned by 3 degrees shows in exactly its 29 pairs
    one = dict(ref)
    one["0"] = (Rotation.from_rotvec([np.radians(3.0), 0, 0]).as_matrix() @ ref["0"][0], ref["0"][1])
    rel = compare_poses(one, ref).rel_rot_err_deg
    assert np.sum(rel > 1e-3) == 29 and abs(rel.max() - 3.0) < 1e-6   # only the pairs with camera 0
