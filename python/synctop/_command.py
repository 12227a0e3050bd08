"""The `synctop` command of the wheel: runs the synctop binary that the package carries."""

import os
import sys


def binary():
    """The synctop executable inside this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "synctop")


def main():
    path = binary()
    try:
        # The binary finds its tracer relative to itself, so it is run, not copied; exec keeps the
        # process (signals, the terminal, the exit status) the user's.
        os.execv(path, ["synctop"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("synctop: cannot run %s: %s\n" % (path, e))
        return 127
    return 0


if __name__ == "__main__":
    sys.exit(main())
