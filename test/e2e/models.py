"""A generated model with a loss, random parameters and random inputs, as
the end-to-end scripts set one up."""
import os
import shutil
import subprocess

import numpy as np

from npy_tools import random_gpt_params, write_safetensors


def generate(model, spec, workdir, seed, rng):
    """Writes m.mlir and p.safetensors (GPT: random_gpt_params, no trivial
    weights) and one .npy per input into `workdir`; returns (inputs,
    --input flags)."""
    path = lambda name: os.path.join(workdir, name)  # noqa: E731
    subprocess.run(["sbpc", "gen", model, *[f"--{k}={v}" for k, v in spec.items()], "--loss",
                    "-o", path("m.mlir"), "--params", path("p.safetensors"), "--seed", str(seed)],
                   check=True, stdout=subprocess.DEVNULL)
    if model == "gpt":
        write_safetensors(path("p.safetensors"),
                          random_gpt_params(spec["layers"], spec["hidden"], spec["vocab"],
                                            spec["seq"], seed))
        inputs = {"tokens": rng.integers(0, spec["vocab"], (spec["batch"], spec["seq"])),
                  "targets": rng.integers(0, spec["vocab"], (spec["batch"], spec["seq"]))}
    else:
        inputs = {"x": rng.standard_normal((spec["batch"], spec["inputs"])).astype(np.float32),
                  "targets": rng.integers(0, spec["outputs"], (spec["batch"],))}
    flags = []
    for name, value in inputs.items():
        np.save(path(name + ".npy"), value)
        flags += ["--input", f"{name}={path(name + '.npy')}"]
    return inputs, flags


def sbpc(*cmd, tool="sbpc"):
    """Runs an sbpc tool; its stdout, or RuntimeError with its last error line."""
    done = subprocess.run([tool, *cmd], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError((done.stderr.strip().splitlines() or ["?"])[-1])
    return done.stdout


def fresh_workdir(work):
    """Empties (or creates) `work`; returns name -> path inside it."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return lambda name: os.path.join(work, name)
