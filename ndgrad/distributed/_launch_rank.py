"""What each rank of a launcher job runs first: give it torchrun's variables (from MPI's), make an
uncaught exception abort the whole job, then run the user's script (or module, or program) as
``__main__``.

    python -m ndgrad.distributed._launch_rank (--script | --module | --no-python) target args...
"""

from __future__ import annotations

import os
import runpy
import sys

from . import _mpi


def main(argv: list) -> None:
    mode, target, args = argv[0], argv[1], argv[2:]
    _mpi.export_torchrun_env()
    if mode == "--no-python":
        os.execvp(target, [target] + args)
    _mpi.abort_on_uncaught_exception()
    sys.argv = [target] + args
    try:
        if mode == "--module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        # A rank leaving with an error status ends the job, as torchrun stops the other
        # workers; left alone, MPI_Finalize at exit would wait for ranks still working.
        if e.code not in (None, 0):
            _mpi.abort(e.code)
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
