"""End-to-end jobs built from the layers below: the demo, sweeps and their Slurm launcher."""
