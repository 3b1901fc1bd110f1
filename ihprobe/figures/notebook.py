"""Plotly figures in notebooks: interactive in Jupyter, and a static PNG beside each one so
that a committed notebook shows its figures on GitHub and without a live kernel.

The PNG needs ``kaleido`` (the ``dev`` extra) and a Chromium or Chrome it can start; without
them, or when the browser does not answer in time, figures are interactive only.

>>> use_static_images()          # doctest: +SKIP
'plotly_mimetype+png'
"""

from __future__ import annotations

import logging
import threading
import warnings

import plotly.io as pio
from plotly.io._base_renderers import PngRenderer

log = logging.getLogger(__name__)

PNG_TIMEOUT_S = 120.0  # kaleido's own limit per image is 90 s; beyond this it is not coming


class BoundedPngRenderer(PngRenderer):
    """plotly's PNG renderer with a time limit per figure.

    kaleido's shared browser runs in a thread; if that browser fails to start, every later
    image waits for it for ever. Here an image that does not come back within ``timeout_s``
    (or fails) is left out with one warning, and later figures skip the PNG at once.

    >>> renderer = BoundedPngRenderer(timeout_s=60)   # doctest: +SKIP
    >>> "image/png" in renderer.to_mimebundle(go.Figure().to_dict())   # doctest: +SKIP
    True
    """

    def __init__(self, timeout_s: float = PNG_TIMEOUT_S) -> None:
        super().__init__()
        self.timeout_s = timeout_s
        self.failure: str | None = None

    def to_mimebundle(self, fig_dict: dict) -> dict:
        if self.failure:
            return {}
        outcome: dict = {}

        def render() -> None:
            try:
                outcome["bundle"] = PngRenderer.to_mimebundle(self, fig_dict)
            except Exception as err:  # noqa: BLE001 - reported below, the figure still shows
                outcome["error"] = f"{type(err).__name__}: {err}"

        worker = threading.Thread(target=render, name="png-render", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if "bundle" in outcome:
            return outcome["bundle"]
        self.failure = outcome.get("error", f"no image after {self.timeout_s:g} s")
        log.warning("figures without static images from here on (%s)", self.failure)
        return {}


def use_static_images(timeout_s: float = PNG_TIMEOUT_S) -> str:
    """Make every shown figure carry an interactive and a PNG version; return the renderer.

    Starts one kaleido browser for the session, so each PNG costs a fraction of a second;
    a PNG that takes longer than ``timeout_s`` is dropped rather than stalling the notebook.

    Example:
        >>> use_static_images()  # first in a notebook  # doctest: +SKIP
        'plotly_mimetype+png'
    """
    renderer = "plotly_mimetype"
    try:
        import kaleido

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kaleido.start_sync_server(silence_warnings=True)
        # plotly passes its kaleido options to every image; with a server they are unused
        warnings.filterwarnings("ignore", message="The kopts argument is ignored")
        pio.renderers["png"] = BoundedPngRenderer(timeout_s)
        renderer += "+png"
    except Exception as err:  # no kaleido or no browser: interactive figures still work
        log.warning("figures without static images (%s: %s)", type(err).__name__, err)
    pio.renderers.default = renderer
    return renderer
