"""Runs a command with a deadline: prints its output, then `exit: CODE` or
`deadline: killed after N s`. Exits 0 only when the command finished in time
with a non-zero code (a failure reported, not a hang).

usage: deadline.py SECONDS COMMAND...
"""
import os
import signal
import subprocess
import sys
import time

seconds = float(sys.argv[1])
start = time.time()
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True, start_new_session=True)
try:
    out, _ = proc.communicate(timeout=seconds)
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    print(out, end="")
    print(f"deadline: killed after {seconds:g} s")
    sys.exit(1)
print(out, end="")
print(f"exit: {proc.returncode} after {time.time() - start:.0f} s")
sys.exit(0 if proc.returncode != 0 else 1)
