"""The note names keyword search compares: a path's stem as pathlib has it."""

from pathlib import PurePosixPath

import pytest

from kbase.search.keyword import _stem


@pytest.mark.parametrize(
    "path",
    [
        "a.md",
        "x/y/Garden.md",
        "x/.hidden",
        "x/.hidden.md",
        "a/b.tar.gz",
        "a/b.",
        "a/b",
        "",
        "é/ü.txt",
    ],
)
def test_a_stem_is_pathlibs(path):
    assert _stem(path) == PurePosixPath(path).stem
