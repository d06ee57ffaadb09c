"""Node labels: what a node is and whether it conforms to each environment, in a form schedulers select on.

A view, not a new judge: every `accelenv.io/env.<ENV>` label is the verdict of the findings `check` returned for
that environment, and the facts are the report's. Keys and values follow the label syntax Ray 2.60 checks
(`ray/_private/label_utils.py`) and Kubernetes requires: a name of at most 63 characters of `[A-Za-z0-9._-]`,
alphanumeric at both ends, under the `accelenv.io/` prefix. A value that does not fit (a driver string with `+`,
a long product name) is encoded deterministically (`encode_value`).

One key under `ray.io/` is written, `ray.io/gpu-domain`, and only from a verified multi-node NVLink fabric (every GPU
registered, one cluster UUID and clique): Ray's own recipe for GB200/GB300 packs on it
(`placement_group(..., topology_strategy={"ray.io/gpu-domain": "STRICT_PACK"})`), Ray 2.60 does not detect it (its
documentation has users set it by hand), and Ray 2.60 accepts it from `ray start --labels-file` (only the label
syntax is checked there). Every other `ray.io/` key is Ray's own and never made: a `--labels-file` key there would
override Ray's label.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from accelenv.check.verdict import verdict
from accelenv.errors import UsageError
from accelenv.host.topology import tpu_topology
from accelenv.records import field, frozen
from accelenv.redact import one_line, redact_text
from accelenv.schema_values import ENV_LABEL  # one limit for an id: the matrix holds ids to it

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from accelenv.check.verdict import Finding
    from accelenv.host.fabric import NvlinkDomain
    from accelenv.host.report import HostReport

PREFIX = "accelenv.io/"
RESERVED = "ray.io/"
NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")  # label_utils.LABEL_REGEX, Kubernetes' name
_PREFIX = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*")
_UNFIT = re.compile(r"[^A-Za-z0-9._-]+")
DIGEST = 10  # hex characters of sha256 that mark an encoded value
FORMATS = ("json", "ray", "ray-env", "nfd")
# the label a placement group packs on, per topology (`topology_strategy={DOMAIN_KEY: "STRICT_PACK"}`)
NVLINK_DOMAIN = PREFIX + "nvlink-domain"
GPU_DOMAIN = RESERVED + "gpu-domain"  # Ray's topology label for an NVLink domain: the one ray.io/ key written
TPU_SLICE = PREFIX + "tpu-slice"
# what `check --ray` compares for drift: the labels that say what the node is, and the env verdicts
FACT_KEYS = ("family", "sku", "arch", "devices", "device-memory-mib", "driver", "runtime")
# names only the node itself says: a platform fact of one of these names (an operator's `sku`) is not a label
OWN_NAMES = (*FACT_KEYS, "nvlink-cluster", "nvlink-clique", "nvlink-domain", "scale-up", "scale-up-devices")


@frozen
class LabelSet:
    labels: dict[str, str]
    encoded: dict[str, str] = field(default_factory=dict)  # key -> the value before encoding, where it did not fit
    judged: dict[str, str] = field(default_factory=dict)  # env id -> what its verdict judged (check.subject)

    def as_json(self) -> dict[str, object]:
        found: dict[str, object] = {
            "labels": dict(sorted(self.labels.items())),
            "encoded": dict(sorted(self.encoded.items())),
        }
        if self.judged:
            found["judged"] = dict(sorted(self.judged.items()))
        return found


def encode_value(text: str) -> str:
    """`text` when it is a valid label value, else a deterministic stand-in: its runs of other characters replaced
    by `_`, trimmed to alphanumeric ends and to 52 characters, then `-` and the first 10 hex digits of the sha256 of
    `text` (so two values that clean up alike stay apart). An empty value stays empty (allowed)."""
    if text == "" or NAME.fullmatch(text):
        return text
    import hashlib  # only for a value that needs a stand-in: labels runs on a node's start-up path

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST]
    head = _UNFIT.sub("_", text)[:52]
    head = re.sub(r"\A[^A-Za-z0-9]+|[^A-Za-z0-9]+\Z", "", head)
    return f"{head}-{digest}" if head else f"x-{digest}"


def key_problem(key: str) -> str | None:
    """Why `key` is not a label key accelenv may emit (Ray's and Kubernetes' rules, and never `ray.io/`)."""
    prefix, slash, name = key.rpartition("/")
    if key == GPU_DOMAIN:
        return None
    if key.startswith(RESERVED) or prefix == RESERVED.rstrip("/"):
        return f"{key}: the {RESERVED} prefix is Ray's own"
    if slash and (len(prefix) > 253 or not _PREFIX.fullmatch(prefix)):
        return f"{key}: the prefix {prefix!r} is not a DNS subdomain"
    if not NAME.fullmatch(name):
        return f"{key}: the name {name!r} is not at most 63 of [A-Za-z0-9._-], alphanumeric at both ends"
    return None


def value_problem(value: str) -> str | None:
    return None if value == "" or NAME.fullmatch(value) else f"{value!r} is not a label value"


def node_labels(
    report: HostReport,
    verdicts: Mapping[str, list[Finding]],
    *,
    family: str,
    nvlink: NvlinkDomain | None = None,
    metadata: Mapping[str, str] | None = None,
) -> LabelSet:
    """The label set of one node: what it is (from `report`), one verdict per environment (from the findings
    `check` returned for it), the topology domains it belongs to, and what the platform said (`metadata`: the
    facts of `host/platform.py`: instance-type, zone, placement-group, rack, block, pod, ...)."""
    raw: dict[str, str] = {PREFIX + "family": family}
    acc = report.accelerator(family)
    if acc is not None and acc.devices:
        skus = sorted({d.sku or "unknown" for d in acc.devices})
        archs = sorted({d.arch for d in acc.devices if d.arch})
        memory = [d.memory_mib for d in acc.devices if d.memory_mib is not None]
        raw[PREFIX + "sku"] = skus[0] if len(skus) == 1 else "mixed"
        if len(archs) == 1:
            raw[PREFIX + "arch"] = archs[0]
        raw[PREFIX + "devices"] = str(len(acc.devices))
        if memory:
            raw[PREFIX + "device-memory-mib"] = str(min(memory))  # the smallest: what a job can count on
    elif acc is None or not acc.devices:
        raw[PREFIX + "devices"] = "0"
    if acc is not None and acc.driver_version:
        raw[PREFIX + "driver"] = acc.driver_version
    if acc is not None and acc.runtime_version:
        raw[PREFIX + "runtime"] = acc.runtime_version
    if family == "cpu" and report.os.arch:
        raw[PREFIX + "arch"] = report.os.arch
    for env_id, found in sorted(verdicts.items()):
        raw[f"{PREFIX}{ENV_LABEL}{env_id}"] = str(verdict(found))
    if nvlink is not None:
        raw[PREFIX + "nvlink-cluster"] = nvlink.cluster_uuid
        raw[PREFIX + "nvlink-clique"] = nvlink.clique_id
        raw[NVLINK_DOMAIN] = nvlink.name
        raw[GPU_DOMAIN] = nvlink.name  # only from a verified fabric (`fabric.nvlink_domain`)
    if family == "tpu":
        env = report.environment
        tpu = {"tpu-slice": env.get("TPU_NAME"), "tpu-worker-id": env.get("TPU_WORKER_ID")}
        tpu["tpu-topology"] = report.topology.get("tpu_topology") or tpu_topology(env)
        raw.update({PREFIX + k: str(v) for k, v in tpu.items() if v})
    raw.update(_scale_up(report, family))
    for name, value in sorted((metadata or {}).items()):
        if name not in OWN_NAMES:
            raw.setdefault(PREFIX + name, value)  # the node's own word (TPU_NAME, ...) first
    return labelled(raw)


def _scale_up(report: HostReport, family: str) -> dict[str, str]:
    """From the neutral topology (host/links.py): the link kind one scale-up group of all devices shares
    (`scale-up`: nvlink, xgmi, neuronlink, ici) and the size of the largest group (`scale-up-devices`)."""
    devices = report.topology.get("devices")
    topo = devices.get(family) if isinstance(devices, dict) else None
    if not isinstance(topo, dict) or not isinstance(topo.get("groups"), list) or not topo.get("links_known", True):
        return {}
    found = {PREFIX + "scale-up-devices": str(max((len(g) for g in topo["groups"] if isinstance(g, list)), default=0))}
    if isinstance(topo.get("scale_up"), str):
        found[PREFIX + "scale-up"] = topo["scale_up"]
    return found


def labelled(raw: Mapping[str, str]) -> LabelSet:
    """Every key checked (a bad one is a usage error naming it), every value encoded where it does not fit."""
    problems = [problem for key in raw if (problem := key_problem(key))]
    if problems:
        raise UsageError("cannot make node labels: " + "; ".join(sorted(problems)))
    labels, encoded = {}, {}
    for key, raw_value in raw.items():
        # redacted as read, before encoding: encoding would hide `token=...` from redaction (`=` becomes `_`),
        # and redacting the encoded text would put `<redacted>`, which no scheduler accepts, into a label
        value = redact_text(raw_value)
        labels[key] = encode_value(value)
        if labels[key] != value:
            encoded[key] = value
    return LabelSet(labels=dict(sorted(labels.items())), encoded=encoded)


def render(labels: LabelSet, fmt: str, *, header: str | Sequence[str]) -> str:
    """The label set as `fmt`: json (with the encoded originals), ray (the YAML mapping `ray start --labels-file`
    reads, every value double-quoted), ray-env (the RAY_OVERRIDE_LABELS JSON), nfd (a node-feature-discovery local
    feature file: `key=value` lines). `header` is the comment's text, one comment line per item: a line break
    inside an item (a file name's) is shown as an escape, never a line of its own."""
    for key, value in labels.labels.items():  # the last guard: nothing leaves that Ray or Kubernetes would refuse
        problem = key_problem(key) or value_problem(value)
        if problem:
            raise UsageError(f"cannot write node labels: {problem}")
    comment = "".join(f"# {_comment_text(line)}\n" for line in ([header] if isinstance(header, str) else header))
    if fmt == "json":
        return json.dumps(labels.as_json(), indent=2, sort_keys=True) + "\n"
    if fmt == "ray":
        return comment + "".join(f"{json.dumps(k)}: {json.dumps(v)}\n" for k, v in labels.labels.items())
    if fmt == "ray-env":
        return json.dumps(labels.labels, sort_keys=True, separators=(",", ":")) + "\n"
    if fmt == "nfd":
        return comment + "".join(f"{k}={v}\n" for k, v in labels.labels.items())
    raise UsageError(f"unknown label format {fmt!r}: choose one of {', '.join(FORMATS)}")


def _comment_text(header: str) -> str:
    """`header` as the text of one comment line: line breaks and control characters shown as escapes, and never
    starting with `+` (node-feature-discovery reads a `# +key=value` comment as a directive, `+expiry-time=`)."""
    text = one_line(redact_text(header))
    return "\\" + text if text.startswith("+") else text


def drift(recorded: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """Labels the node was started with that no longer say what it is: each accelenv label present both in
    `recorded` (the node's labels in Ray) and `now` (computed from the node as it is) whose values differ, and
    each fact label `now` has that the node was started without or with. Labels only one side computes (another
    environment's verdict, a topology or metadata label) are not compared."""
    out = []
    if recorded.get(PREFIX + "family", now.get(PREFIX + "family")) != now.get(PREFIX + "family"):
        # judged through another family's eyes (a cpu environment on a GPU node): only the verdicts compare
        now = {k: v for k, v in now.items() if k.startswith(PREFIX + ENV_LABEL)}
    for key in sorted(now):
        if key in recorded and recorded[key] != now[key]:
            out.append(f"{key}={recorded[key]!r} at start, {now[key]!r} now")
        elif key not in recorded and key.removeprefix(PREFIX) in FACT_KEYS and _has_accelenv(recorded):
            out.append(f"{key} missing at start, {now[key]!r} now")
    return out


def _has_accelenv(labels: Mapping[str, str]) -> bool:
    return any(k.startswith(PREFIX) for k in labels)
