"""Offline stand-in for ansible-test's pip bootstrap script (it downloads get-pip.py, which this machine cannot).

ansible-test runs it inside a new virtualenv with pip's own arguments (the pinned pip, options):
bring pip from the interpreter's bundled wheel, then let pip install the pinned version from the index.
"""

import subprocess
import sys

args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--upgrade", *args])
