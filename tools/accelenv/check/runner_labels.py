"""CI runner labels: the node's label set (check/labels.py) as a GitHub Actions runner's labels and a Buildkite
agent's tags. A view, not a new judge: every fact and verdict is a label of the set, renamed to fit.

GitHub (`config.sh --labels a,b,c`): the runner splits the list on commas, trims and drops empty names (actions/
runner docs/adrs/0397-runner-registration-labels.md), and compares labels without regard to case (GitHub's
"Using labels with self-hosted runners"). A label here is lowercase `[a-z0-9._-]`, alphanumeric at both ends, at
most 63 characters (accelenv's own bound, which keeps it a valid Kubernetes label too); a longer one is cut and
given a digest of the whole, as check/labels.py does for values. A verdict becomes a label only when it is pass:
a label has no value, and a job asks for `accelenv-env-<ENV>` (plan/ci.py), so a node that warns or fails on an
environment takes none of its jobs. Facts are `accelenv-<fact>-<value>`.

Buildkite (an agent's `tags` setting, or `--tags`: `key=value` pairs joined by commas): every verdict is
`accelenv-env-<ENV>=pass|warn|fail` and a job selects `accelenv-env-<ENV>: pass`; facts are `accelenv-<fact>=<value>`.
Keys and values keep to `[A-Za-z0-9._-]` (no comma, `=` or space can split a pair).
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from accelenv.check.labels import FACT_KEYS, PREFIX, encode_value

if TYPE_CHECKING:
    from accelenv.check.labels import LabelSet

GITHUB_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,61}[a-z0-9])?")
BUILDKITE_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_UNFIT = re.compile(r"[^a-z0-9._-]+")
FORMATS = ("github-runner", "buildkite-tags")  # beside check/labels.py's FORMATS in `accelenv labels --format`


def github_label(text: str) -> str:
    """`text` as a GitHub runner label: lowercase, `[a-z0-9._-]`, alphanumeric ends, at most 63 characters; a
    text that does not fit is cleaned and cut to 52 characters, then `-` and 10 hex digits of its sha256."""
    lowered = text.lower()
    if GITHUB_LABEL.fullmatch(lowered):
        return lowered
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    head = re.sub(r"\A[^a-z0-9]+|[^a-z0-9]+\Z", "", _UNFIT.sub("_", lowered)[:52])
    return f"{head}-{digest}" if head else f"x-{digest}"


def verdict_label(env_id: str) -> str:
    """The label (GitHub) and tag key (Buildkite) a job for `env_id` selects on."""
    return github_label(f"accelenv-env-{env_id}")


def _facts(labels: LabelSet) -> list[tuple[str, str]]:
    return [
        (key.removeprefix(PREFIX), value)
        for key, value in labels.labels.items()
        if key.removeprefix(PREFIX) in FACT_KEYS and value
    ]


def _verdicts(labels: LabelSet) -> list[tuple[str, str]]:
    """(env id, verdict), from the `env.<ENV>` labels (env ids fit a label name: the matrix's pattern)."""
    return [
        (key.removeprefix(PREFIX + "env."), value)
        for key, value in labels.labels.items()
        if key.startswith(PREFIX + "env.")
    ]


def github_runner(labels: LabelSet) -> list[str]:
    """The labels `config.sh --labels` takes, sorted, without duplicates (GitHub ignores case)."""
    out = {github_label(f"accelenv-{fact}-{value}") for fact, value in _facts(labels)}
    out |= {verdict_label(env) for env, verdict in _verdicts(labels) if verdict == "pass"}
    return sorted(out)


def buildkite_tags(labels: LabelSet) -> list[str]:
    """`key=value` agent tags, sorted."""
    out = [f"accelenv-{fact}={encode_value(value)}" for fact, value in _facts(labels)]
    out += [f"{verdict_label(env)}={encode_value(verdict)}" for env, verdict in _verdicts(labels)]
    return sorted(out)


def render_runner(labels: LabelSet, fmt: str) -> str:
    """One line: the comma-separated list `config.sh --labels` (github-runner) or an agent's `tags` (buildkite-tags)
    takes."""
    found = github_runner(labels) if fmt == "github-runner" else buildkite_tags(labels)
    return ",".join(found) + "\n"
