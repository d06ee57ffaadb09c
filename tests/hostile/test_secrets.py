"""Item 1: secrets never leave the machine. A vendor tool that echoes its environment and a credentialed URL,
and accelerator variables that carry passwords, must not reach a snapshot, `--json` output or the terminal."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from hostilekit import accelenv, tool
from hostkit import Pci, make_root

from accelenv.redact import REDACTED, redact_json, redact_text

if TYPE_CHECKING:
    from pathlib import Path

SECRETS = {
    "HF_TOKEN": "hf_" + "a1B2c3D4e5" * 4,
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz9EXAMPLE",
    "GITHUB_TOKEN": "ghp_" + "Z9y8X7w6V5" * 4,
    "MY_SERVICE_PASSWORD": "correct-horse-battery",
}
URL_PASSWORD = "s3cr3t-pa55"  # noqa: S105 - the leak the tests look for
VISIBLE = {
    "RAY_ADDRESS": f"redis://:{URL_PASSWORD}@10.0.0.7:6379",
    "TPU_WORKER_HOSTNAMES": f"https://admin:{URL_PASSWORD}@tpu-0.internal",
    "TPU_API_KEY": "tpu-key-value-123",
    "CUDA_VISIBLE_DEVICES": "0",
}
LEAKS = [*SECRETS.values(), URL_PASSWORD, "tpu-key-value-123"]


@pytest.fixture
def leaky_host(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An NVIDIA host whose nvidia-smi prints its environment and a credentialed URL to stderr, then fails."""
    bin_dir = tmp_path / "bin"
    tool(
        bin_dir,
        "nvidia-smi",
        f"/usr/bin/env >&2; echo 'fetching https://bot:{URL_PASSWORD}@example.invalid/x' >&2; exit 9",
    )
    root = make_root(tmp_path / "root", pci=[Pci("0000:17:00.0", "0x10de", "0x2330", driver="nvidia")])
    env = {**SECRETS, **VISIBLE, "PATH": f"{bin_dir}:/usr/bin:/bin", "ACCELENV_ROOT": str(root)}
    return env, root


def _leaked(text: str) -> list[str]:
    return [secret for secret in LEAKS if secret in text]


def test_a_snapshot_of_a_leaky_tool_holds_no_secret(
    leaky_host: tuple[dict[str, str], Path], matrix: Path, tmp_path: Path
) -> None:
    env, _ = leaky_host
    target = tmp_path / "snapshot.json"
    result = accelenv("--matrix", str(matrix), "snapshot", "-o", str(target), env=env)
    assert result.returncode == 0, result.stderr
    text = target.read_text()
    assert "nvidia-smi exited with status 9" in text  # the tool's fault is kept, its secrets are not
    assert _leaked(text) == []
    assert text.count(REDACTED) >= len(LEAKS)
    report = json.loads(text)["report"]
    assert report["environment"]["RAY_ADDRESS"] == f"redis://:{REDACTED}@10.0.0.7:6379"
    assert report["environment"]["CUDA_VISIBLE_DEVICES"] == "0"


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "--json"],
        ["inspect"],
        ["check", "gpu-nvidia-cu128", "--json"],
        ["check", "gpu-nvidia-cu128"],
    ],
    ids=["inspect-json", "inspect", "check-json", "check"],
)
def test_printed_reports_hold_no_secret(leaky_host: tuple[dict[str, str], Path], matrix: Path, argv: list[str]) -> None:
    env, _ = leaky_host
    result = accelenv("--matrix", str(matrix), *argv, env=env)
    assert result.returncode in (0, 1), result.stderr
    assert _leaked(result.stdout + result.stderr) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HF_TOKEN=hf_abc", f"HF_TOKEN={REDACTED}"),
        ("export AWS_SECRET_ACCESS_KEY='abc/def+ghi'", f"export AWS_SECRET_ACCESS_KEY='{REDACTED}'"),
        ('{"GITHUB_TOKEN": "x"}', f'{{"GITHUB_TOKEN": "{REDACTED}"}}'),
        ("clone https://user:pa55@git.example/r.git", f"clone https://user:{REDACTED}@git.example/r.git"),
        ("redis://:pa55@10.0.0.1:6379", f"redis://:{REDACTED}@10.0.0.1:6379"),
        ("Authorization: Bearer abcdefghijklmnop", f"Authorization: Bearer {REDACTED}"),
        ("token " + "ghp_" + "a" * 36, f"token {REDACTED}"),
        ("id AKIAIOSFODNN7EXAMPLE here", f"id {REDACTED} here"),
        ("password: hunter2", f"password: {REDACTED}"),
        ("apiKey=zz", f"apiKey={REDACTED}"),
        # what must stay: tool facts and accelenv's own prose
        ("Product Name : NVIDIA H100 80GB HBM3", "Product Name : NVIDIA H100 80GB HBM3"),
        ("Persistence Mode : Enabled", "Persistence Mode : Enabled"),
        ("'h1 x' is not a valid key: expected an id", "'h1 x' is not a valid key: expected an id"),
        ("'family': expected KEY=VALUE", "'family': expected KEY=VALUE"),
        ("--root /etc/passwd: is not a folder", "--root /etc/passwd: is not a folder"),
        ("http://[::1]:8080/simple", "http://[::1]:8080/simple"),
        ("CUDA_VISIBLE_DEVICES=0,1", "CUDA_VISIBLE_DEVICES=0,1"),
    ],
)
def test_redaction_patterns(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # idempotent: redacting twice changes nothing more


def test_redacted_json_text_stays_json() -> None:
    """Redaction runs on JSON text too (everything printed passes through it): it must never break an escape."""
    document = {"stderr": 'a\nAWS_SECRET_ACCESS_KEY=abc\\"def\n', "quoted": 'password="x\\"y"'}
    text = json.dumps(document)
    parsed = json.loads(redact_text(text))
    assert "abc" not in parsed["stderr"]
    assert redact_json({"TPU_API_KEY": "v", "n": 1, "ok": True}) == {"TPU_API_KEY": REDACTED, "n": 1, "ok": True}


def test_redaction_is_linear_on_hostile_output() -> None:
    """A tool's megabytes of name-like text must not make redaction quadratic."""
    import time

    for text in ("a." * 500_000, "x=" * 500_000, "a://" + "b:" * 500_000):
        start = time.monotonic()
        redact_text(text)
        assert time.monotonic() - start < 5
