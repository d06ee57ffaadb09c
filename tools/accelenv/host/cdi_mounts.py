"""Which host paths a CDI spec gives containers that no device needs: the engine's own socket (whoever holds it
runs any container as root), secrets (/etc/shadow, SSH keys, the kubelet's credentials), and whole system folders
(`/`, `/etc`, `/proc`). A spec's `containerEdits` reach every container that asks for one of its devices, so a
spec naming one of these is unhealthy whatever else it gets right (`check/container.py` fails it).

Pure: the edits are plain data from the spec. Paths are normalised first (`/etc/../etc/shadow`, `//`), and a path
below a secret is a secret too (`/root/.ssh/id_ed25519`); a whole system folder counts only as itself, since
vendors mount single files below /usr, /dev and /run.
"""

from __future__ import annotations

import posixpath
from typing import Any

# Sockets of container engines and orchestrators: access to one is root on the host.
ENGINE_SOCKETS = frozenset(
    {"docker.sock", "containerd.sock", "crio.sock", "podman.sock", "dockershim.sock", "cri-dockerd.sock",
     "kubelet.sock", "buildkitd.sock"}
)  # fmt: skip
# Paths that hold secrets or the host's control, with everything below them.
SECRETS = (
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/kubernetes",
    "/etc/docker",
    "/etc/containerd",
    "/root",
    "/var/lib/kubelet",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/run/secrets",
    "/run/secrets",
    "/dev/mem",
    "/dev/kmem",
    "/dev/port",
    "/proc/kcore",
    "/sys/kernel/security",
    "/boot",
)
# Whole system folders: the folder itself given to a container exposes all of the host.
SYSTEM_FOLDERS = frozenset(
    {"/", "/etc", "/usr", "/var", "/run", "/var/run", "/home", "/proc", "/sys", "/dev", "/lib", "/lib64", "/bin",
     "/sbin", "/opt", "/srv", "/mnt", "/media", "/tmp", "/var/lib", "/usr/lib", "/usr/bin", "/sys/fs/cgroup"}
)  # fmt: skip


def sensitive_path(path: str) -> bool:
    """Whether the host path `path`, given to a container, exposes what no device needs."""
    if not path.startswith("/"):
        return False
    clean = posixpath.normpath("/" + path.lstrip("/"))  # `//etc`, `/etc/./shadow`, `/etc/../etc/shadow`
    parts = clean.split("/")
    if parts[-1] in ENGINE_SOCKETS or ".ssh" in parts or ".docker" in parts or ".kube" in parts:
        return True
    return clean in SYSTEM_FOLDERS or any(clean == s or clean.startswith(s + "/") for s in SECRETS)


def sensitive_edits(edits: list[Any]) -> list[str]:
    """The sensitive host paths these containerEdits name (mount sources, device nodes), each once, with how a
    mount gives it: `/var/run/docker.sock (read-write)`, `/etc/shadow (read-only)`, `/dev/mem (device node)`."""
    found: dict[str, None] = {}
    for edit in edits:
        if not isinstance(edit, dict):
            continue
        for mount in _list(edit.get("mounts")):
            host = mount.get("hostPath") if isinstance(mount, dict) else None
            if isinstance(host, str) and sensitive_path(host):
                options = _list(mount.get("options"))
                how = "read-only" if "ro" in options else "read-write"
                found[f"{host} ({how})"] = None
        for node in _list(edit.get("deviceNodes")):
            host = (node.get("hostPath") or node.get("path")) if isinstance(node, dict) else None
            if isinstance(host, str) and sensitive_path(host):
                found[f"{host} (device node)"] = None
    return list(found)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
