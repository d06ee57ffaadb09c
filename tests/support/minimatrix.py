"""A small, self-contained matrix for tests about rules and checks.

Tests of a rule must not depend on what the shipped matrix happens to contain (a vendor adding a SKU would
break them): they start from this text, change one thing, and look at the outcome. Figures are taken from the
shipped matrix's sources (CUDA 13.2 Update 2's driver, amdgpu module versions), but nothing here is checked
against the world: this is test data for the rules.
"""

from __future__ import annotations

MINI = """\
schema_version = 1

[sources.notes]
title = "Test figures"
url = "https://example.org/notes"

[os.ubuntu24]
name = "Ubuntu 24.04"
python = "3.12"
package_manager = "apt"
sources = ["notes"]

[families.nvidia]
name = "NVIDIA GPU"
maturity = "stable"
session = "gpu-nvidia"
runtime_kind = "cuda"
pci_vendor_ids = ["0x10de"]
host_tools = ["nvidia-smi"]
kernel_modules = ["nvidia"]
arch_pattern = "sm_[0-9]{2,3}"
wheel_tag_format = "cu{major}{minor}"
sources = ["notes"]

[families.amd]
name = "AMD GPU"
maturity = "beta"
session = "gpu-amd"
runtime_kind = "rocm"
pci_vendor_ids = ["0x1002"]
host_tools = ["amd-smi"]
kernel_modules = ["amdgpu"]
arch_pattern = "gfx[0-9a-f]{3,4}"
no_sku_driver_min = "the ROCm release decides the amdgpu range"
sources = ["notes"]

[skus.h100]
family = "nvidia"
name = "NVIDIA H100"
arch = "sm_90"
ray_accelerator_type = "H100"
product_names = ["NVIDIA H100*"]
pci_device_ids = ["0x2330"]
driver_min = "525.60.13"
sources = ["notes"]

[skus.b300]
family = "nvidia"
name = "NVIDIA B300"
arch = "sm_103"
ray_accelerator_type = "B300"
product_names = ["NVIDIA B300*"]
pci_device_ids = ["0x3182"]
driver_min = "580.82.07"
sources = ["notes"]

[skus.mi300x]
family = "amd"
name = "AMD Instinct MI300X"
arch = "gfx942"
ray_accelerator_type = "AMD-Instinct-MI300X-OAM"
pci_device_ids = ["0x74a1"]
sources = ["notes"]

[drivers.amdgpu-rocm-6-4]
family = "amd"
release = "ROCm 6.4.x amdgpu"
reports = "6.12"
sources = ["notes"]

[drivers.amdgpu-30-10]
family = "amd"
release = "AMD GPU driver 30.10.x"
reports = "6.14"
sources = ["notes"]

[drivers.amdgpu-30-20]
family = "amd"
release = "AMD GPU driver 30.20.x"
reports = "6.16"
sources = ["notes"]

[runtimes.cuda-13-2]
family = "nvidia"
name = "CUDA 13.2 Update 2"
version = "13.2.2"
wheel_tag = "cu132"
architectures = ["sm_90", "sm_103"]
driver = { min = "580.65.06" }
base_images.ubuntu24 = { repository = "nvidia/cuda", tag = "13.2.2-runtime-ubuntu24.04" }
sources = ["notes"]

[runtimes.rocm-7-0]
family = "amd"
name = "ROCm 7.0.2"
version = "7.0.2"
wheel_tag = "rocm7.0"
architectures = ["gfx942"]
driver = { releases = ["amdgpu-rocm-6-4", "amdgpu-30-10"] }
base_images.ubuntu24 = { repository = "rocm/pytorch", tag = "latest" }
sources = ["notes"]

[envs.gpu-nvidia-cu132]
family = "nvidia"
runtime = "cuda-13-2"
description = "test env"
default = true
os = "ubuntu24"
python = "3.12"
platforms = ["linux/amd64"]
skus = ["h100", "b300"]
requirements.packages = ["pytest==9.2.0"]
tests = ["tests/devices/test_nvidia_devices.py"]
framework = { name = "pytest", version = "9.2.0", source = "lock" }
ci_tier = "pr"
sources = ["notes"]

[envs.gpu-amd-rocm70]
family = "amd"
runtime = "rocm-7-0"
description = "test env"
default = true
os = "ubuntu24"
python = "3.12"
platforms = ["linux/amd64"]
skus = ["mi300x"]
requirements.packages = ["pytest==9.2.0"]
tests = ["tests/devices/test_amd_devices.py"]
framework = { name = "pytest", version = "9.2.0", source = "lock" }
ci_tier = "nightly"
sources = ["notes"]
"""
