"""`accelenv k8s ENV`: an environment's Kubernetes objects (DRA DeviceClass and ResourceClaimTemplate, KubeRay
RayCluster and RayJob, NFD NodeFeatureRule), as one multi-document YAML stream for `kubectl apply -f -`.

`accelenv render` writes the same objects into `envs/<env>/k8s/` (with the image named `accelenv:<tag>`);
here `--repository` names the registry the cluster pulls from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from accelenv.cli.common import Command, matrix_of

if TYPE_CHECKING:
    import argparse


def k8s_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", metavar="ENV", help="environment id, or a family session name for its default")
    p.add_argument(
        "--repository", default="accelenv", help="image repository the cluster pulls from (default: %(default)s)"
    )
    p.add_argument(
        "--only",
        choices=("dra", "ray", "nfd"),
        help="only the DRA objects, the KubeRay objects (RayCluster and RayJob), or the NFD rule",
    )


_KINDS = {
    "dra": ("deviceclass.yaml", "resourceclaimtemplate.yaml"),
    "ray": ("raycluster.yaml", "rayjob.yaml"),
    "nfd": ("nodefeaturerule.yaml",),
}


def k8s(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.k8s import objects
    from accelenv.matrix.resolve import get_env
    from accelenv.plan.render import human_tag

    matrix = matrix_of(args)
    env = get_env(matrix, args.env)
    files = objects.files(matrix, env, image=human_tag(args.repository, matrix, env))  # UsageError: no DRA driver
    wanted = _KINDS[args.only] if args.only else tuple(name for names in _KINDS.values() for name in names)
    texts = [files[f"envs/{env.id}/{objects.FOLDER}/{name}"] for name in wanted]
    out.write("---\n".join(texts))
    return 0


COMMANDS = {
    "k8s": Command(
        epilog="examples:\n"
        "  accelenv k8s gpu-nvidia-cu132 --repository registry.example/accelenv | kubectl apply -f -\n"
        "  accelenv k8s gpu-amd-rocm714 --only dra\n"
        "  accelenv k8s gaudi-1-24 --only nfd\n\n"
        "The same objects, with the image accelenv:<tag>, are committed under envs/<env>/k8s/ by\n"
        "`accelenv render`. "
        "See docs/kubernetes.md.",
        arguments=k8s_arguments,
        run=k8s,
    ),
}
