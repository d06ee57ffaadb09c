#!/usr/bin/env bash
# The single-GPU conformance checks, for one NVIDIA machine with PyTorch preinstalled and no Ray (for instance an
# H200 lent for a few minutes): the matmul throughput and memory bandwidth against the SKU's datasheet peak, a
# one-member NCCL group and the NVIDIA device tests that need no Ray (deselected by name: Ray's own GPU count
# needs Ray), `accelenv check`, `labels`, `inspect` and `snapshot`. Everything it writes goes under
# ${OUT:-./nvidia-out}: the result record (which names where the installed torch differs from the environment's
# pin), its JUnit XML and host snapshot, the check, labels and inspect outputs, and a snapshot of the host (a new
# fixture: the vendor tools' outputs as this host printed them).
#
#   bash benchmarks/nvidia_single_gpu.sh [ENV]      # ENV defaults to gpu-nvidia-cu132
set -uo pipefail
cd "$(dirname "$0")/.."
env_id="${1:-gpu-nvidia-cu132}"
out="${OUT:-./nvidia-out}"
mkdir -p "$out"
export PYTHONPATH="$PWD/tools:$PWD/tests/support${PYTHONPATH:+:$PYTHONPATH}"
py="${PYTHON:-python3}"
"$py" - <<'PY' >"$out/framework.txt" 2>&1
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())
print("device 0:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
PY
cat "$out/framework.txt"
"$py" -m accelenv check "$env_id" --json >"$out/check.json" 2>"$out/check.err"; echo "check exit $?"
"$py" -m accelenv check "$env_id" 2>&1 | tail -n 25
"$py" -m accelenv labels --env "$env_id" >"$out/labels.json" 2>"$out/labels.err"; echo "labels exit $?"
"$py" -m accelenv labels --env "$env_id" --format ray 2>&1 | head -n 20
"$py" -m accelenv inspect --json >"$out/inspect.json" 2>"$out/inspect.err"; echo "inspect exit $?"
"$py" -m accelenv snapshot -o "$out/host.snapshot.json" 2>"$out/snapshot.err"; echo "snapshot exit $?"
ACCELENV_ENV="$env_id" ACCELENV_RESULTS="$out" timeout 300 "$py" -m pytest -p accelenv.results.plugin \
  -p no:cacheprovider -o filterwarnings=default -rA -q \
  tests/devices/test_conformance_perf.py::test_matmul_throughput \
  tests/devices/test_conformance_perf.py::test_memory_bandwidth \
  tests/devices/test_conformance_perf.py::test_one_member_group \
  tests/devices/test_nvidia_devices.py -k "not ray" 2>&1 | tee "$out/pytest.txt" | tail -n 30
echo "pytest exit ${PIPESTATUS[0]}"
ls -l "$out"
