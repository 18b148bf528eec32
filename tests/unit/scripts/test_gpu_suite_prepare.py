# -*- coding: utf-8 -*-
"""The real-GPU suite's preparation (``bash tests/gpu/run_on_gpu.sh prepare``), run for real: a GPU machine is lent
rarely and by chance, so what it needs must be ready on the first try. It downloads the wheels from PyPI and copies
ansible.posix (a namespace package: no ``__file__``) from the project's venv into .build/device/."""

from __future__ import annotations

import os
import subprocess
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEVICE = os.path.join(ROOT, ".build", "device")
WHEELS = ("ansible_core-2.19.", "resolvelib-", "cryptography-", "cffi-", "pycparser-", "pytest-", "pluggy-",
          "iniconfig-")


def test_the_gpu_suite_preparation_leaves_the_wheels_and_ansible_posix_for_the_gpu_machine():
    result = subprocess.run(["bash", os.path.join(ROOT, "tests", "gpu", "run_on_gpu.sh"), "prepare"],
                            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "prepared: .build/device/wheels and .build/device/collections" in result.stdout
    wheels = sorted(os.listdir(os.path.join(DEVICE, "wheels")))
    for prefix in WHEELS:
        found = [name for name in wheels if name.startswith(prefix) and name.endswith(".whl")]
        assert len(found) == 1, (prefix, wheels)
        with zipfile.ZipFile(os.path.join(DEVICE, "wheels", found[0])) as wheel:
            assert wheel.testzip() is None
    posix = os.path.join(DEVICE, "collections", "ansible_collections", "ansible", "posix")
    assert os.path.isfile(os.path.join(posix, "plugins", "callback", "json.py"))
    assert os.path.isfile(os.path.join(posix, "MANIFEST.json"))
    # Nothing half-made is left beside them, and nothing outside .build/ that git would ship.
    assert sorted(os.listdir(DEVICE)) == ["collections", "wheels"]
    status = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", ".whl", ".build"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert status.stdout == ""
