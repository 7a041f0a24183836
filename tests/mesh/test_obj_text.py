"""The NumPy OBJ writer (spirula/engine/mesh/export.py obj_text) against Python's own
formatting of the same numbers, line by line."""

import numpy as np

from spirula.engine.mesh.export import OBJ_LIMIT, obj_text


def python_obj(v, f, t):
    lines = ["v %.8f %.8f %.8f" % tuple(r) for r in v.tolist()] + ["vt %.8f %.8f" % tuple(r) for r in t.tolist()]
    lines += ["f %d/%d %d/%d %d/%d" % (a, a, b, b, c, c) for a, b, c in (f + 1).tolist()]
    return lines


def test_obj_text_matches_python_formatting():
    rng = np.random.default_rng(7)
    v = np.concatenate([rng.normal(0, 3, (500, 3)), rng.uniform(-1e6, 1e6, (50, 3)),
                        [[0.0, -0.0, -1e-12], [1.0, -1.0, 10.0], [0.5, 123.25, -7.0]]])
    v = v.astype(np.float32).astype(np.float64)   # float32-born coordinates, as the mesh stage's
    t = rng.uniform(0, 1, (len(v), 2)).astype(np.float32).astype(np.float64)
    f = rng.integers(0, len(v), (2000, 3))
    f[0] = [0, 9, 99]                              # 1, 2 and 3 digits after the +1
    text = obj_text(v, f, t, "m.mtl", "m").decode().splitlines()
    assert text[:3] == ["# spirula", "mtllib m.mtl", "usemtl m"]
    want = python_obj(v, f, t)
    got = text[3:]
    assert len(got) == len(want)
    diff = [(a, b) for a, b in zip(got, want) if a != b]
    # x 1e8 in float64 may round the last digit the other way than Python's exact rounding
    assert len(diff) <= 2, diff[:5]
    num = lambda lines: np.array([float(x.replace("/", " ").split()[1]) for x in lines])
    assert np.abs(num([a for a, _ in diff]) - num([b for _, b in diff])).max(initial=0) <= 1.5e-8


def test_obj_text_falls_back_for_huge_or_odd_coordinates():
    v = np.array([[OBJ_LIMIT * 2, 0.0, 1.0], [np.inf, 0.0, 0.0], [0.0, 0.0, 0.0]])
    t = np.zeros((3, 2))
    f = np.array([[0, 1, 2]])
    assert obj_text(v, f, t, "m.mtl", "m").decode().splitlines()[3:] == python_obj(v, f, t)


def test_obj_text_empty_mesh():
    assert obj_text(np.zeros((0, 3)), np.zeros((0, 3), np.int64), np.zeros((0, 2)), "m.mtl", "m") == \
        b"# spirula\nmtllib m.mtl\nusemtl m\n"
