"""What the hook scripts run: ``python -I -S <this file's absolute path> prolog|epilog``.

``-S`` (no ``site``: no site-packages scan, no ``.pth`` files) with ``-I`` (isolated: no working
directory, PYTHONPATH or user site on ``sys.path``) starts the interpreter in a few milliseconds;
the package is found through this file's own absolute path (the directory above
``slurm_energy/``), never through the working directory. Kept this small because a script is
compiled at every run; the hooks themselves are :mod:`slurm_energy.slurm.hooks`.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    from slurm_energy.slurm.hooks import main

    sys.exit(main())
