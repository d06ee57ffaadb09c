"""`accelenv.lazyre.lazy` stands for `re.compile`: it compiles once, on first use, and answers as the pattern."""

from __future__ import annotations

import re

import pytest

from accelenv.lazyre import LazyPattern, lazy


def test_it_compiles_on_first_use_only(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []
    real = re.compile

    def counting(pattern: str, flags: int = 0) -> re.Pattern[str]:
        calls.append((pattern, flags))
        return real(pattern, flags)

    monkeypatch.setattr(re, "compile", counting)
    pattern = lazy(r"(?P<word>\w+)=(\d+)", re.ASCII)
    assert calls == []
    assert pattern.match("a=1")["word"] == "a"
    assert pattern.sub("x", "a=1 b=2") == "x x"
    assert pattern.findall("a=1 b=2") == [("a", "1"), ("b", "2")]
    assert calls == [(r"(?P<word>\w+)=(\d+)", re.ASCII)]


def test_it_answers_as_the_compiled_pattern() -> None:
    source, flags = r"^\s*key\s*:", re.IGNORECASE | re.MULTILINE
    pattern, compiled = lazy(source, flags), re.compile(source, flags)
    text = "x\n  KEY: 1\nkey:2"
    assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in compiled.finditer(text)]
    assert (pattern.pattern, pattern.flags, pattern.groups) == (compiled.pattern, compiled.flags, compiled.groups)
    assert isinstance(pattern, LazyPattern)
    assert "key" in repr(pattern)


def test_a_bad_pattern_fails_where_it_is_used() -> None:
    pattern = lazy(r"(unclosed")
    with pytest.raises(re.error):
        pattern.match("x")


def test_every_lazy_pattern_of_accelenv_compiles() -> None:
    """A lazy pattern is compiled only when used: this compiles them all, so a typo fails here, not on a host."""
    import importlib
    import pkgutil

    import accelenv

    found = []
    for info in pkgutil.walk_packages(accelenv.__path__, "accelenv."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        found += [(info.name, name) for name, v in vars(module).items() if isinstance(v, LazyPattern) and v.pattern]
    assert len(found) >= 15, found  # redact's and cdi's at least
