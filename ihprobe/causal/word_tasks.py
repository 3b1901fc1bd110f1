"""More built-in function-style tasks, for function-vector scores: words and their relations.

Each task's pairs come from data ihprobe writes itself or reads from an installed package, never
from the unlicensed research repositories; :data:`SOURCES` names each task's source and license.
The answers are short common words, digits or capitals, which common BPE vocabularies spell as
one token after a space.

- ``antonym``, ``synonym``: adjectives from WordNet 3.0 (Princeton University, the WordNet 3.0
  license, a BSD-style one), read at run time from Debian's ``wordnet-base`` (``make wordnet``
  installs it) in :data:`WORDNET`; skipped, with a log line saying how to install it, when absent.
- ``present_past``, ``singular_plural``, ``country_capital``, ``number_digit``: tables written
  for ihprobe from public facts (common English verbs and nouns, the capitals of countries,
  number words); part of ihprobe, under its license.

>>> [t.name for t in word_tasks(wordnet=Path("/nonexistent"))]
['present_past', 'singular_plural', 'country_capital', 'number_digit']
>>> dict(word_tasks(wordnet=Path("/nonexistent"))[3].pairs)["seven"]
'7'
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import random
import re
from collections import Counter
from pathlib import Path

from ihprobe.causal.tasks import SIZE, Task, builtin_tasks, task_digest

log = logging.getLogger(__name__)

WORDNET = Path(os.environ.get("IHPROBE_WORDNET", "/usr/share/wordnet"))
WORDNET_LICENSE = "WordNet 3.0 (Princeton University), WordNet 3.0 license (BSD-style)"
MIN_TAGS = 10  # a WordNet word counts as common from this many sense tags (cntlist.rev)
OWN = "written for ihprobe from public facts; ihprobe's license"
SOURCES = {
    "antonym": f"adjective antonyms of {WORDNET_LICENSE}, Debian wordnet-base",
    "synonym": f"adjectives sharing a synset in {WORDNET_LICENSE}, Debian wordnet-base",
    "present_past": f"common English verbs and their simple past; {OWN}",
    "singular_plural": f"common English nouns and their plural; {OWN}",
    "country_capital": f"countries and their capitals; {OWN}",
    "number_digit": f"English number words and their digits; {OWN}",
}

PAST = (
    "walk walked play played jump jumped open opened close closed talk talked look looked "
    "call called ask asked help helped work worked want wanted start started move moved "
    "live lived love loved try tried stop stopped plan planned go went see saw eat ate "
    "give gave take took make made come came run ran write wrote speak spoke break broke "
    "drive drove sing sang swim swam drink drank begin began know knew grow grew throw threw "
    "fly flew draw drew fall fell feel felt keep kept sleep slept leave left meet met "
    "send sent build built buy bought think thought bring brought teach taught catch caught "
    "find found hold held stand stood sit sat win won tell told sell sold hear heard"
)
PLURAL = (
    "cat cats dog dogs house houses car cars book books tree trees bird birds hand hands "
    "door doors road roads river rivers city cities country countries baby babies story "
    "stories box boxes bus buses church churches dish dishes glass glasses horse horses "
    "child children man men woman women foot feet tooth teeth mouse mice goose geese "
    "knife knives leaf leaves wife wives life lives wolf wolves shelf shelves "
    "day days key keys boy boys toy toys game games name names table tables chair chairs "
    "window windows girl girls apple apples egg eggs hat hats cup cups ship ships king kings"
)
CAPITALS = (
    "France Paris, Germany Berlin, Italy Rome, Spain Madrid, Portugal Lisbon, Greece Athens, "
    "Russia Moscow, Poland Warsaw, Austria Vienna, Hungary Budapest, Sweden Stockholm, "
    "Norway Oslo, Finland Helsinki, Denmark Copenhagen, Ireland Dublin, Belgium Brussels, "
    "Netherlands Amsterdam, Switzerland Bern, Czechia Prague, Romania Bucharest, "
    "Bulgaria Sofia, Serbia Belgrade, Croatia Zagreb, Ukraine Kyiv, Turkey Ankara, "
    "Egypt Cairo, Kenya Nairobi, Nigeria Abuja, Ghana Accra, Latvia Riga, Morocco Rabat, "
    "Japan Tokyo, China Beijing, India Delhi, Thailand Bangkok, Vietnam Hanoi, "
    "Indonesia Jakarta, Philippines Manila, Iran Tehran, Iraq Baghdad, Syria Damascus, "
    "Lebanon Beirut, Israel Jerusalem, Pakistan Islamabad, Afghanistan Kabul, "
    "Canada Ottawa, Estonia Tallinn, Cuba Havana, Peru Lima, Chile Santiago, "
    "Lithuania Vilnius, Colombia Bogota, Venezuela Caracas, Australia Canberra"
)
NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()


def _pairs(text: str) -> list[tuple[str, str]]:
    words = text.split()
    return list(zip(words[::2], words[1::2], strict=True))


def tables() -> dict[str, list[tuple[str, str]]]:
    """The tasks ihprobe writes itself: name -> all its pairs.

    >>> {name: len(pairs) for name, pairs in tables().items()}
    {'present_past': 61, 'singular_plural': 50, 'country_capital': 54, 'number_digit': 21}
    """
    capitals = [tuple(p.split()) for p in CAPITALS.split(", ")]
    return {
        "present_past": _pairs(PAST),
        "singular_plural": _pairs(PLURAL),
        "country_capital": [(c, a) for c, a in capitals],
        "number_digit": [(w, str(i)) for i, w in enumerate(NUMBERS)],
    }


def wordnet_pairs(root: Path = WORDNET) -> dict[str, list[tuple[str, str]]]:
    """Adjective antonyms and synonyms from WordNet's ``data.adj`` under ``root``: common
    words only (:func:`_common`), one ``y`` per ``x``; ``{}`` when the file is absent.

    Example:
        >>> wordnet_pairs()["antonym"][:2]                              # doctest: +SKIP
        [('able', 'unable'), ('active', 'inactive')]
    """
    path = root / "data.adj"
    if not path.is_file():
        return {}
    synsets: dict[str, list[str]] = {}
    antonyms: set[tuple[str, str]] = set()
    pointers: list[tuple[str, int, str, int]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(" "):  # the license header
            continue
        fields = line.split(" | ")[0].split()
        offset, count = fields[0], int(fields[3], 16)
        words = [re.sub(r"\(.*\)$", "", w).lower() for w in fields[4 : 4 + 2 * count : 2]]
        synsets[offset] = words
        at = 4 + 2 * count
        for i in range(int(fields[at])):
            symbol, target, _, st = fields[at + 1 + 4 * i : at + 5 + 4 * i]
            if symbol == "!":
                pointers.append((offset, int(st[:2], 16), target, int(st[2:], 16)))
    for offset, source, target, goal in pointers:
        if source and goal and target in synsets:
            antonyms.add((synsets[offset][source - 1], synsets[target][goal - 1]))
    synonyms = {(a, b) for words in synsets.values() for a in words for b in words if a != b}
    counts = _tag_counts(root / "cntlist.rev")
    return {"antonym": _common(antonyms, counts), "synonym": _common(synonyms, counts)}


def _tag_counts(path: Path) -> Counter:
    """How often each lemma is tagged in WordNet's sense-tagged corpora (``cntlist.rev``)."""
    counts: Counter = Counter()
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, count = line.split()
            counts[key.split("%")[0]] += int(count)
    return counts


