"""Versions of a small python-backend model for the model repository tests and the hot-reload benchmark.

Every version serves OUTPUT0 = INPUT0 + <version number>, so a response says which version answered.
model.py is the same in every version (the sync links it instead of downloading it again); weights.bin
differs per version, as real weights would.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .triton import model_config

VERSIONED_MODEL = '''"""OUTPUT0 = INPUT0 + the version number Triton loaded this file as."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.offset = np.float32(int(args["model_version"]))

    def execute(self, requests):
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            output = pb_utils.Tensor("OUTPUT0", (values + self.offset).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
'''

BROKEN_MODEL = '''"""A version that fails to load."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("version " + args["model_version"] + " is broken on purpose")
'''

SILENT_MODEL = '''"""A version that loads but fails every request (what a smoke inference must catch)."""


class TritonPythonModel:
    def initialize(self, args):
        self.version = args["model_version"]

    def execute(self, requests):
        raise RuntimeError("version " + self.version + " answers nothing on purpose")
'''


def weights(version: int, size: int) -> bytes:
    seed = hashlib.sha256(f"weights-{version}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def make_version(
    root: Path, model: str, version: int, broken: bool = False, weights_bytes: int = 64 * 1024, answers: bool = True
) -> tuple[Path, Path]:
    """Writes <root>/<model>/<version>/{model.py,weights.bin} and <root>/<model>/config.pbtxt; returns (version dir, config).

    broken: the version fails to load; answers=False: it loads but fails every request."""
    version_dir = root / model / str(version)
    version_dir.mkdir(parents=True, exist_ok=True)
    (version_dir / "model.py").write_text(BROKEN_MODEL if broken else VERSIONED_MODEL if answers else SILENT_MODEL)
    (version_dir / "weights.bin").write_bytes(weights(version, weights_bytes))
    config = root / model / "config.pbtxt"
    config.write_text(model_config(model))
    return version_dir, config
