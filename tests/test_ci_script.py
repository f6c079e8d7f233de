"""ci/test, the README's test command: which interpreters it finds and what it runs.

tox itself is a stand-in here that runs the real tox for `tox config` (so the environments
and their base_python are tox.ini's) and only prints the command for a run; the PATH is
a folder of our own, so which interpreters exist is up to each test, and the finding is
ci/test's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRESENT = f"{sys.version_info.major}.{sys.version_info.minor}"
# tox.ini needs 3.11 and 3.12; whichever this suite does not run on is the missing one.
MISSING = "3.11" if PRESENT == "3.12" else "3.12"


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH with this interpreter as python3 and python<PRESENT>, and a stand-in tox."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", f"python{PRESENT}"):
        (bin_dir / name).symlink_to(sys.executable)
    script(
        tmp_path / "tox",
        f"""#!{sys.executable}
import json, os, sys
if sys.argv[1:2] == ["config"]:
    os.execv(sys.executable, [sys.executable, "-m", "tox", *sys.argv[1:]])
print("STAND-IN TOX " + json.dumps({{"args": sys.argv[1:], "path": os.environ["PATH"]}}))
""",
    )
    return bin_dir


def script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def ci_test(bin_dir: Path, *args: str, ci: bool = False) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in {"CI", "TOXENV", "TOX"}}
    env.update(PATH=str(bin_dir), TOX=str(bin_dir.parent / "tox"))
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, str(ROOT / "ci" / "test"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def tox_run(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("STAND-IN TOX ")]
    ran: dict[str, object] = json.loads(line.removeprefix("STAND-IN TOX "))
    return ran


def test_a_missing_interpreter_is_named_and_the_rest_runs(bin_dir: Path) -> None:
    done = ci_test(bin_dir)

    assert (
        f"python{MISSING} not found: install it with `pyenv install {MISSING}` "
        f"or `apt install python{MISSING}`"
    ) in done.stderr
    ran = tox_run(done)
    args = list(ran["args"])
    envs = args[args.index("-e") + 1]
    assert envs, done.stdout
    prefix = "py" + PRESENT.replace(".", "")
    for env in envs.split(","):
        # lint, docs and package ask for python3.12 by name; the suite's environments by
        # their factor.
        assert env.startswith(prefix) or (PRESENT == "3.12" and not env.startswith("py3"))
    assert f"py{MISSING.replace('.', '')}-django" not in envs


def test_under_ci_a_missing_interpreter_fails_before_running_anything(bin_dir: Path) -> None:
    done = ci_test(bin_dir, ci=True)

    assert done.returncode != 0
    assert f"python{MISSING} not found" in done.stderr
    assert "STAND-IN TOX" not in done.stdout


def test_arguments_go_through_and_name_the_environments(bin_dir: Path) -> None:
    env = "py" + PRESENT.replace(".", "") + "-django61-sqlite"
    if PRESENT == "3.11":
        env = "py311-django52-sqlite"

    ran = tox_run(ci_test(bin_dir, "-e", env, "--", "-x", "tests/unit", "-e", "x", ci=True))

    assert ran["args"] == ["-e", env, "--", "-x", "tests/unit", "-e", "x"]


def test_an_explicit_environment_whose_interpreter_is_missing_runs_nothing(
    bin_dir: Path,
) -> None:
    env = "py311-django52-sqlite" if MISSING == "3.11" else "py312-django61-sqlite"

    done = ci_test(bin_dir, f"--env={env}")

    assert done.returncode != 0
    assert f"python{MISSING} not found" in done.stderr
    assert env in done.stderr
    assert "STAND-IN TOX" not in done.stdout


def test_pyenv_versions_stand_in_for_a_shim_that_fails(bin_dir: Path, tmp_path: Path) -> None:
    # pyenv's shim for a version that is not the global one exists on PATH and fails.
    script(
        bin_dir / f"python{MISSING}", "#!/bin/sh\necho 'pyenv: command not found' >&2\nexit 127\n"
    )
    root = tmp_path / "pyenv"
    for release in ("9", "10"):  # 10 sorts after 9: the newest release is the one taken
        versions = root / "versions" / f"{MISSING}.{release}" / "bin"
        versions.mkdir(parents=True)
        (versions / f"python{MISSING}").symlink_to(sys.executable)
    script(bin_dir / "pyenv", f"#!/bin/sh\necho {root}\n")

    done = ci_test(bin_dir, ci=True)

    assert "not found" not in done.stderr
    ran = tox_run(done)
    assert str(ran["path"]).split(os.pathsep)[0] == str(root / "versions" / f"{MISSING}.10" / "bin")
    assert f"py{MISSING.replace('.', '')}-django" in " ".join(str(arg) for arg in ran["args"])
