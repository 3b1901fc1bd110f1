"""The embedded default corpus: English text that ships with every Python, so nothing is downloaded.

``pydoc_data.topics`` holds the language reference's prose (about 0.46 MB in 79 documents);
standard-library module docstrings can be added for more variety.

>>> docs = default_documents()
>>> len(docs) > 50 and all(isinstance(d, str) for d in docs)
True
"""

from __future__ import annotations

import importlib
import pkgutil
from pydoc_data.topics import topics

# Modules whose docstrings are long, plain English prose (only used with ``docstrings=True``).
_DOCSTRING_MODULES = (
    "argparse",
    "asyncio",
    "collections",
    "contextlib",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "email",
    "functools",
    "http",
    "inspect",
    "itertools",
    "json",
    "logging",
    "os",
    "pathlib",
    "pickle",
    "re",
    "shutil",
    "socket",
    "sqlite3",
    "string",
    "subprocess",
    "threading",
    "typing",
    "unittest",
    "urllib",
    "xml",
    "zipfile",
)


def default_documents(docstrings: bool = False) -> list[str]:
    """The documents of the embedded corpus, in a fixed order.

    Args:
        docstrings: also include the docstrings of a fixed list of standard-library modules and
            their public members (roughly doubles the text).
    """
    docs = [topics[key] for key in sorted(topics)]
    if docstrings:
        docs.extend(_stdlib_docstrings())
    return [d for d in docs if d.strip()]


def _stdlib_docstrings() -> list[str]:
    docs: list[str] = []
    for name in _DOCSTRING_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # pragma: no cover - every CPython ships these
            continue
        members = [module] + [
            getattr(module, a) for a in sorted(dir(module)) if not a.startswith("_")
        ]
        if hasattr(module, "__path__"):
            for info in pkgutil.iter_modules(module.__path__):
                if info.name.startswith("_"):  # e.g. unittest.__main__ runs tests on import
                    continue
                try:
                    members.append(importlib.import_module(f"{name}.{info.name}"))
                except Exception:  # noqa: BLE001 - optional submodules may need extras
                    continue
        text = "\n\n".join(
            m.__doc__ for m in members if isinstance(getattr(m, "__doc__", None), str)
        )
        if text.strip():
            docs.append(text)
    return docs
