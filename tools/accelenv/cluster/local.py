"""A multi-node Ray cluster on this machine, on 127.0.0.1 only, to try `accelenv check --ray` and the node labels
before a real cluster: `ray.cluster_utils.Cluster` (what the tests use), one head and `--nodes - 1` workers, each
started with this host's `accelenv labels` (as `ray start --labels-file` would give them), in a temp folder of its
own. With a command after `--`, it runs it with RAY_ADDRESS set to the cluster, ends the cluster, and exits with the
command's status; without one, it prints the address and holds the cluster until Ctrl-C.

    python -m accelenv.cluster.local --nodes 3 -- accelenv check cpu-py311 --ray
    python -m accelenv.cluster.local --nodes 2          # then, in another shell: RAY_ADDRESS=... accelenv ...

Every node is a process of this machine: the cluster shows how the checks and labels behave across nodes, not
what another machine's devices are (give a node another host with --root, as the tests do, for that).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

# Ray 2.60 reads these once, when it is imported: every address it picks is then 127.0.0.1, and the local cluster
# needs no token (tests/support/rayloop.py says why)
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
LABELS_SECONDS = 300.0  # what `accelenv labels` may take: its probes have timeouts of their own


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    words = list(argv)
    command = words[words.index("--") + 1 :] if "--" in words else []
    words = words[: words.index("--")] if "--" in words else words
    parser = argparse.ArgumentParser(
        prog="python -m accelenv.cluster.local", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--nodes", type=int, default=3, help="nodes in all, the head included (default 3)")
    parser.add_argument("--cpus", type=int, default=1, help="CPUs Ray gives each node (default 1)")
    parser.add_argument("--no-labels", action="store_true", help="start the nodes without accelenv's labels")
    args = parser.parse_args(words)
    if not 1 <= args.nodes <= 16:
        parser.error("--nodes: from 1 to 16")
    if not 1 <= args.cpus <= 64:
        parser.error("--cpus: from 1 to 64")
    return args, command


def host_labels() -> dict[str, str]:
    """This host's labels, from the command `accelenv labels --format ray-env` itself, run as a user would run it
    before `ray start --labels-file` (empty, and said, when it fails). A command, not a call into the command line:
    this script sits below it."""
    import json
    import subprocess

    from accelenv.host.run import run_in_group

    argv = [sys.executable, "-m", "accelenv", "labels", "--format", "ray-env"]
    try:
        done = run_in_group(argv, input_text="", timeout=LABELS_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as error:
        failed = f"it did not run ({error})"
    else:
        sys.stderr.write(done.stderr)
        if done.returncode == 0:
            labels: dict[str, str] = json.loads(done.stdout)
            return labels
        failed = "it failed above"
    sys.stderr.write(f"accelenv.cluster.local: the nodes start without labels (accelenv labels: {failed})\n")
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    args, command = parse(sys.argv[1:] if argv is None else argv)
    for key, value in LOOPBACK.items():
        os.environ[key] = value
    os.environ.pop("RAY_ADDRESS", None)
    labels = {} if args.no_labels else host_labels()
    temp = tempfile.mkdtemp(prefix="ar-", dir="/tmp")  # short: Ray's unix socket paths must fit in 107 bytes
    Path(temp, "ray").mkdir()
    os.environ["RAY_TMPDIR"] = temp
    from ray.cluster_utils import Cluster

    node = {"num_cpus": args.cpus, "node_ip_address": "127.0.0.1", "temp_dir": temp, "labels": labels}
    cluster = Cluster(initialize_head=True, head_node_args=dict(node))
    try:
        for _ in range(args.nodes - 1):
            cluster.add_node(**node)
        cluster.wait_for_nodes()
        sys.stdout.write(f"local Ray cluster: {args.nodes} node(s) at {cluster.address} (127.0.0.1 only)\n")
        sys.stdout.flush()
        if not command:
            try:  # from the line that says Ctrl-C ends it: a Ctrl-C the moment it is read ends it as well
                sys.stdout.write(f"RAY_ADDRESS={cluster.address}; Ctrl-C ends it\n")
                sys.stdout.flush()
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                return 0
        from accelenv.host.run import run_attached

        return run_attached(command, env={**os.environ, "RAY_ADDRESS": cluster.address})
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
