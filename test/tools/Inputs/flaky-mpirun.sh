#!/bin/sh
# mpirun that cannot start a rank on its first call, as a loaded machine's
# mpirun sometimes cannot: the first call (no file at $FLAKY_MPIRUN_MARK)
# prints Open MPI's message and fails; later calls run the real mpirun.
if [ ! -e "$FLAKY_MPIRUN_MARK" ]; then
  : > "$FLAKY_MPIRUN_MARK"
  echo "mpirun has exited due to process rank 0 with PID 0 on"
  echo "node vm exiting improperly. There are three reasons this could occur:"
  exit 1
fi
exec mpirun "$@"
