"""Regular expressions the matrix brings (a family's `arch_pattern`): which ones accelenv agrees to run.

Python's `re` backtracks: a repeated group whose body can itself repeat or alternate (`(a+)+`, `(a|aa)*`,
`(\\w+\\s?)*`) takes exponential time on a long non-matching string, and every command that validates the matrix
would hang on it. `backtracking_risk` reads the pattern's text (it never runs it) and names such a group; so do
back-references, which no architecture name needs, and more than four repetitions in one pattern (`a*a*a*a*a*b`
costs n**5 steps: polynomial, but a hang all the same). The check is conservative: a plain pattern
(`sm_[0-9]{2,3}`, `v[0-9]+[a-z]*|tpu[0-9]+x`) passes, and a nested repetition is refused even where it would
happen to be harmless; the fix is always to write the repetition once.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_REPETITIONS = 4  # adjacent repetitions over the same characters cost n**k steps: 64**4 is milliseconds


@dataclass
class _Counter:
    repetitions: int = 0


@dataclass
class _Group:
    start: int  # index of the opening parenthesis
    repeats: bool = False  # something inside repeats (a quantifier)
    alternates: bool = False  # a `|` inside


def backtracking_risk(pattern: str) -> str | None:
    """Why running `pattern` could take exponential time, or None when it cannot (as far as its text shows)."""
    stack = [_Group(start=-1)]
    counter = _Counter()
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if i + 1 < len(pattern) and pattern[i + 1] in "123456789":
                return f"a back-reference ({pattern[i : i + 2]})"
            i = _after_atom(pattern, i + 2, stack[-1], counter)
        elif char == "[":
            i = _after_atom(pattern, _class_end(pattern, i), stack[-1], counter)
        elif char == "(":
            if pattern.startswith("(?P=", i):
                return f"a back-reference ({pattern[i : pattern.find(')', i) + 1]})"
            stack.append(_Group(start=i))
            i += 1
        elif char == ")" and len(stack) > 1:
            group = stack.pop()
            end, repeated = _quantifier(pattern, i + 1)
            if repeated and (group.repeats or group.alternates):
                inner = "repeats" if group.repeats else "alternates"
                return f"the group {pattern[group.start : i + 1]!r} {inner} inside and is itself repeated"
            stack[-1].repeats |= group.repeats or end > i + 1
            stack[-1].alternates |= group.alternates
            counter.repetitions += repeated
            i = end
        elif char == "|":
            stack[-1].alternates = True
            i += 1
        else:
            i = _after_atom(pattern, i + 1, stack[-1], counter)
    if counter.repetitions > MAX_REPETITIONS:
        return f"more than {MAX_REPETITIONS} repetitions (*, +, {{m,n}}): each can try every split of a long name"
    return None


def _after_atom(pattern: str, i: int, group: _Group, counter: _Counter) -> int:
    """Past the quantifier (if any) that follows an atom ending before `i`; marks the group as repeating."""
    end, many = _quantifier(pattern, i)
    if end > i:
        group.repeats = True
    counter.repetitions += many
    return end


def _quantifier(pattern: str, i: int) -> tuple[int, bool]:
    """(index past the quantifier at `i`, whether it allows more than one repetition); (i, False) for none."""
    if i >= len(pattern):
        return i, False
    if pattern[i] in "*+?":
        end, many = i + 1, pattern[i] != "?"
    elif pattern[i] == "{" and (close := pattern.find("}", i)) > i and _is_count(pattern[i + 1 : close]):
        end, many = close + 1, _allows_many(pattern[i + 1 : close])
    else:
        return i, False
    if end < len(pattern) and pattern[end] in "?+":  # lazy or possessive
        end += 1
    return end, many


def _is_count(text: str) -> bool:
    """`{3}`, `{2,}`, `{,4}`, `{2,5}`: what `re` reads as a repetition count (anything else is literal)."""
    low, comma, high = text.partition(",")
    return (
        bool(low or high) and (not low or low.isdigit()) and (not high or high.isdigit()) and (bool(comma) or bool(low))
    )


def _allows_many(count: str) -> bool:
    low, comma, high = count.partition(",")
    if comma:
        return not high or len(high) > 9 or int(high) > 1
    return len(low) > 9 or int(low) > 1


def _class_end(pattern: str, i: int) -> int:
    """Index past the character class that opens at `i` (`[]a]` and `[^]a]` hold a literal `]`)."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1
