"""The LLC study's run and sampler as data: seed 0 of the forecast study's demo configuration
(:data:`studies.forecast.cells.DEMO`), its every checkpoint estimated with SGLD, on one torch
thread as the demo.

>>> RUN.name, CHAINS * DRAWS
('B32-seed0', 200)
"""

from __future__ import annotations

from lab.studies.study import ROOT

RUN = ROOT / "runs" / "validate-forecast-demo" / "B32-seed0"
CHAINS = 2  # SGLD chains per checkpoint
DRAWS = 100  # draws per chain
THREADS = 1  # as the demo: more threads spin-wait on shared cores