def _common(pairs: set[tuple[str, str]], counts: Counter) -> list[tuple[str, str]]:
    """Pairs of plain lowercase words of 3-8 letters, each tagged at least :data:`MIN_TAGS`
    times, one per ``x`` (its most often tagged ``y``), sorted.

    >>> tags = Counter(hot=20, cold=30, cool=12, big=50)
    >>> _common({("hot", "cold"), ("hot", "cool"), ("big", "x")}, tags)
    [('hot', 'cold')]
    """
    plain = re.compile(r"^[a-z]{3,8}$")
    best: dict[str, str] = {}
    for x, y in sorted(pairs):
        if plain.match(x) and plain.match(y) and min(counts[x], counts[y]) >= MIN_TAGS:
            if x not in best or counts[y] > counts[best[x]]:
                best[x] = y
    return sorted(best.items())


def word_tasks(*, seed: int = 0, size: int = SIZE, wordnet: Path = WORDNET) -> list[Task]:
    """The six word tasks (the WordNet two only where WordNet is installed), at most ``size``
    pairs each, drawn with ``seed``.

    Example:
        >>> [t.name for t in word_tasks()][:2]                           # doctest: +SKIP
        ['antonym', 'synonym']
    """
    found = wordnet_pairs(wordnet)
    if not found:
        log.info(
            "antonym and synonym tasks skipped: no WordNet at %s; install Debian's "
            "wordnet-base (make wordnet) or set IHPROBE_WORDNET",
            wordnet,
        )
    rng = random.Random(seed)
    every = found | tables()
    return [
        Task(name, tuple(rng.sample(pairs, min(size, len(pairs))))) for name, pairs in every.items()
    ]


def default_tasks(*, seed: int = 0, wordnet: Path | None = None) -> list[Task]:
    """The tasks ``fv_scores`` runs when given none: the built-in tasks and the word tasks
    (``wordnet``: where WordNet is read, default :data:`WORDNET`).

    >>> len(default_tasks(wordnet=Path("/nonexistent")))
    11
    """
    return builtin_tasks(seed=seed) + word_tasks(seed=seed, wordnet=wordnet or WORDNET)


def default_tasks_digest(*, seed: int = 0, wordnet: Path | None = None) -> str:
    """The sha256 of :func:`default_tasks` (each task's :func:`task_digest`): what a results
    cache keys ``tasks=None`` by, so the set that installing WordNet changes is a new key.
    Computed once per process for each seed and WordNet folder (reading WordNet takes about
    0.75 s).

    >>> default_tasks_digest(wordnet=Path("/nonexistent")) == default_tasks_digest()
    ... # doctest: +SKIP
    False
    """
    return _digest(seed, Path(wordnet or WORDNET))


@functools.cache
def _digest(seed: int, wordnet: Path) -> str:
    digests = [task_digest(task) for task in default_tasks(seed=seed, wordnet=wordnet)]
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()
