"""Kubernetes objects generated from the matrix: DRA DeviceClass and ResourceClaimTemplate (`dra`), the KubeRay
worker group and the NFD rule (`objects`). A view of the matrix and of `check`'s verdict, never a judge of its own.
"""
