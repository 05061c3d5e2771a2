#!/bin/bash
# Runs a GPU bundle (test/gpu/bundle.py) on this machine: the equality cases
# (device_check.py, compute-sanitizer on the one-rank ones when it is
# there), then the benchmark (run.py --programs). Needs only the GPU's
# driver, cuBLAS and NCCL (the CUDA toolkit's, or Python's nvidia-*
# packages'), Python with numpy, and MPI (the bundle's own when it carries
# one); PyTorch for the benchmark's PyTorch columns.
#
#   run.sh [--no-check] [--no-bench] [--check-args "..."] [--bench-args "..."] [OUTPUT_DIR]
#
# --check-args passes more options to device_check.py (--filter NAME to
# check some cases, --timeout SECONDS per run, --jobs N cases at a time);
# --bench-args to run.py
# (--models small, --repeat N, --timeout SECONDS per program).
# OUTPUT_DIR (default: results/ beside this script) receives check.json,
# check.log, bench.json, bench.md and env.txt (and failed/, the outputs of
# failing cases).
set -u
here=$(cd "$(dirname "$0")" && pwd)
check=1 bench=1 check_args="" bench_args="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-check) check=0 ;;
    --no-bench) bench=0 ;;
    --check-args) check_args=${2:?run.sh: --check-args needs a value}; shift ;;
    --bench-args) bench_args=${2:?run.sh: --bench-args needs a value}; shift ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
out=${out:-$here/results}
mkdir -p "$out" || exit 1
python=${PYTHON:-python3}

if [ -d "$here/mpi" ]; then
  # The carried Open MPI, moved from prefix /usr to here.
  prefix=$here/mpi/usr
  export PATH=$prefix/bin:$PATH
  export LD_LIBRARY_PATH=$here/mpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPAL_PREFIX=$prefix OPAL_SYSCONFDIR=$here/mpi/etc/openmpi
  export OMPI_MCA_mca_base_component_path=$prefix/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
  export PMIX_PREFIX=$prefix/lib/x86_64-linux-gnu/pmix2
  export PMIX_MCA_mca_base_component_path=$PMIX_PREFIX/lib/pmix
fi
# cuBLAS and NCCL where the toolkit or Python's nvidia-* packages put them.
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib $("$python" - 2>/dev/null <<'EOF'
import glob, os
try:
    import nvidia
    for root in nvidia.__path__:
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
            print(lib)
except ImportError:
    pass
EOF
); do
  [ -d "$dir" ] && LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir
done
export LD_LIBRARY_PATH

{
  echo "bundle: $(cat "$here/bundle.json" | tr -d '\n')"
  echo "host: $(uname -srm)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  echo "mpirun: $(command -v mpirun) ($(mpirun --version 2>&1 | head -1))"
  echo "python: $("$python" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1)"
} > "$out/env.txt"
cat "$out/env.txt"

# What the bundle was built for: the target, and the CUDA release of its nvcc.
read -r target built < <("$python" -c 'import json, sys; b = json.load(open(sys.argv[1]));
print(b["target"], b.get("cuda_version") or "")' "$here/bundle.json")
if [ "$target" = cuda ] && ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "run.sh: no GPU here (nvidia-smi -L lists none), and this bundle's programs need one" >&2
  exit 1
fi
# The programs carry the CUDA runtime they were built with: the driver must
# support that version (nvidia-smi's "CUDA Version").
if [ "$target" = cuda ]; then
  driver=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
  if [ -n "$built" ] && [ -n "$driver" ] &&
     ! "$python" -c 'import sys; v = lambda s: tuple(int(x) for x in s.split("."));
sys.exit(v(sys.argv[1]) < v(sys.argv[2]))' "$driver" "$built"; then
    echo "run.sh: the programs were built with CUDA $built, and this GPU's driver supports CUDA $driver at most" >&2
    exit 1
  fi
fi
# A program that cannot start says why once, here, rather than in every case.
missing=$(ldd "$here"/cases/*/prog/bin/* "$here"/bench/*/bin/* 2>/dev/null | grep "not found" |
  sort -u)
if [ -n "$missing" ]; then
  echo "run.sh: the programs cannot start here, libraries are missing:" >&2
  echo "$missing" >&2
  exit 1
fi

status=0
if [ $check = 1 ]; then
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  # shellcheck disable=SC2086 # the options are words
  "$python" "$here/device_check.py" --cases "$here/cases" --json "$out/check.json" \
    --keep "$out/failed" ${sanitizer:+--sanitizer "$sanitizer"} $check_args 2>&1 |
    tee "$out/check.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [ $bench = 1 ] && [ -d "$here/bench" ]; then
  # Its parameter files (GiBs for GPT-2 medium's training state) go to a
  # temporary folder, not OUTPUT_DIR, even when the run is cut short.
  work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bench.XXXXXX") || exit 1
  trap 'rm -rf "$work"' EXIT
  # shellcheck disable=SC2086 # the options are words
  "$python" "$here/run.py" --programs "$here/bench" --out "$out" --workdir "$work" $bench_args ||
    status=1
fi
exit $status
