#!/usr/bin/env bash
# Ray Direct Transport (RDT) conformance on an NVIDIA node: tests/devices/test_conformance_rdt.py over every
# transport the environment declares (matrix.toml: envs.<ENV>.transports), within the node and, when RAY_ADDRESS
# names a cluster of two or more nodes, across nodes; the transfer figures beside the object store's go into the
# result record. Needs the environment's Python (its lock: torch, ray==2.60.0) plus what each transport imports:
# cupy-cuda12x or cupy-cuda13x for NCCL, nixl (nixl-cu12 / nixl-cu13) for NIXL; `accelenv check` names what is
# missing (its rdt.* findings). What one GPU proves: CUDA_IPC and NIXL between two actors sharing it (half a GPU
# each); NCCL needs a device per member, so on one GPU its tests skip saying so. Everything it writes goes under
# ${OUT:-./nvidia-rdt-out}: the record, its JUnit XML and host snapshot, the check, and pytest's output.
#
#   bash benchmarks/nvidia_rdt.sh [ENV]            # ENV defaults to gpu-nvidia-cu132
#   RAY_ADDRESS=head:6379 bash benchmarks/nvidia_rdt.sh   # across the nodes of a running cluster
set -uo pipefail
cd "$(dirname "$0")/.."
env_id="${1:-gpu-nvidia-cu132}"
out="${OUT:-./nvidia-rdt-out}"
mkdir -p "$out"
export PYTHONPATH="$PWD/tools:$PWD/tests/support${PYTHONPATH:+:$PYTHONPATH}"
py="${PYTHON:-python3}"
"$py" - <<'PY' >"$out/framework.txt" 2>&1
import importlib.util
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())
for name in ("ray", "cupy", "nixl"):
    print(name, "importable" if importlib.util.find_spec(name) else "MISSING")
PY
cat "$out/framework.txt"
"$py" -m accelenv check "$env_id" --json >"$out/check.json" 2>"$out/check.err"; echo "check exit $?"
"$py" -m accelenv check "$env_id" 2>&1 | grep -E "rdt\.|verdict" | head -n 10
ACCELENV_ENV="$env_id" ACCELENV_RESULTS="$out" timeout 900 "$py" -m pytest -p accelenv.results.plugin \
  -p no:cacheprovider -o filterwarnings=default -rA -q \
  tests/devices/test_conformance_rdt.py 2>&1 | tee "$out/pytest.txt" | tail -n 40
echo "pytest exit ${PIPESTATUS[0]}"
"$py" - "$out" <<'PY'
import sys
from pathlib import Path
from accelenv.matrix import find_matrix, load_matrix
from accelenv.results.record import read_records
from accelenv.results.transports import recipes
records, refused = read_records([Path(sys.argv[1])], load_matrix(find_matrix(None)))
for recipe in recipes(records):
    for t in recipe.transfers:
        ratio = f"{t.vs_object_store:.2f}x the object store" if t.vs_object_store else "no object-store figure"
        print(f"{t.transport} {t.scope} {t.size_bytes >> 20} MiB: {t.gb_s:.2f} GB/s, {ratio}")
    for d in recipe.defects:
        print(f"{d.test}: known upstream defect {d.reference}")
for r in refused:
    print("refused:", r.path, r.reason)
PY
ls -l "$out"
