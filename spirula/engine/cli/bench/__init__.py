"""`spirula bench ...`: fixed workloads with JSON output (a front end, beside the CLI it
extends): raster, train, viewer, studio and mesh (commands.py registers them), the memory and
compute floors of the training kernels, and what the Slang compiler makes of them (codegen)."""
