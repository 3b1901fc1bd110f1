"""The suite's fixtures (``tests/fixtures.py``) for every test folder: ``tests/`` (the library),
``lab/tests/`` (the studies and benchmarks) and the package's doctests.

They are loaded where tests run: in each xdist worker, or in the one process of a run without
workers. The xdist controller only hands out tests, so it skips them and their imports (torch,
TransformerLens, ihprobe: about 7 s before the workers could start).
"""


def pytest_configure(config):
    if not _xdist_controller(config):
        config.pluginmanager.import_plugin("tests.fixtures")


def _xdist_controller(config) -> bool:
    """True in the process that hands tests to workers (xdist's own test of distribution mode)."""
    if hasattr(config, "workerinput") or config.getoption("collectonly"):
        return False
    return config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))
