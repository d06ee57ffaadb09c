"""Ray's name for what a node has, from the matrix: the resource Ray counts per family (`[families.*]
ray_resource`, a plugin's fragment giving its own) and the accelerator type it
reports for a SKU (`[skus.*] ray_accelerator_type`, read from Ray 2.60.0's accelerator managers), so `inspect`,
`labels` and `check --ray` can set Ray's picture beside accelenv's without importing Ray.

Ray looks at the first device only (nvidia_gpu.py and amd_gpu.py name the node's type after device 0), so the
expected type is that of the node's first device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.host.report import Accelerator
    from accelenv.matrix.model import Matrix

# The label Ray 2.60 sets on every node with an accelerator (ray._raylet.RAY_NODE_ACCELERATOR_TYPE_KEY).
RAY_TYPE_LABEL = "ray.io/accelerator-type"


@frozen
class ExpectedRay:
    """What Ray should report for a node: its resource name, and its accelerator type when the matrix knows it
    (`known` False: the SKU is unknown, mixed, or the matrix says Ray's name for it is not verified)."""

    resource: str | None
    known: bool
    accelerator_type: str | None  # None with known=True: Ray reports no type for this SKU
    sku: str | None
    why: str = ""

    def as_json(self) -> dict[str, object]:
        return {
            "resource": self.resource,
            "accelerator_type": self.accelerator_type,
            "known": self.known,
            "sku": self.sku,
            "why": self.why,
        }


def expected_ray(matrix: Matrix, acc: Accelerator) -> ExpectedRay:
    """Ray's view of `acc` as the matrix predicts it, from the node's first device."""
    family = matrix.families.get(acc.family)
    resource = family.ray_resource if family is not None else None  # matrix data: a plugin's family brings its own
    if not acc.devices:
        return ExpectedRay(resource=resource, known=True, accelerator_type=None, sku=None, why="no device")
    first = acc.devices[0]
    sku = matrix.skus.get(first.sku or "")
    if sku is None:
        return ExpectedRay(
            resource=resource, known=False, accelerator_type=None, sku=None, why="the first device matched no SKU"
        )
    if not sku.ray_accelerator_type:
        return ExpectedRay(
            resource=resource, known=False, accelerator_type=None, sku=sku.id, why=sku.no_ray_accelerator_type
        )
    name = sku.ray_type(first.pci_device_id)
    why = "" if name else f"Ray names no type for PCI device {first.pci_device_id or '(unknown id)'}"
    return ExpectedRay(resource=resource, known=True, accelerator_type=name, sku=sku.id, why=why)


def ray_type_problems(expected: ExpectedRay, resource_types: list[str], label: str | None) -> list[tuple[str, str]]:
    """(status, what) for each way Ray's accelerator type (`accelerator_type:*` resources, the
    `ray.io/accelerator-type` label) departs from the one the matrix gives for the node's SKU: another type fails
    (tasks asking for the SKU's type land elsewhere, or on the wrong hardware); no type where Ray would name one
    warns (Ray did not detect the devices itself: a hand-set GPU count). Nothing when the matrix does not know."""
    if not expected.known:
        return []
    want = expected.accelerator_type
    problems = []
    shown = ", ".join(resource_types) or "none"
    if want is None and resource_types:
        problems.append(("fail", f"Ray reports accelerator_type {shown}; for {expected.sku} Ray 2.60 names none"))
    elif want is not None and not resource_types:
        problems.append(("warn", f"Ray reports no accelerator_type; the node's SKU {expected.sku} is {want} to Ray"))
    elif want is not None and resource_types != [want]:
        problems.append(
            ("fail", f"Ray reports accelerator_type {shown}; the node's SKU {expected.sku} is {want} to Ray")
        )
    if label is not None and label != (want or ""):
        problems.append(
            ("fail", f"Ray's label {RAY_TYPE_LABEL}={label!r}; the node's SKU {expected.sku} is {want!r} to Ray")
        )
    return problems
