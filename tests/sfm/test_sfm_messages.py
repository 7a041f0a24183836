"""SfM's warning when images are left out of the model names them (spirula/engine/sfm/reconstruct.py)."""

from spirula.engine.sfm.reconstruct import left_out_warning


def test_the_images_left_out_are_named_first_few_then_a_count():
    names = [f"frame_{i:06d}.jpg" for i in (9, 3, 7)]
    line = left_out_warning("cap", 6, 9, names)
    assert line == "cap: 6 of 9 images registered; the others are left out: frame_000003.jpg, frame_000007.jpg, " \
                   "frame_000009.jpg"
    many = left_out_warning("cap", 2, 10, [f"f{i}.jpg" for i in range(8)])
    assert many.endswith("left out: f0.jpg, f1.jpg, f2.jpg, f3.jpg, f4.jpg ... and 3 more")
