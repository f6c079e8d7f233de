"""Build the distribution and try the wheel as a user gets it: `tox -e package` runs this.

It builds the sdist and the wheel (the wheel from the sdist, as `python -m build` does, so a
file the sdist leaves out is missing from the wheel too), runs `twine check --strict` on
both, fails on a classifier the index would refuse or if the wheel lacks a file of the
tree's `jobqueue/`, then installs the wheel, not the checkout, into a new virtualenv and
runs `manage.py check` and `manage.py demo` on a copy of `testproject/` outside the
checkout, where only the installed `jobqueue` can be imported.

    python ci/check_package.py [WORKDIR]     # WORKDIR: a fresh temporary folder by default
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from trove_classifiers import classifiers as KNOWN_CLASSIFIERS

ROOT = Path(__file__).resolve().parent.parent
# What testproject's settings import besides Django, which the wheel itself requires.
PROJECT_REQUIREMENTS = ["django-environ>=0.11"]


def main(workdir: Path) -> None:
    dist = workdir / "dist"
    run(sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT), show=False)
    [sdist] = dist.glob("*.tar.gz")
    [wheel] = dist.glob("*.whl")
    run(sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel))
    check_classifiers(wheel)
    check_contents(wheel)

    venv = workdir / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    run(python, "-m", "pip", "install", "--quiet", str(wheel), *PROJECT_REQUIREMENTS, show=False)

    project = workdir / "testproject"
    shutil.copytree(
        ROOT / "testproject", project, ignore=shutil.ignore_patterns("db.sqlite3*", "__pycache__")
    )
    # Nothing of the checkout on the path: no PYTHONPATH, and the project's own folder
    # (the copy) is the only one Python adds. DATABASE_URL unset: the demo's SQLite.
    env = {
        key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "DATABASE_URL"}
    }
    where = run(
        python,
        "-c",
        "import jobqueue, sysconfig\n"
        "print(jobqueue.__file__)\n"
        "print(sysconfig.get_path('purelib'))",
        cwd=project,
        env=env,
    ).splitlines()
    imported, site_packages = Path(where[-2]), Path(where[-1])
    if not imported.is_relative_to(site_packages):
        sys.exit(f"jobqueue came from {imported}, not from the wheel in {site_packages}")
    print(f"jobqueue imported from the wheel: {imported}")

    run(python, "manage.py", "check", cwd=project, env=env)
    demo = run(python, "manage.py", "demo", cwd=project, env=env)
    if "succeeded" not in demo:
        sys.exit("manage.py demo ran, but no job succeeded in its output")
    print("the installed wheel passes manage.py check and runs the demo")


def check_classifiers(wheel: Path) -> None:
    """twine check passes a classifier the index does not know; the upload would not."""
    with zipfile.ZipFile(wheel) as archive:
        [name] = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        metadata = HeaderParser().parsestr(archive.read(name).decode())
    unknown = [
        value for value in metadata.get_all("Classifier", []) if value not in KNOWN_CLASSIFIERS
    ]
    if unknown:
        sys.exit(f"{wheel.name} has classifiers the index does not know: {unknown}")


def check_contents(wheel: Path) -> None:
    """Every file of the tree's jobqueue/ (templates, SQL, migrations, py.typed) is in the wheel.

    package-data lists the non-Python files by pattern; a new template in a folder no
    pattern matches would otherwise be missing only once installed.
    """
    with zipfile.ZipFile(wheel) as archive:
        packed = set(archive.namelist())
    tree = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "jobqueue").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    missing = sorted(tree - packed)
    if missing:
        sys.exit(f"{wheel.name} lacks {len(missing)} file(s) of jobqueue/: " + ", ".join(missing))
    print(f"{wheel.name} holds all {len(tree)} files of jobqueue/")


def run(
    *command: str, cwd: Path | None = None, env: dict[str, str] | None = None, show: bool = True
) -> str:
    """Run a command and stop the check if it fails; its output is shown then, or if `show`."""
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if show or done.returncode != 0:
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}")
    return done.stdout


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory(prefix="jobqueue-package-") as workdir:
            main(Path(workdir))
