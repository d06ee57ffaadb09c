"""The clouds' metadata servers (Google Cloud, AWS IMDSv2, Azure IMDS), asked only when the user allows it
(`--metadata`) and only for the listed keys: never a credential path (AWS `iam/security-credentials`, Azure's
`identity/oauth2/token`, GCE's `service-accounts`).

Each cloud's server sits at its link-local address unless the variable its own SDK reads points elsewhere:
`GCE_METADATA_HOST` (google-auth, a host[:port]), `AWS_EC2_METADATA_SERVICE_ENDPOINT` (botocore, a URL),
`AZURE_POD_IDENTITY_AUTHORITY_HOST` (azure-identity's IMDS authority, a URL). A source whose variable is set is
asked; otherwise only the cloud the host's DMI fields name (`platform.identify`), so a host of no cloud asks nobody.

Through `accelenv.netio` like every exchange, with proxies bypassed (the servers are on the host's own link):
`TIMEOUT` bounds connecting and each read, the whole exchange may take `netio.DEADLINE_FACTOR` times that, an
answer over `MAX_VALUE` is not a metadata value, and the first exchange of a source that fails ends that source."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from accelenv.host.platform import CLOUDS, Cloud, SourceAnswer, checked

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.platform import Status
    from accelenv.host.root import Root
    from accelenv.netio import Answer, Transport

METADATA_URL = "http://169.254.169.254/computeMetadata/v1/"  # google-auth's default IP root
TIMEOUT = 1.0
MAX_VALUE = 64 * 1024  # a machine type, a zone, Azure's compute document: some kilobytes at most

OVERRIDES: dict[Cloud, str] = {
    "gce": "GCE_METADATA_HOST",
    "aws": "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "azure": "AZURE_POD_IDENTITY_AUTHORITY_HOST",
}
AWS_DEFAULT = "http://169.254.169.254"
AZURE_DEFAULT = "http://169.254.169.254"
AZURE_API = "2021-02-01"  # an IMDS api-version whose compute document has zone and placementGroupId

# GCE keys (under computeMetadata/v1/) -> fact names; the values are paths whose last part is the fact
GCE_KEYS = {"instance/machine-type": "instance-type", "instance/zone": "zone"}
# on a Cloud TPU VM, where Ray 2.60 (tpu.py) reads the slice name and worker id when TPU_NAME/TPU_WORKER_ID are unset
GCE_TPU_KEYS = {
    "instance/attributes/instance-id": "tpu-slice",
    "instance/attributes/agent-worker-number": "tpu-worker-id",
}
# AWS keys (under latest/meta-data/) -> fact names; the placement group and partition only exist for instances in one
AWS_KEYS = {
    "instance-type": "instance-type",
    "placement/availability-zone": "zone",
    "placement/group-name": "placement-group",
    "placement/partition-number": "partition",
}
AWS_REQUIRED = ("instance-type",)
AWS_TOKEN_TTL = "60"  # noqa: S105 - seconds the session token lives, not a secret
# Azure compute document fields -> fact names
AZURE_KEYS = {
    "vmSize": "instance-type",
    "zone": "zone",
    "location": "region",
    "platformFaultDomain": "fault-domain",
    "platformUpdateDomain": "update-domain",
    "placementGroupId": "placement-group",
}
FORBIDDEN = ("security-credentials", "identity", "token", "service-accounts")  # what no listed key may reach


class _Failed(Exception):
    def __init__(self, status: Status, why: str) -> None:
        super().__init__(why)
        self.status: Status = status
        self.why = why


def clouds_to_ask(cloud: Cloud | None, environ: Mapping[str, str]) -> list[Cloud]:
    """The identified cloud, and every cloud whose override variable is set."""
    return [c for c in CLOUDS if c == cloud or environ.get(OVERRIDES[c], "").strip()]


def ask(cloud: Cloud, environ: Mapping[str, str], *, tpu: bool = False) -> SourceAnswer:
    """What `cloud`'s metadata server says of this instance, or why it said nothing."""
    from accelenv import netio  # only when asked: requests is the slowest import of the whole tool

    with netio.session() as transport:
        transport.trust_env = False  # no proxy: the server is on this host's link
        try:
            if cloud == "gce":
                said = _gce(transport, environ, tpu=tpu)
            elif cloud == "aws":
                said = _aws(transport, environ)
            else:
                said = _azure(transport, environ)
        except _Failed as failed:
            return SourceAnswer(source=cloud, status=failed.status, why=failed.why)
    return checked(cloud, said)


