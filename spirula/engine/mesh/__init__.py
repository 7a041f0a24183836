"""Textured mesh from trained splats: depth render, TSDF fusion, marching cubes, cleaning,
decimation, UV atlas, texture baking, export. Entry point: :func:`spirula.engine.jobs.mesh.run_mesh`."""
