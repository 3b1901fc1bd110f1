"""The word tasks of FV scores: WordNet read at run time (antonyms through its ``!`` pointers,
synonyms within a synset, common words only), skipped cleanly without WordNet, the tables
ihprobe writes itself, and each task's source and license stated."""

from __future__ import annotations

import logging

import pytest

from ihprobe.causal import word_tasks as wt
from ihprobe.causal.fv import _tasks
from ihprobe.causal.tasks import builtin_tasks

# two synsets of a fake data.adj: "hot" (word 1) has antonym "cold" (word 1 of synset 2),
# both common; "lukewarm" shares "hot"'s synset but is rare; "tepid" is cold's synonym
DATA = (
    "  1 This software and database is being provided ... (a license header line)\n"
    "00000001 00 a 02 hot 0 lukewarm 0 001 ! 00000002 a 0101 | of high temperature\n"
    "00000002 00 a 02 cold 0 tepid 0 001 ! 00000001 a 0101 | of low temperature\n"
)
COUNTS = "hot%3:00:01:: 1 40\ncold%3:00:01:: 1 30\ntepid%3:00:01:: 1 12\nlukewarm%3:00:00:: 1 2\n"


def test_antonyms_and_synonyms_are_read_from_wordnet_files(tmp_path):
    (tmp_path / "data.adj").write_text(DATA)
    (tmp_path / "cntlist.rev").write_text(COUNTS)
    found = wt.wordnet_pairs(tmp_path)
    assert found["antonym"] == [("cold", "hot"), ("hot", "cold")]
    assert found["synonym"] == [("cold", "tepid"), ("tepid", "cold")]  # lukewarm is rare
    names = [t.name for t in wt.word_tasks(wordnet=tmp_path)]
    assert names == ["antonym", "synonym", *wt.tables()]


def test_without_wordnet_the_two_tasks_are_skipped_with_a_line_saying_how(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger=wt.__name__):
        names = [t.name for t in wt.word_tasks(wordnet=tmp_path / "none")]
    assert names == list(wt.tables())
    assert "make wordnet" in caplog.text


def test_every_task_states_its_source_and_license_and_maps_each_x_once():
    assert set(wt.SOURCES) == {"antonym", "synonym", *wt.tables()}
    assert all("license" in source for source in wt.SOURCES.values())
    for name, pairs in wt.tables().items():
        xs = [x for x, _ in pairs]
        assert len(set(xs)) == len(xs) >= 20, name
        assert all(" " not in x + y and x != y for x, y in pairs), name
    assert dict(wt.tables()["country_capital"])["France"] == "Paris"
    assert dict(wt.tables()["present_past"])["go"] == "went"


@pytest.mark.skipif(not (wt.WORDNET / "data.adj").is_file(), reason="WordNet not installed")
def test_the_installed_wordnet_gives_common_antonyms():
    found = dict(wt.wordnet_pairs()["antonym"])
    assert found["bad"] == "good" and found["alive"] == "dead"


def test_fv_scores_default_tasks_are_the_built_ins_and_the_word_tasks():
    names = [t.name for t in _tasks(None, 0)]
    assert names[:7] == [t.name for t in builtin_tasks()]
    assert set(wt.tables()) <= set(names)
