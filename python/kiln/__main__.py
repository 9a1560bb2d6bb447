"""``python -m kiln ...`` and the ``kiln`` console script: run the ``kiln`` command installed in this package.

The command is the C++ program built with the library (``kiln doctor``, ``kiln config``, ``kiln compile``,
``kiln cache ...``); it lives in ``kiln/bin/kiln`` next to ``kiln/lib/libkiln.so.0``. It replaces this process
(``os.execv``), so its exit status, stdout and stderr are exactly the command's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional


def executable() -> Path:
    """The path of the ``kiln`` command installed with this package."""
    return Path(__file__).parent / "bin" / "kiln"


def main(argv: Optional[List[str]] = None) -> int:
    """Run ``kiln`` with ``argv`` (default: this process's arguments). Returns only when the command
    cannot be started (exit status 127, with the reason on stderr)."""
    args = sys.argv[1:] if argv is None else list(argv)
    exe = executable()
    if not os.access(exe, os.X_OK):
        print(f"kiln: the kiln command is missing from this installation ({exe}); reinstall the package "
              "(pip install .) with the CLI enabled (KILN_BUILD_CLI=ON)", file=sys.stderr)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(exe, ["kiln", *args])
    except OSError as e:
        print(f"kiln: cannot run {exe}: {e.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
