"""The suite's own set-up: where the shared fixtures load, and that they are active where tests
run (an xdist worker, or the one process of a run without workers)."""

import os
import socket
from types import SimpleNamespace

import pytest

import conftest
from tests.helpers import NetworkBlocked


def fake_config(dist="no", tx=(), collectonly=False, worker=False):
    options = {"dist": dist, "tx": list(tx), "collectonly": collectonly}
    config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))
    if worker:
        config.workerinput = {"workerid": "gw0"}
    return config


@pytest.mark.parametrize(
    ("config", "controller"),
    [
        (fake_config("loadgroup", ["popen"] * 2), True),
        (fake_config("loadgroup", ["popen"] * 2, worker=True), False),
        (fake_config("loadgroup", ["popen"] * 2, collectonly=True), False),
        (fake_config("loadgroup"), False),  # --dist without -n: no workers
        (fake_config(), False),
    ],
)
def test_only_the_xdist_controller_skips_the_fixtures(config, controller):
    assert conftest._xdist_controller(config) is controller


def test_the_fixtures_are_active_where_tests_run(request, data_cache):
    assert request.config.pluginmanager.has_plugin("tests.fixtures")
    assert os.environ["IHPROBE_CACHE"] == str(data_cache)
    with pytest.raises(NetworkBlocked):
        socket.create_connection(("198.51.100.1", 443), timeout=1)
