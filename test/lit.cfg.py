# lit configuration for sbpc's IR, tool and end-to-end tests.
import os

import lit.formats

config.name = "sbpc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.sbpc_obj_root, "test")
config.excludes = ["unit", "CMakeLists.txt", "lit.cfg.py", "Inputs"]

config.environment["PATH"] = os.pathsep.join(
    [config.sbpc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.environment["FILECHECK_OPTS"] = "--enable-var-scope --dump-input=fail"
# One thread per BLAS call: tests run in parallel on small machines.
config.environment["OPENBLAS_NUM_THREADS"] = "1"
config.substitutions.append(("%python", config.python))
config.substitutions.append(("%e2e", os.path.join(config.sbpc_src_root, "test", "e2e")))
config.substitutions.append(("%srcroot", config.sbpc_src_root))
config.substitutions.append(("%objroot", config.sbpc_obj_root))

# Tools built with AddressSanitizer (make check-sanitizers) take several
# times the memory: a test that bounds the compiler's memory says
# UNSUPPORTED: asan.
try:
    import subprocess as _subprocess
    _linked = _subprocess.run(["ldd", os.path.join(config.sbpc_tools_dir, "sbpc")],
                              capture_output=True, text=True).stdout
    if "libasan" in _linked:
        config.available_features.add("asan")
except OSError:
    pass

# The CUDA target: `cuda` when sbpc was built with it (the toolkit is
# there; tests compile CUDA programs without running them), `gpu` when a
# GPU can run them too. Tests that need one say REQUIRES: gpu; make test-gpu
# runs them and fails where there is no GPU.
if config.cuda_target:
    config.available_features.add("cuda")
    import subprocess
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        has_gpu = listed.returncode == 0 and "GPU" in listed.stdout
    except (OSError, subprocess.TimeoutExpired):
        has_gpu = False
    if has_gpu:
        config.available_features.add("gpu")
    import shutil
    sanitizer = shutil.which("compute-sanitizer") or shutil.which(
        "compute-sanitizer", path="/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer")
    if sanitizer:
        config.available_features.add("compute-sanitizer")
        config.environment["PATH"] += os.pathsep + os.path.dirname(sanitizer)
    else:
        lit_config.note("no GPU here: the CUDA target is compiled and checked, its GPU runs "
                        "(REQUIRES: gpu) are skipped; make test-gpu runs them where there is one")
else:
    lit_config.note("sbpc was built without the CUDA target (no CUDA toolkit, cuBLAS or NCCL): "
                    "its tests are skipped")
