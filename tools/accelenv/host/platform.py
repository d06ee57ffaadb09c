"""What only the platform knows about a node: its cloud, instance type, zone, placement, rack or slice.

Sources, each answering for itself (`SourceAnswer`: which facts it gave, or why it gave none):

- the operator: a facts file (`ACCELENV_FACTS`, default /etc/accelenv/facts.toml, a `[facts]` table) and
  `ACCELENV_FACT_<NAME>` environment variables: rack, block, pod, any domain name the operator keeps;
- Kubernetes: the node's topology labels where the pod is given them (a downward-API labels file,
  `ACCELENV_POD_LABELS`, default /etc/podinfo/labels);
- the clouds' metadata servers (Google Cloud, AWS, Azure: `host/metadata.py`), asked only with `--metadata`, and
  only the cloud the host's DMI fields name (as cloud-init's ds-identify decides, read through the `Root` so a
  captured host answers as it would), or a cloud whose override variable points at a server.

Everything here is pure or reads through the `Root`; the network is `host/metadata.py`'s. The operator's word
comes first, then Kubernetes', then the cloud's, and every source is reported, answered or not.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from accelenv.records import field, frozen

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.root import Root

Cloud = Literal["gce", "aws", "azure"]
CLOUDS: tuple[Cloud, ...] = ("gce", "aws", "azure")
Status = Literal["answered", "not-asked", "no-answer", "refused", "bad-answer", "absent"]

DMI = "/sys/class/dmi/id"
# world-readable DMI fields (product_serial and product_uuid are root's only); cloud-init's ds-identify reads these
DMI_FIELDS = ("sys_vendor", "product_name", "board_asset_tag", "chassis_asset_tag", "bios_vendor")
AZURE_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"  # every Azure VM's chassis asset tag (cloud-init, DataSourceAzure)
_EC2_INSTANCE = re.compile(r"i-[0-9a-f]{8,17}")

FACTS_FILE = "/etc/accelenv/facts.toml"
FACTS_VARIABLE = "ACCELENV_FACTS"
FACT_PREFIX = "ACCELENV_FACT_"
POD_LABELS_FILE = "/etc/podinfo/labels"
POD_LABELS_VARIABLE = "ACCELENV_POD_LABELS"
# Kubernetes node labels a pod may be given (KEP-4742 copies the topology ones onto pods) -> fact names
KUBERNETES_KEYS = {
    "topology.kubernetes.io/zone": "zone",
    "topology.kubernetes.io/region": "region",
    "node.kubernetes.io/instance-type": "instance-type",
    "cloud.google.com/gce-topology-block": "block",
    "cloud.google.com/gce-topology-subblock": "subblock",
    "cloud.google.com/gce-topology-host": "host",
    "cloud.google.com/gke-tpu-topology": "tpu-topology",
}
# a fact name: a label name accelenv.io/<name> can carry; a value: short, printable, no spaces
FACT_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?")
FACT_VALUE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._:/-]{0,198}[A-Za-z0-9])?")
MAX_FACTS = 64
MAX_FILE = 64 * 1024


@frozen
class SourceAnswer:
    """What one source said: `facts` when it answered, else `status` and `why` say what happened."""

    source: str  # operator, kubernetes, gce, aws, azure
    status: Status
    why: str = ""
    facts: dict[str, str] = field(default_factory=dict)
    rejected: tuple[str, ...] = ()  # values the source gave that are not facts (a lie, HTML, a credential-shaped blob)

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "status": self.status, "why": self.why}
        data["facts"] = dict(sorted(self.facts.items()))
        if self.rejected:
            data["rejected"] = list(self.rejected)
        return data


def checked(source: str, said: Mapping[str, str]) -> SourceAnswer:
    """`said` (fact name -> value) as an answer: each value a fact when it has a fact's shape, else rejected with
    its name (and never its text, which may be anything). No facts and something rejected is a bad answer."""
    facts: dict[str, str] = {}
    rejected: list[str] = []
    for name, value in list(said.items())[:MAX_FACTS]:
        text = value.strip()
        if FACT_NAME.fullmatch(name) and FACT_VALUE.fullmatch(text):
            facts[name] = text
        else:
            rejected.append(name if FACT_NAME.fullmatch(name) else "(a name that is not a fact name)")
    if facts:
        return SourceAnswer(source=source, status="answered", facts=facts, rejected=tuple(rejected))
    if rejected:
        why = f"nothing usable: {', '.join(rejected)} not of a fact's shape"
        return SourceAnswer(source=source, status="bad-answer", why=why, rejected=tuple(rejected))
    return SourceAnswer(source=source, status="answered", why="no facts")


# ---- which cloud (DMI) -----------------------------------------------------------------------------------------


def dmi_fields(root: Root) -> dict[str, str]:
    """The DMI fields ds-identify reads, those the host has."""
    found = {name: root.read_value(f"{DMI}/{name}") for name in DMI_FIELDS}
    return {name: value for name, value in found.items() if value}


def identify(dmi: Mapping[str, str], hypervisor_uuid: str | None = None) -> tuple[Cloud | None, str]:
    """The cloud the DMI fields name, and the evidence; (None, why) on a host of no known cloud. The rules are
    cloud-init's ds-identify: Azure's chassis asset tag, Google's product name or vendor, Amazon EC2's vendor (Nitro)
    or a Xen hypervisor UUID starting ec2; an EC2 instance id as the board asset tag with Amazon in the BIOS."""
    vendor, product = dmi.get("sys_vendor", ""), dmi.get("product_name", "")
    if dmi.get("chassis_asset_tag") == AZURE_ASSET_TAG:
        return "azure", f"chassis_asset_tag {AZURE_ASSET_TAG}"
    if product == "Google Compute Engine" or vendor == "Google":
        return "gce", f"sys_vendor {vendor!r}, product_name {product!r}"
    if vendor == "Amazon EC2":
        return "aws", "sys_vendor 'Amazon EC2'"
    if (hypervisor_uuid or "").lower().startswith("ec2"):
        return "aws", "/sys/hypervisor/uuid starts with ec2"
    if "amazon" in dmi.get("bios_vendor", "").lower() and _EC2_INSTANCE.fullmatch(dmi.get("board_asset_tag", "")):
        return "aws", "bios_vendor Amazon, board_asset_tag an instance id"
    shown = ", ".join(f"{k} {v!r}" for k, v in sorted(dmi.items()) if k in ("sys_vendor", "product_name"))
    return None, f"DMI names no cloud ({shown or 'no DMI fields'})"


# ---- the operator ----------------------------------------------------------------------------------------------


def operator_facts(root: Root, environ: Mapping[str, str]) -> SourceAnswer:
    """The facts file (`[facts]`: name = "value") and `ACCELENV_FACT_<NAME>` variables (the variable wins). A file
    that is named by the variable but missing, or that is not TOML of that shape, is a refused source, said so."""
    said: dict[str, str] = {}
    problems: list[str] = []
    named = environ.get(FACTS_VARIABLE, "").strip()
    path = named or FACTS_FILE
    text = root.read_text(path)
    why = _unreadable(root, path)
    if text is None and (named or why):
        problems.append(f"{path}{f' ({FACTS_VARIABLE})' if named else ''} cannot be read{f': {why}' if why else ''}")
    elif text is not None:
        import tomllib  # only where the operator wrote a facts file: labels runs on a node's start-up path

        try:
            data = tomllib.loads(text[:MAX_FILE])
        except tomllib.TOMLDecodeError as error:
            problems.append(f"{path}: not TOML ({error})")
        else:
            table = data.get("facts")
            if not isinstance(table, dict):
                problems.append(f'{path}: expected a [facts] table of name = "value"')
            else:
                for name, value in table.items():
                    if isinstance(value, str | int) and not isinstance(value, bool):
                        said[str(name)] = str(value)
                    else:
                        problems.append(f"{path}: facts.{name}: expected a string")
    for variable, value in sorted(environ.items()):
        if variable.startswith(FACT_PREFIX) and len(variable) > len(FACT_PREFIX):
            said[variable[len(FACT_PREFIX) :].lower().replace("_", "-")] = value
    if not said and not problems:
        return SourceAnswer(source="operator", status="absent", why=f"no {path} and no {FACT_PREFIX}* variables")
    answer = checked("operator", said)
    if problems:
        why = "; ".join(problems)
        status: Status = "answered" if answer.facts else "refused"
        return SourceAnswer(source="operator", status=status, why=why, facts=answer.facts, rejected=answer.rejected)
    return answer


# ---- Kubernetes ------------------------------------------------------------------------------------------------

_DOWNWARD = re.compile(r'(?P<key>[A-Za-z0-9./_-]{1,253})="(?P<value>[^"\\]{0,253})"')


def kubernetes_facts(root: Root, environ: Mapping[str, str]) -> SourceAnswer:
    """The node's topology labels from a downward-API labels file (`key="value"` lines, as the kubelet writes
    `metadata.labels`); only the keys of `KUBERNETES_KEYS` are read."""
    named = environ.get(POD_LABELS_VARIABLE, "").strip()
    path = named or POD_LABELS_FILE
    text = root.read_text(path)
    if text is None:
        why = _unreadable(root, path)
        if named or why:
            named_by = f" ({POD_LABELS_VARIABLE})" if named else ""
            reason = f"{path}{named_by} cannot be read{f': {why}' if why else ''}"
            return SourceAnswer(source="kubernetes", status="refused", why=reason)
        return SourceAnswer(source="kubernetes", status="absent", why=f"no downward-API labels file at {path}")
    said = {}
    for line in text[:MAX_FILE].splitlines():
        match = _DOWNWARD.fullmatch(line.strip())
        if match and match["key"] in KUBERNETES_KEYS:
            said[KUBERNETES_KEYS[match["key"]]] = match["value"]
    if not said:
        return SourceAnswer(source="kubernetes", status="answered", why=f"{path} has none of the topology labels")
    return checked("kubernetes", said)


def _unreadable(root: Root, path: str) -> str | None:
    """Why the root could not read `path` when it exists (a FIFO, permission denied, too large), else None."""
    clean = "/" + "/".join(part for part in path.split("/") if part)
    return root.unreadable.get(clean)


# ---- all of it -------------------------------------------------------------------------------------------------


def platform_json(cloud: Cloud | None, evidence: str, answers: list[SourceAnswer]) -> dict[str, Any]:
    """HostReport.platform: the cloud, the facts (the operator's first, then Kubernetes', then the cloud's), and
    what every source said."""
    facts: dict[str, str] = {}
    origin: dict[str, str] = {}
    for answer in answers:
        for name, value in answer.facts.items():
            if name not in facts:
                facts[name], origin[name] = value, answer.source
    if cloud is not None and "cloud" not in facts:
        facts["cloud"], origin["cloud"] = cloud, "dmi"
    return {
        "cloud": cloud,
        "evidence": evidence,
        "facts": dict(sorted(facts.items())),
        "origin": dict(sorted(origin.items())),
        "sources": [answer.as_json() for answer in answers],
    }


def facts_of(platform: Mapping[str, Any]) -> dict[str, str]:
    """The facts of a report's platform section (a snapshot's too), only those of a fact's shape."""
    raw = platform.get("facts")
    if not isinstance(raw, dict):
        return {}
    return {str(k): str(v) for k, v in raw.items() if FACT_NAME.fullmatch(str(k)) and FACT_VALUE.fullmatch(str(v))}


def notes_of(platform: Mapping[str, Any]) -> list[str]:
    """One line per source: which answered (with its facts' names), which did not and why."""
    lines = []
    for item in platform.get("sources", []):
        if not isinstance(item, dict):
            continue
        facts = sorted(item.get("facts") or {})
        said = f": {', '.join(facts)}" if facts else ""
        why = f" ({item.get('why')})" if item.get("why") else ""
        rejected = f"; rejected {', '.join(item.get('rejected', []))}" if item.get("rejected") else ""
        lines.append(f"platform source {item.get('source')}: {item.get('status')}{said}{why}{rejected}")
    return lines
