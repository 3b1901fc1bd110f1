"""The suite's fixtures (``tests/fixtures.py``) for every test folder: ``tests/`` (the library),
``lab/tests/`` (the studies and benchmarks) and the package's doctests."""

pytest_plugins = ("tests.fixtures",)
