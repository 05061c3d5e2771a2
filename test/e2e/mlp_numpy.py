"""Independent NumPy MLP (float64): linear layers fc0..fcN with ReLU between, mean cross-entropy.

usage: mlp_numpy.py PARAMS.safetensors X.npy TARGETS.npy OUT_LOGITS.npy OUT_LOSS.npy
"""
import sys

import numpy as np

from npy_tools import read_safetensors


def main(params_path, x_path, targets_path, logits_path, loss_path):
    params = {k: v.astype(np.float64) for k, v in read_safetensors(params_path).items()}
    layers = sum(1 for name in params if name.endswith(".weight"))
    h = np.load(x_path).astype(np.float64)
    for i in range(layers):
        h = h @ params[f"fc{i}.weight"] + params[f"fc{i}.bias"]
        if i + 1 < layers:
            h = np.maximum(h, 0.0)
    targets = np.load(targets_path)
    shifted = h - h.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    loss = -log_probs[np.arange(len(targets)), targets].mean()
    np.save(logits_path, h.astype(np.float32))
    np.save(loss_path, np.array(loss, dtype=np.float32))


if __name__ == "__main__":
    main(*sys.argv[1:6])
