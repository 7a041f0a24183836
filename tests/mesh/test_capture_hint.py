"""How steeply the views look down on an orbit's subject (engine/mesh/plane.camera_elevations):
cameras placed here at known heights and distances over a tilted table."""

import numpy as np

from engine.mesh.plane import Plane, camera_elevations
from tests.mesh.raycast import rotation


def test_elevations_over_a_tilted_table_are_the_angles_the_cameras_were_placed_at(rng):
    R = rotation(rng)                                # the table's frame: its normal is R's third column
    n = R[:, 2]
    offset = float(rng.uniform(-3, 3))
    heights = rng.uniform(0.5, 6.0, 12)
    dists = rng.uniform(1.0, 5.0, 12)
    az = rng.uniform(0, 2 * np.pi, 12)
    foot_local = np.array([rng.uniform(-1, 1), rng.uniform(-1, 1), 0.0])
    local = foot_local + np.stack([dists * np.cos(az), dists * np.sin(az), heights], 1)
    to_world = lambda p: p @ R.T - n * offset        # the table z = 0 of the frame is n.x + offset = 0
    c2w = np.tile(np.eye(4), (12, 1, 1))
    c2w[:, :3, 3] = to_world(local)
    plane = Plane(normal=n, offset=offset)
    # the foot given anywhere along the normal above it: dropped onto the table
    foot = to_world(foot_local[None])[0] + rng.uniform(0.5, 2.0) * n
    got = camera_elevations(c2w, plane, foot)
    np.testing.assert_allclose(got, np.degrees(np.arctan(heights / dists)), atol=1e-9)
