"""The `duet` command installed with the package: the wheel's own executable."""

import os
import sys


def executable():
    """The `duet` executable this package goes with: $DUET_CLI, the wheel's
    duet/bin/duet, or the build tree's bin/duet (PYTHONPATH=build/python)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("DUET_CLI"), os.path.join(here, "bin", "duet"),
                 os.path.join(here, "..", "..", "bin", "duet")):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.normpath(path)
    return None


def main():
    path = executable()
    if path is None:
        sys.exit("duet: the duet executable is not beside this package; reinstall it "
                 "(pip install .) or set DUET_CLI")
    os.execv(path, [path] + sys.argv[1:])
