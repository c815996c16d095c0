#!/usr/bin/env bash
# The CPU/CUDA check on a GPU machine without network: every algorithm on the CPU, then twice on CUDA, with the same
# freshly generated inputs (tools/compare_devices.py). WHEELS holds the wheels the machine lacks (onnxruntime-gpu for
# its CUDA, SimpleITK, connected-components-3d, nibabel, pydicom), installed into /tmp/site; the CUDA libraries are
# the machine's own (its PyTorch's nvidia-* wheels), found by name. Results: RESULTS/device_comparison.json and
# RESULTS/compare.log.
#     bash tools/device_check.sh WHEELS RESULTS [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${1:?WHEELS: a folder of wheels} results=${2:?RESULTS: a folder for the results} seed=${3:-9307}
mkdir -p "$results"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$wheels"/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
LD_LIBRARY_PATH=$(find /opt /usr/local /usr/lib -xdev \( -name 'libcublas.so.*' -o -name 'libcudnn.so.*' \
  -o -name 'libcufft.so.*' -o -name 'libcurand.so.*' -o -name 'libcudart.so.*' -o -name 'libnvrtc.so.*' \) \
  -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
export LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$results/compare.log"
python3 -c "import onnxruntime as o, numpy, sys; print(sys.version.split()[0], 'onnxruntime', o.__version__, \
o.get_available_providers(), 'numpy', numpy.__version__, 'cores', len(__import__('os').sched_getaffinity(0)))" \
  | tee -a "$results/compare.log"
status=0
python3 tools/compare_devices.py --data /tmp/device-check-data --out /tmp/device-check --generate "$seed" \
  --devices cpu cuda cuda 2>&1 | tee -a "$results/compare.log" || status=$?
cp /tmp/device-check/device_comparison.json "$results/" 2>/dev/null || true
exit "$status"
