"""Ground-truth mesh benchmark (issue 47, item 4): analytic textured scenes rendered by our
own NumPy ray caster into datasets `spirula run` reads, and a scorer of meshes against the
exact surface. Modules: geometry (solids), texture, raycast (the renderer), scenes (the
five scenes, sizes, the ground-truth surface), writer (dataset + gt.json / gt.npz), score,
run (the driver; `python -m benchmarks.mesh_gt`). See README.md beside this file."""
