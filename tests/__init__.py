"""The test suite. ``shape_checks`` is imported here so that jaxtyping's import hook, which runs
``import tests`` and then looks up ``tests.shape_checks.check_shapes``, finds it."""

from tests import shape_checks  # noqa: F401
