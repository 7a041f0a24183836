"""Scene partition for scenes bigger than one GPU: split a dataset into cells on its ground
plane (split.py, geometry.py), write each part as a dataset (parts.py, layout.py), train the
parts as Ray tasks or one after another (run_parts.py), merge by ownership (merge.py)."""
