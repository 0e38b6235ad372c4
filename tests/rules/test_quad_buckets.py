"""The bucketed quads of a full rule run (rules/quad_buckets.py): whatever the bucket count, the
difference and the results' tally are those of the two sets compared whole in memory."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from luma.rules import quad_buckets as qb
from luma.rules.results import Results

G = "https://w3id.org/luma/id/graph/derived/r"
T = "https://w3id.org/luma/ns#Thing"
_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"


def _quad(s: int, p: int, o: int) -> bytes:
    pred = _TYPE if p == 0 else f"<urn:p{p}>"
    obj = f"<{T}>" if p == 0 else f'"{o}"'
    return f"<urn:s{s}> {pred} {obj} <{G}> .".encode()


quads = st.sets(st.builds(_quad, st.integers(0, 12), st.integers(0, 3), st.integers(0, 3)), max_size=60)


@settings(max_examples=60, deadline=None)
@given(before=quads, after=quads, k=st.sampled_from([1, 2, 4, 16]), typed=st.booleans())
def test_the_difference_bucket_by_bucket_is_the_difference_in_memory(before, after, k, typed):
    results = Results(G, T if typed else None)
    work = Path(tempfile.mkdtemp())
    try:
        old = qb.Buckets.write(work / "old", list(before) + list(before)[:3], k)  # duplicates go
        new = qb.Buckets.write(work / "new", after, k)
        assert set(old.lines()) == before and set(new.lines()) == after
        diff = qb.compare(old, new, results, work)
        assert set(qb.read_lines(diff.added_file)) == after - before
        assert set(qb.read_lines(diff.removed_file)) == before - after
        assert (diff.facts, diff.new, diff.removed, diff.before_quads) == \
            (len(after), len(after - before), len(before - after), len(before))
        assert diff.tally() == results.tally(before, after)
    finally:
        shutil.rmtree(work)


@settings(max_examples=30, deadline=None)
@given(lines=quads, more=quads, k=st.sampled_from([1, 4]), k2=st.sampled_from([1, 2, 8]))
def test_appends_and_a_new_bucket_count_keep_the_set(lines, more, k, k2):
    work = Path(tempfile.mkdtemp())
    try:
        kept = qb.Buckets.write(work / "a", lines, k)
        kept.append(more - lines)
        assert qb.Buckets.open(work / "a").k == k
        assert sorted(kept.lines()) == sorted(lines | more)
        again = qb.rebucket(kept, k2, work / "b")
        assert set(again.lines()) == lines | more and again.k == k2
        for i in range(k2):  # a subject's quads in one bucket: the tally adds up per bucket
            subjects = {line.split(b" ", 1)[0] for line in again.read(i)}
            assert all(qb._bucket(s + b" ", k2) == i for s in subjects)
    finally:
        shutil.rmtree(work)


def test_ntriples_become_quads_across_block_ends(tmp_path):
    lines = [f'<urn:s{i}> <urn:p> "{"x" * (i % 97)}" .' for i in range(200_000)]
    path = tmp_path / "a.nt"
    path.write_bytes(("\n".join(lines) + "\n").encode())  # ~9 MB: the 4 MiB blocks split lines
    got = list(qb.ntriples_as_quads(path, G))
    assert got == [line[:-2].encode() + f" <{G}> .".encode() for line in lines]
    extra = [b"<urn:a> <urn:b> <urn:c> <urn:g> ."]
    for k in (1, 4):  # one bucket: rewritten a block at a time; more: line by line
        kept = qb.Buckets.from_ntriples(tmp_path / f"k{k}", path, G, k, extra)
        assert sorted(kept.lines()) == sorted(set(got) | set(extra))
    path.write_bytes("\n".join(lines[:3]).encode())  # no newline at the end
    assert len(list(qb.ntriples_as_quads(path, G))) == 3
    assert len(set(qb.Buckets.from_ntriples(tmp_path / "last", path, G, 1).lines())) == 3


def test_bucket_counts_grow_with_the_set_in_powers_of_two():
    assert qb.bucket_count(0) == 1 and qb.bucket_count(qb.BUCKET_BYTES) == 1
    assert qb.bucket_count(qb.BUCKET_BYTES + 1) == 2
    assert qb.bucket_count(100 * qb.BUCKET_BYTES) == 128
    assert qb.bucket_count(10 ** 15) == qb.MAX_BUCKETS
    assert qb.Buckets.open(Path("/nonexistent/luma")) is None
