"""Plotly figures in notebooks: interactive in Jupyter, and a static PNG beside each one so
that a committed notebook shows its figures on GitHub and without a live kernel.

The PNG needs ``kaleido`` (the ``dev`` extra) and a Chromium or Chrome it can start; without
them figures are interactive only.

>>> use_static_images()          # doctest: +SKIP
'plotly_mimetype+png'
"""

from __future__ import annotations

import logging
import warnings

import plotly.io as pio

log = logging.getLogger(__name__)


def use_static_images() -> str:
    """Make every shown figure carry an interactive and a PNG version; return the renderer.

    Starts one kaleido browser for the session, so each PNG costs a fraction of a second.
    """
    renderer = "plotly_mimetype"
    try:
        import kaleido

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kaleido.start_sync_server(silence_warnings=True)
        # plotly passes its kaleido options to every image; with a server they are unused
        warnings.filterwarnings("ignore", message="The kopts argument is ignored")
        renderer += "+png"
    except Exception as err:  # no kaleido or no browser: interactive figures still work
        log.warning("figures without static images (%s: %s)", type(err).__name__, err)
    pio.renderers.default = renderer
    return renderer