def gather(root: Root, environ: Mapping[str, str], *, clouds: bool, tpu: bool = False) -> dict[str, Any]:
    """HostReport.platform: the operator's and Kubernetes' facts (local files, always read), and with `clouds` what
    the identified cloud's server (and any server an override variable names) says. Every source is in it."""
    from accelenv.host.platform import dmi_fields, identify, kubernetes_facts, operator_facts, platform_json

    cloud, evidence = identify(dmi_fields(root), root.read_value("/sys/hypervisor/uuid"))
    answers = [operator_facts(root, environ), kubernetes_facts(root, environ)]
    asked = clouds_to_ask(cloud, environ) if clouds else []
    for each in CLOUDS:
        if each in asked:
            answers.append(ask(each, environ, tpu=tpu))
        elif clouds:
            why = f"not this host's cloud: {evidence}" if cloud else evidence
            answers.append(SourceAnswer(source=each, status="not-asked", why=why))
        elif each == cloud:
            answers.append(SourceAnswer(source=each, status="not-asked", why="--metadata not given"))
    return platform_json(cloud, evidence, answers)


def fetch_metadata(key: str) -> str | None:
    """The GCE value under `key`, or None when the server does not answer it (or is not there)."""
    import os

    from accelenv import netio

    with netio.session() as transport:
        transport.trust_env = False
        try:
            answer = _get(transport, _gce_base(os.environ) + key, {"Metadata-Flavor": "Google"}, "a metadata value")
        except _Failed:
            return None
    if answer.status_code != 200:
        return None
    return answer.text.strip() or None


# ---- each cloud ------------------------------------------------------------------------------------------------


def _gce_base(environ: Mapping[str, str]) -> str:
    host = environ.get(OVERRIDES["gce"], "").strip()
    return f"http://{host}/computeMetadata/v1/" if host else METADATA_URL


def _gce(transport: Transport, environ: Mapping[str, str], *, tpu: bool) -> dict[str, str]:
    base = _gce_base(environ)
    said: dict[str, str] = {}
    for key, name in (GCE_KEYS | (GCE_TPU_KEYS if tpu else {})).items():
        answer = _get(transport, base + key, {"Metadata-Flavor": "Google"}, "a GCE metadata value")
        if answer.status_code == 200 and answer.headers.get("Metadata-Flavor", "Google") == "Google":
            said[name] = answer.text.strip().rsplit("/", 1)[-1]
        elif key in GCE_KEYS:
            raise _Failed("refused", f"{key}: HTTP {answer.status_code}")
    return said


def _aws(transport: Transport, environ: Mapping[str, str]) -> dict[str, str]:
    base = (environ.get(OVERRIDES["aws"], "").strip() or AWS_DEFAULT).rstrip("/")
    token = _send(transport, "PUT", f"{base}/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": AWS_TOKEN_TTL})
    if token.status_code != 200 or not 0 < len(token.text.strip()) <= 256:
        raise _Failed("refused", f"the IMDSv2 session token was refused (HTTP {token.status_code})")
    headers = {"X-aws-ec2-metadata-token": token.text.strip()}
    said: dict[str, str] = {}
    for key, name in AWS_KEYS.items():
        answer = _get(transport, f"{base}/latest/meta-data/{key}", headers, "an EC2 metadata value")
        if answer.status_code == 200:
            said[name] = answer.text.strip()
        elif key in AWS_REQUIRED:
            raise _Failed("refused", f"meta-data/{key}: HTTP {answer.status_code}")
    return said


def _azure(transport: Transport, environ: Mapping[str, str]) -> dict[str, str]:
    base = (environ.get(OVERRIDES["azure"], "").strip() or AZURE_DEFAULT).rstrip("/")
    url = f"{base}/metadata/instance/compute?api-version={AZURE_API}"
    answer = _get(transport, url, {"Metadata": "true"}, "the Azure compute metadata")
    if answer.status_code != 200:
        raise _Failed("refused", f"metadata/instance/compute: HTTP {answer.status_code}")
    try:
        document: Any = json.loads(answer.text)
    except (ValueError, RecursionError):
        raise _Failed("bad-answer", "metadata/instance/compute: not JSON") from None
    if not isinstance(document, dict):
        raise _Failed("bad-answer", "metadata/instance/compute: not a JSON object")
    said: dict[str, str] = {}
    for key, name in AZURE_KEYS.items():
        value = document.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            said[name] = str(value)
        elif value is not None and value != "":
            said[name] = "\x00"  # of the wrong type: `checked` rejects it by name
    return said


# ---- one exchange ----------------------------------------------------------------------------------------------


def _get(transport: Transport, url: str, headers: Mapping[str, str], what: str) -> Answer:
    return _send(transport, "GET", url, headers, what)


def _send(
    transport: Transport, method: str, url: str, headers: Mapping[str, str], what: str = "a metadata token"
) -> Answer:
    from accelenv import netio
    from accelenv.errors import NetworkError

    bounds = netio.limits(what, max_bytes=MAX_VALUE, timeout=TIMEOUT)
    try:
        return netio.exchange(transport, method, url, bounds, headers=headers)
    except NetworkError as error:
        text = str(error)
        status: Status = "refused" if "refused" in text else "no-answer"
        raise _Failed(status, getattr(error, "reason", None) or text) from None
