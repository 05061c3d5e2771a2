"""CPU benchmark: GPT-2 small on one CPU core, sbpc against PyTorch eager.

The GPU benchmark's script (bench/gpu/run.py: its models, timing, tables and
bench.json) with sbpc's programs compiled for the CPU (`--target cpu`, one
rank) and PyTorch run on the CPU (`--torch-device cpu`, timed by the host's
clock), both on one thread: OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and
MKL_NUM_THREADS are set to --torch-threads (default 1) before anything loads
a BLAS, for PyTorch's BLAS (PyTorch's own thread count does not bound it;
its own ops run on one thread: on two they contend with the BLAS's); a
rank's BLAS runs on one thread whatever they say. By default GPT-2 small (12
layers, hidden 768, vocabulary 50257): the forward with its loss and one
AdamW training step, f32, batch 1 x seq 128, the median of 5 runs after a
warm-up, and where sbpc's time goes (--profile-ops). run.py's options
after these override them (`--models medium`, ...): with `--mesh dp=2
--batch 2 --torch-threads 2`, sbpc's two ranks (a core each) against
PyTorch's BLAS on two threads.
About a minute on 2 cores.

usage: run.py --sbpc build/bin/sbpc --out bench/cpu [run.py's options]
"""
import os
import runpy
import sys

DEFAULTS = ["--target", "cpu", "--torch-device", "cpu", "--models", "small", "--gemm-models",
            "none", "--precision", "f32", "--batch", "1", "--seq", "128", "--repeat", "6",
            "--profile-ops"]


def threads(argv):
    """--torch-threads's value as given last (run.py checks it), else 1."""
    value = "1"
    for i, arg in enumerate(argv):
        if arg == "--torch-threads" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--torch-threads="):
            value = arg.split("=", 1)[1]
    return value


if __name__ == "__main__":
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = threads(sys.argv[1:])
    gpu = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu", "run.py")
    sys.argv = [gpu] + DEFAULTS + sys.argv[1:]
    runpy.run_path(gpu, run_name="__main__")
