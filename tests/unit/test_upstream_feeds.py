"""The pure parts of the release-feed and pci.ids sources: what each answer is read as, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from accelenv.matrix import load_matrix
from accelenv.upstream.feeds import UnreadableFeed, newest_final, parse_feed
from accelenv.upstream.pciids import UnreadablePciIds, chip, cited_release, new_devices, parse_pci_ids

REPO = Path(__file__).resolve().parents[2]
ATOM = '<feed xmlns="http://www.w3.org/2005/Atom">{}</feed>'
ENTRY = '<entry><link rel="alternate" href="https://github.com/o/r/releases/tag/{}"/><title>{}</title></entry>'


def feed(*entries: tuple[str, str]) -> str:
    return ATOM.format("".join(ENTRY.format(tag, title) for tag, title in entries))


def test_a_feed_is_read_by_its_tags_and_the_newest_final_release_wins() -> None:
    entries = parse_feed(
        feed(("therock-7.14.2", "ROCm 7.14.2"), ("v10.2.0-rc1", "ROCm 10.2.0 RC1"), ("therock-10.1.0", "ROCm 10.1.0"))
    )
    assert [(e.tag, e.version, e.final) for e in entries] == [
        ("therock-7.14.2", Version("7.14.2"), True),
        ("v10.2.0-rc1", Version("10.2.0"), False),
        ("therock-10.1.0", Version("10.1.0"), True),
    ]
    top = newest_final(entries)
    assert top is not None
    assert top.tag == "therock-10.1.0"


def test_a_title_names_the_version_when_the_tag_does_not() -> None:
    (entry,) = parse_feed(feed(("latest", "Neuron SDK 2.34.0")))
    assert entry.version == Version("2.34.0")
    (undated,) = parse_feed(feed(("nightly-build", "Nightly build 2026.11.30")))
    assert not undated.final


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('<!DOCTYPE feed [<!ENTITY a "aaaa">]><feed/>', "the feed declares a DTD, which no release feed needs"),
        ("<html><body>Too many requests</body></html>", "not an Atom feed (root element 'html')"),
        ('{"releases": []}', "not XML (not well-formed (invalid token): line 1, column 0)"),
    ],
)
def test_what_is_not_an_atom_feed_is_refused(text: str, message: str) -> None:
    with pytest.raises(UnreadableFeed) as error:
        parse_feed(text)
    assert str(error.value) == message


PCI_IDS = """#\tVersion: 2026.11.28
# a comment
10de  NVIDIA Corporation
\t2901  GB100 [B200]
\t\t10de 1999  HGX B200 board
\t290a  GB100 [B200]
\t3180  GB110 [Reserved Dev ID A]
\t3182  GB110 [B300 SXM6 AC]
\t3183  GB110
\t31c3  GB110 [GB300-252]
\t2684  AD102 [GeForce RTX 4090]
1d0f  Amazon.com, Inc.
\t7364  NeuronDevice (Trainium2)
\t7664  NeuronDevice (Stand-in)
\tec20  Elastic Network Adapter (ENA)
C 03  Display controller
\t00  VGA compatible controller
"""


def test_pci_ids_are_read_per_vendor_until_the_classes() -> None:
    ids = parse_pci_ids(PCI_IDS)
    assert ids.release == "2026.11.28"
    assert ids.devices["10de"]["31c3"] == "GB110 [GB300-252]"
    assert ids.devices["10de"]["3183"] == "GB110"
    assert "00" not in ids.devices["1d0f"]
    assert [chip(n) for n in ("GB110 [B300 SXM6 AC]", "GB110", "NeuronDevice (Trainium2)")] == [
        "GB110",
        "GB110",
        "NeuronDevice",
    ]
    with pytest.raises(UnreadablePciIds, match=r"not a pci\.ids file"):
        parse_pci_ids("<html>Not Found</html>")


def test_new_devices_are_chip_mates_no_sku_lists_and_no_note_names() -> None:
    matrix = load_matrix(REPO / "matrix.toml")
    assert cited_release(matrix) == "2026.10.24"
    found = new_devices(matrix, parse_pci_ids(PCI_IDS), {"nvidia", "neuron"})
    # 290a is named in the B200's notes, 31c3, 3183 and 3184 in the GB300's: reviewed and left out; 3180 is
    # reserved; the RTX 4090's AD102 is no chip of a SKU; the ENA is no NeuronDevice
    assert found == [("neuron", "1d0f:7664", "NeuronDevice (Stand-in)", "trn2")]


def test_nvidia_releases_json_is_read_by_branch_and_its_newest_release() -> None:
    from accelenv.upstream.nvidia_branches import Branch, UnreadableReleases, parse_releases

    data = {
        "595": {
            "type": "Production Branch",
            "driver_info": [{"release_version": "595.71.05"}, {"release_version": "595.9"}],
        },
        "580": {"type": "lts branch", "driver_info": [{"release_version": "not a version"}]},
        "notes": {"type": "lts branch"},  # not a branch number
    }
    assert parse_releases(data) == [
        Branch(number=580, designation="lts branch", newest=None),
        Branch(number=595, designation="production branch", newest="595.71.05"),
    ]
    bad: list[object] = [[], {"580": "lts"}]
    for answer in bad:
        with pytest.raises(UnreadableReleases):
            parse_releases(answer)


@pytest.mark.parametrize(
    ("current", "tags", "expected"),
    [
        (
            "13.2.1-base-ubuntu24.04",
            [
                "13.2.2-base-ubuntu24.04",
                "13.2.2-base-ubuntu22.04",
                "13.2.10-runtime-ubuntu24.04",
                "13.4.2-base-ubuntu24.04",
            ],
            ("13.2.2-base-ubuntu24.04", "13.4.2-base-ubuntu24.04"),
        ),
        ("13.2.1-base-ubuntu24.04", ["13.2.1-base-ubuntu24.04", "13.2.0-base-ubuntu24.04", "latest"], (None, None)),
        (
            "rocm10.0_ubuntu24.04_py3.12_pytorch_release_2.13.0",
            [
                "rocm10.1.0_ubuntu24.04_py3.12_pytorch_release_2.14.0",
                "rocm10.1.0_ubuntu24.04_py3.13_pytorch_release_2.14.0",
            ],
            (None, "rocm10.1.0_ubuntu24.04_py3.12_pytorch_release_2.14.0"),
        ),
        ("13.2.1-base-ubuntu24.04", ["13.3.0rc1-base-ubuntu24.04"], (None, None)),  # a pre-release is not news
        ("latest", ["13.2.2-base-ubuntu24.04"], (None, None)),
    ],
)
def test_a_newer_tag_has_the_same_shape_os_and_python(
    current: str, tags: list[str], expected: tuple[str | None, str | None]
) -> None:
    from accelenv.upstream.registry_tags import newer_tags

    assert newer_tags(current, tags) == expected
