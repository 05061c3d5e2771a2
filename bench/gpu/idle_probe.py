"""Does a GPU that has been idle take longer over a short GEMM?

torch.matmul of [8192, 768] by [768, 768] (GPT-2 small's attn.c_proj), in
f32 (no TF32) and bf16, timed with CUDA events: back to back, and each
after the host has idled 50 and 200 ms, as an sbpc program's compute
starts after its loads. Prints the medians of 12. On an H200 (2026-11-26)
the idle ones took 0.18 to 0.21 ms longer, the cost bench/README.md's GEMM
rows show for sbpc's layers against cuBLAS timed back to back.

    python3 bench/gpu/idle_probe.py
"""
import time

import torch


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(8192, 768, device="cuda", dtype=dtype)
        b = torch.randn(768, 768, device="cuda", dtype=dtype)
        for idle in (0.0, 0.05, 0.2):
            times = []
            for _ in range(12):
                torch.cuda.synchronize()
                if idle:
                    time.sleep(idle)
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                torch.matmul(a, b)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            times.sort()
            print(f"{dtype} after {idle:.2f} s idle: median {times[6]:.4f} ms, "
                  f"min {times[0]:.4f} ms")


if __name__ == "__main__":
    main()
