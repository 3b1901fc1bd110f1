"""Headless Chromium for tests: render an HTML file, collect JavaScript errors, take screenshots."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

# Recorded before any other script runs; read back from the rendered DOM.
_ERROR_TRAP = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message)));
window.addEventListener('load', () => setTimeout(() => {
  const root = document.documentElement;
  root.setAttribute('data-overflow', root.scrollWidth - root.clientWidth);
  root.setAttribute('data-jserrors', JSON.stringify(window.__errors));
}, 500));
</script>"""

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


@dataclass
class Rendered:
    dom: str  # the DOM after scripts ran
    errors: list[str]  # JavaScript errors raised while the page loaded
    overflow: int  # pixels the page is wider than the window (scrollWidth - clientWidth)

    def count(self, pattern: str) -> int:
        return len(re.findall(pattern, self.dom))

    @property
    def annotations(self) -> list[str]:
        """Texts of the plotly annotations drawn on the page (an off-axis one draws none)."""
        tags = re.findall(r'<text class="annotation-text"[^>]*>', self.dom)
        return [m.group(1) for t in tags if (m := re.search(r'data-unformatted="([^"]*)"', t))]


def chromium() -> str:
    """Path of a Chromium binary, or skip the test with the reason and the fix."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")


def _run(html_file: Path, *extra: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                chromium(),
                *FLAGS,
                f"--user-data-dir={profile}",
                "--virtual-time-budget=15000",
                *extra,
                html_file.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )


def render(html_file: Path, width: int = 1200) -> Rendered:
    """Load ``html_file`` in a ``width``-pixel window (with an error trap injected) and return
    the DOM, the JS errors and the horizontal overflow."""
    source = html_file.read_text(encoding="utf-8")
    trapped = html_file.with_name(f".trapped-{html_file.name}")
    trapped.write_text(source.replace("<head>", "<head>" + _ERROR_TRAP, 1), encoding="utf-8")
    try:
        dom = _run(trapped, "--dump-dom", f"--window-size={width},900").stdout
    finally:
        trapped.unlink()
    found = re.search(r"data-jserrors=\"([^\"]*)\"", dom)
    assert found, "the page never finished loading (no error report in the DOM)"
    errors = json.loads(found.group(1).replace("&quot;", '"'))
    overflow = int(re.search(r'data-overflow="(-?\d+)"', dom).group(1))
    return Rendered(dom=dom, errors=errors, overflow=overflow)


def screenshot(html_file: Path, name: str, height: int = 4000) -> Path:
    """Save a PNG of the page under test-artifacts/ and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    out = ARTIFACTS / name
    _run(html_file, f"--screenshot={out}", f"--window-size=1200,{height}")
    assert out.is_file() and out.stat().st_size > 10_000, f"no screenshot written to {out}"
    return out


def network_requests(html_file) -> list[str]:
    """URLs the page itself asked for while Chromium opened ``html_file``, from its net log.

    Chromium's own background requests (update and time checks) have no initiator ("not an
    origin"); a request made by the page has the page's (opaque, "null") origin.
    """
    log = html_file.with_name(f"{html_file.stem}-netlog.json")
    _run(html_file, f"--log-net-log={log}")
    text = log.read_text(encoding="utf-8", errors="replace").rstrip().rstrip(",")
    netlog = json.loads(text if text.endswith("}") else text + "]}")  # an unfinished log
    start = netlog["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    jobs = [e.get("params", {}) for e in netlog["events"] if e["type"] == start]
    return [job["url"] for job in jobs if "url" in job and job.get("initiator") != "not an origin"]
