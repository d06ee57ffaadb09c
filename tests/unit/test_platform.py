"""What only the platform knows: which cloud a host is on from its DMI fields (cloud-init's ds-identify rules), the
operator's facts file and variables, Kubernetes' downward-API labels, and how answers become facts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostkit import make_root

from accelenv.host import metadata
from accelenv.host.platform import (
    AZURE_ASSET_TAG,
    checked,
    facts_of,
    identify,
    kubernetes_facts,
    notes_of,
    operator_facts,
    platform_json,
)
from accelenv.host.root import Root


@pytest.mark.parametrize(
    ("dmi", "hypervisor", "cloud"),
    [
        ({"sys_vendor": "Amazon EC2", "product_name": "p5.48xlarge"}, None, "aws"),  # Nitro
        ({"sys_vendor": "Xen", "product_name": "HVM domU"}, "ec2e1916-9099-7caf-fd21-012345abcdef", "aws"),
        ({"sys_vendor": "Xen", "product_name": "HVM domU"}, "4c4c4544-0000", None),
        ({"bios_vendor": "Amazon EC2", "board_asset_tag": "i-0abcd1234ef567890"}, None, "aws"),
        ({"sys_vendor": "Google", "product_name": "Google Compute Engine"}, None, "gce"),
        ({"sys_vendor": "Microsoft Corporation", "chassis_asset_tag": AZURE_ASSET_TAG}, None, "azure"),
        ({"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"}, None, None),  # Hyper-V
        ({"sys_vendor": "Supermicro", "product_name": "SYS-821GE-TNHR"}, None, None),
        ({}, None, None),
    ],
)
def test_the_dmi_fields_name_the_cloud(dmi: dict[str, str], hypervisor: str | None, cloud: str | None) -> None:
    assert identify(dmi, hypervisor)[0] == cloud


def test_dmi_is_read_through_the_root(tmp_path: Path) -> None:
    from accelenv.host.platform import dmi_fields

    root = make_root(tmp_path, files={"/sys/class/dmi/id/chassis_asset_tag": AZURE_ASSET_TAG + "\n"})
    assert identify(dmi_fields(Root(root)))[0] == "azure"


def test_only_the_identified_cloud_or_an_overridden_one_is_asked() -> None:
    assert metadata.clouds_to_ask(None, {}) == []
    assert metadata.clouds_to_ask("aws", {}) == ["aws"]
    assert metadata.clouds_to_ask(None, {"GCE_METADATA_HOST": "127.0.0.1:9"}) == ["gce"]
    assert metadata.clouds_to_ask("azure", {"AWS_EC2_METADATA_SERVICE_ENDPOINT": " "}) == ["azure"]


def test_no_listed_key_reaches_a_credential() -> None:
    keys = [*metadata.GCE_KEYS, *metadata.GCE_TPU_KEYS, *metadata.AWS_KEYS, *metadata.AZURE_KEYS]
    assert not [k for k in keys if any(word in k.lower() for word in metadata.FORBIDDEN)]


def test_operator_facts_from_the_file_and_the_variables(tmp_path: Path) -> None:
    root = make_root(tmp_path, files={"/etc/accelenv/facts.toml": '[facts]\nrack = "r12"\nslot = 7\npod = "p1"\n'})
    answer = operator_facts(Root(root), {"ACCELENV_FACT_POD": "p2", "ACCELENV_FACT_NVL_DOMAIN": "nvl-3"})
    assert answer.status == "answered"
    assert answer.facts == {"rack": "r12", "slot": "7", "pod": "p2", "nvl-domain": "nvl-3"}


@pytest.mark.parametrize(
    ("text", "status", "why"),
    [
        (None, "absent", "no /etc/accelenv/facts.toml and no ACCELENV_FACT_* variables"),
        ("rack = ", "refused", "/etc/accelenv/facts.toml: not TOML"),
        ('rack = "r1"\n', "refused", "expected a [facts] table"),
        ("[facts]\nrack = [1]\n", "refused", "facts.rack: expected a string"),
        ('[facts]\nrack = "r 1; rm -rf"\n', "bad-answer", "nothing usable: rack not of a fact's shape"),
    ],
)
def test_a_bad_facts_file_is_said(tmp_path: Path, text: str | None, status: str, why: str) -> None:
    files = {} if text is None else {"/etc/accelenv/facts.toml": text}
    answer = operator_facts(Root(make_root(tmp_path, files=files)), {})
    assert answer.status == status
    assert why in answer.why
    assert answer.facts == {}


def test_a_named_facts_file_that_is_missing_is_refused(tmp_path: Path) -> None:
    answer = operator_facts(Root(make_root(tmp_path)), {"ACCELENV_FACTS": "/etc/nowhere.toml"})
    assert (answer.status, answer.why) == ("refused", "/etc/nowhere.toml (ACCELENV_FACTS) cannot be read")


def test_kubernetes_topology_labels_only(tmp_path: Path) -> None:
    text = (
        'app="trainer"\ntopology.kubernetes.io/zone="us-central1-a"\n'
        'cloud.google.com/gce-topology-block="blk-7"\nnode.kubernetes.io/instance-type="a3-megagpu-8g"\n'
        'pod-template-hash="abc"\n'
    )
    answer = kubernetes_facts(Root(make_root(tmp_path, files={"/etc/podinfo/labels": text})), {})
    assert answer.facts == {"zone": "us-central1-a", "block": "blk-7", "instance-type": "a3-megagpu-8g"}


def test_facts_are_of_a_facts_shape_and_the_first_source_wins() -> None:
    answer = checked("aws", {"zone": "us-east-1a", "instance-type": "<html>", "Bad Name": "x"})
    assert answer.facts == {"zone": "us-east-1a"}
    assert answer.rejected == ("instance-type", "(a name that is not a fact name)")
    data = platform_json(
        "aws", "sys_vendor 'Amazon EC2'", [checked("operator", {"zone": "hall-2", "rack": "r1"}), answer]
    )
    assert facts_of(data) == {"cloud": "aws", "rack": "r1", "zone": "hall-2"}
    assert data["origin"] == {"cloud": "dmi", "rack": "operator", "zone": "operator"}
    assert notes_of(data) == [
        "platform source operator: answered: rack, zone",
        "platform source aws: answered: zone; rejected instance-type, (a name that is not a fact name)",
    ]


def test_a_snapshots_platform_is_refused_fact_by_fact() -> None:
    assert facts_of({"facts": {"rack": "r1", "zone": 'x"\ny: z', "Bad": "1"}}) == {"rack": "r1"}
    assert facts_of({"facts": ["r1"]}) == {}


def test_a_facts_file_that_is_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    import os

    root = make_root(tmp_path)
    (root / "etc/accelenv").mkdir(parents=True)
    os.mkfifo(root / "etc/accelenv/facts.toml")  # nobody writes to it: a read would block forever
    answer = operator_facts(Root(root), {})
    assert answer.status == "refused"
    assert answer.why.startswith("/etc/accelenv/facts.toml cannot be read: ")


def test_inspect_json_carries_platform_and_devices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import json

    import jsonschema

    from accelenv.cli import main
    from accelenv.host.schema import inspect_schema

    root = make_root(tmp_path, files={"/etc/accelenv/facts.toml": '[facts]\nrack = "r12"\n'})
    monkeypatch.delenv("ACCELENV_FACTS", raising=False)
    monkeypatch.setenv("ACCELENV_FACT_BLOCK", "b3")
    out = io.StringIO()
    matrix = str(Path(__file__).resolve().parents[2] / "matrix.toml")
    assert main(["--matrix", matrix, "inspect", "--json", "--root", str(root)], out=out) == 0
    data = json.loads(out.getvalue())
    assert data["platform"]["facts"] == {"block": "b3", "rack": "r12"}
    assert [s["source"] for s in data["platform"]["sources"]] == ["operator", "kubernetes"]
    jsonschema.Draft202012Validator(inspect_schema()).validate(data)


def test_a_platform_fact_cannot_say_what_only_the_node_says(tmp_path: Path) -> None:
    from accelenv.check.node_labels import labels_for
    from accelenv.matrix import load_matrix

    matrix = load_matrix(Path(__file__).resolve().parents[2] / "matrix.toml")
    from accelenv.host.discover import discover
    from accelenv.host.run import ToolRunner

    report = discover(matrix, root=Root(make_root(tmp_path)), runner=ToolRunner(), environ={}, families=[])
    found, notes = labels_for(matrix, report, metadata={"sku": "h100-sxm", "nvlink-domain": "x.1", "rack": "r1"})
    assert "accelenv.io/sku" not in found.labels
    assert "accelenv.io/nvlink-domain" not in found.labels
    assert found.labels["accelenv.io/rack"] == "r1"
    assert notes == [
        "platform fact nvlink-domain ignored: only the node says its nvlink-domain",
        "platform fact sku ignored: only the node says its sku",
    ]
