"""The peers: each in its own virtualenv, driven through a script in ``bench/peers/``.

The bench process never imports a peer. Each peer gets ``bench/.venvs/<venv>``, created
with Python 3.12 and the pinned packages below on first use (and again when the pins
change), and every operation is one run of ``<venv python> bench/peers/<driver> COMMAND``
that prints one JSON line (see ``bench/peers/_common.py``).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import environ

from bench import database
from bench.systems.base import REPO, System

PEERS = REPO / "bench" / "peers"
VENVS = REPO / "bench" / ".venvs"
NODE_PEERS = REPO / "bench" / ".node"
PSYCOPG = "psycopg[binary]==3.3.9"
MYSQLCLIENT = "mysqlclient==2.3.2"  # on MariaDB; builds against libmariadb-dev
DEFAULT_BENCH = "jobqueue_bench"  # the bench's default database on PostgreSQL (bench/cli.py)


def python312() -> str:
    """A Python 3.12 interpreter for the peers' virtualenvs (``BENCH_PYTHON`` overrides)."""
    pyenv = sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.12*/bin/python")))
    candidates = [os.environ.get("BENCH_PYTHON"), shutil.which("python3.12"), *pyenv]
    for candidate in [*candidates, sys.executable]:
        if (
            candidate
            and subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"],
                capture_output=True,
                check=False,
            ).returncode
            == 0
        ):
            return candidate
    sys.exit("no Python 3.12 found for the peers' virtualenvs: set BENCH_PYTHON")


def server_url() -> str:
    """The bench database's server, without a database name: the peers' databases are there."""
    return urlsplit(os.environ["DATABASE_URL"])._replace(path="").geturl()


def peer_config(name: str) -> dict[str, Any]:
    """Django's settings for the peer's own database ``name``, on the bench's server."""
    return {**environ.Env.db_url_config(os.environ["DATABASE_URL"]), "NAME": name}


def create_database(name: str) -> None:
    """The peer's own database, on the bench database's server: on PostgreSQL created if
    it is missing (the peer drops its schema), on MariaDB a fresh one for this run."""
    config = peer_config(name)
    database.create(config, replace=config["ENGINE"] == database.MYSQL)


def engine() -> str:
    return str(environ.Env.db_url_config(os.environ["DATABASE_URL"])["ENGINE"])


def on_sqlite() -> bool:
    return engine() not in (database.POSTGRESQL, database.MYSQL)


def on_mysql() -> bool:
    return engine() == database.MYSQL


def peer_dsn(name: str) -> str:
    """The peer's own database: ``name`` on the bench database's server, or on SQLite a
    file ``<name>.sqlite3`` beside the bench's."""
    if on_sqlite():
        bench_file = Path(environ.Env.db_url_config(os.environ["DATABASE_URL"])["NAME"])
        return f"sqlite:///{bench_file.with_name(name + '.sqlite3')}"
    return f"{server_url()}/{name}"


class Peer(System):
    """One peer: ``venv`` with ``requirements``, ``driver`` in bench/peers/, ``dbname``."""

    venv: ClassVar[str]
    requirements: ClassVar[list[str]]
    driver: ClassVar[str]
    dbname: ClassVar[str]
    env: ClassVar[dict[str, str]] = {}
    about: ClassVar[list[str]] = []

    @property
    def venv_dir(self) -> Path:
        """``bench/.venvs/<venv>``; ``<venv>-mysql``, with mysqlclient, on MariaDB."""
        return VENVS / (f"{self.venv}-mysql" if on_mysql() else self.venv)

    @property
    def packages(self) -> list[str]:
        """The pinned requirements, with mysqlclient on MariaDB."""
        return [*self.requirements, MYSQLCLIENT] if on_mysql() else list(self.requirements)

    @property
    def python(self) -> Path:
        return self.venv_dir / "bin" / "python"

    def ensure_venv(self) -> None:
        marker = self.venv_dir / "bench-requirements.txt"
        wanted = "\n".join(self.packages) + "\n"
        if marker.exists() and marker.read_text() == wanted and self.python.exists():
            return
        print(f"installing {' '.join(self.packages)} into {self.venv_dir}", file=sys.stderr)
        subprocess.run([python312(), "-m", "venv", "--clear", str(self.venv_dir)], check=True)
        pip = [str(self.python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, *self.packages], check=True)
        marker.write_text(wanted)

    def worker_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        return {
            **env,
            **self.env,
            "PYTHONPATH": str(PEERS),
            "BENCH_DSN": peer_dsn(self.database()),
        }

    def command(self, command: str, *options: str) -> list[str]:
        """The command line of one driver command."""
        return [str(self.python), str(PEERS / self.driver), command, *options]

    def call(self, command: str, *options: str, timeout: float = 600) -> dict[str, Any]:
        proc = subprocess.run(
            self.command(command, *options),
            env=self.worker_env(),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode:
            raise RuntimeError(f"{self.name} {command} failed:\n{proc.stderr[-3000:]}")
        lines = proc.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else {}

    def setup(self) -> None:
        self.ensure_venv()
        if not on_sqlite():
            create_database(self.database())
        self.call("setup")

    def reset(self) -> None:
        self.call("reset")

    def enqueue_one_by_one(self, jobs: int) -> None:
        self.call("enqueue", "--jobs", str(jobs))

    def enqueue_bulk(self, jobs: int, task: str = "noop") -> None:
        self.call("enqueue", "--jobs", str(jobs), "--bulk", "--task", task)

    def time_enqueue(self, jobs: int, bulk: bool) -> float:
        """Timed inside the driver: its interpreter start-up and imports are not counted."""
        bulk_option = ["--bulk"] if bulk else []
        return float(self.call("enqueue", "--jobs", str(jobs), *bulk_option)["seconds"])

    def stamp(self, start: int, jobs: int, interval: float) -> list[float]:
        options = [f"--start={start}", "--jobs", str(jobs), "--interval", str(interval)]
        return [float(t) for t in self.call("stamp", *options)["committed"]]

    def database(self) -> str:
        """``dbname``; on MariaDB ``bench_<dbname without _bench>``, as the bench names
        its databases there. On PostgreSQL, beside a bench database of another name than
        the default ``jobqueue_bench``, ``<its name>_<dbname without _bench>``
        (``me_bench_pgqueuer``): runs on other bench databases of the server, a test's
        or someone else's, do not drop each other's peer schemas."""
        if on_mysql():
            return "bench_" + self.dbname.removesuffix("_bench")
        bench = str(environ.Env.db_url_config(os.environ["DATABASE_URL"])["NAME"])
        if on_sqlite() or bench == DEFAULT_BENCH:
            return self.dbname
        return f"{bench}_{self.dbname.removesuffix('_bench')}"

    def worker_command(self, setting: str, burst: bool = True) -> list[str]:
        return self.command("work", "--setting", setting, *(["--burst"] if burst else []))

    def succeeded(self) -> int:
        return int(self.call("succeeded")["succeeded"])

    def wait_succeeded(self, jobs: int, within: float) -> int:
        """Counted by one driver process, on its connection, not one process per count."""
        options = ["--jobs", str(jobs), "--within", str(within)]
        return int(self.call("wait", *options, timeout=within + 120)["succeeded"])

    def serving(self, pid: int) -> bool:
        """A client has connected to the peer's own database, which only its worker uses
        while it runs (the driver's other commands have exited); PostgreSQL only."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                " AND backend_type = 'client backend'",
                [self.database()],
            )
            (clients,) = cursor.fetchone()
        return bool(clients)

    def versions(self) -> dict[str, str]:
        return dict(self.call("versions")["versions"])

    def notes(self) -> list[str]:
        pins = ", ".join(f"`{r}`" for r in self.packages)
        venv = self.venv_dir.name
        return [f"installed in `bench/.venvs/{venv}` from PyPI: {pins}.", *self.about]


class Procrastinate(Peer):
    name = "procrastinate"
    venv = "procrastinate"
    requirements = ["procrastinate==3.10.0", PSYCOPG]
    driver = "peer_procrastinate.py"
    dbname = "procrastinate_bench"
    slow = True
    drain_settings = {
        "default": "`run_worker(wait=False)`: concurrency 1",
        "tuned": "`run_worker(wait=False, concurrency=16)`",
    }
    about = [
        "driven with its PsycopgConnector (psycopg 3, async) and its own schema "
        "(`schema_manager.apply_schema()`); sync `defer()` for W1, `batch_defer()` for W2."
    ]


class PgQueuer(Peer):
    name = "pgqueuer"
    venv = "pgqueuer"
    requirements = ["pgqueuer==1.6.0", PSYCOPG]
    driver = "peer_pgqueuer.py"
    dbname = "pgqueuer_bench"
    drain_settings = {
        "default": "`QueueManager.run(mode=drain)`: batch_size 10",
        "tuned": "`QueueManager.run(mode=drain, batch_size=100)`",
    }
    about = [
        "driven with its PsycopgDriver (psycopg 3; async for the worker, `SyncQueries` "
        "for enqueue) and its own schema (`Queries.install()`)."
    ]


class DjangoTasksDb(Peer):
    name = "django-tasks-db"
    venv = "django-tasks-db"
    requirements = ["Django==6.1.3", "django-tasks-db==0.13.0", PSYCOPG]
    driver = "peer_django_tasks_db.py"
    dbname = "django_tasks_db_bench"
    env = {"DJANGO_SETTINGS_MODULE": "dtdb_settings"}
    slow = True
    keeps_results = True  # the task's return value, in DBTaskResult.return_value
    skips = frozenset({"W2"})  # django.tasks has no bulk enqueue
    on_sqlite = True  # its documented SQLite set-up: WAL, IMMEDIATE transactions
    on_mysql = True  # through Django's MySQL backend, with mysqlclient
    drain_settings = {"default": "`manage.py db_worker --batch` (no concurrency option)"}
    about = [
        "Django's `django.tasks` with `django_tasks_db.DatabaseBackend`, its migrations "
        "applied; `Task.enqueue()` for W1 (no bulk API: no W2), `db_worker` for the worker."
    ]


class Raw(Peer):
    name = "raw-1"
    venv = "raw"
    requirements = [PSYCOPG]
    driver = "peer_raw.py"
    dbname = "raw_bench"
    env = {"BENCH_RAW_BATCH": "1"}
    skips = frozenset({"W13"})  # a baseline of the drain, not a queue's worker
    drain_settings = {
        "default": "1 job per transaction, 1 thread",
        "tuned": "1 job per transaction, 4 threads",
    }
    about = [
        "raw psycopg: claim with `SELECT ... FOR UPDATE SKIP LOCKED`, run, mark succeeded, "
        "commit; enqueue is one INSERT with `pg_notify` in the same statement; an idle "
        "worker waits on LISTEN with a look every 30 s."
    ]


class RawBatched(Raw):
    name = "raw-100"
    dbname = "raw_bench"
    env = {"BENCH_RAW_BATCH": "100"}
    skips = frozenset({"W1", "W2", "W4", "W5", "W13"})  # the same code as raw-1 there
    drain_settings = {
        "default": "100 jobs per statement, 1 thread",
        "tuned": "100 jobs per statement, 4 threads",
    }
    about = ["raw-1's code, claiming and finishing 100 jobs per statement."]

    def notes(self) -> list[str]:
        return self.about


class GraphileWorker(Peer):
    """graphile-worker, a Node.js queue on PostgreSQL: installed from the npm registry into
    ``bench/.node/graphile`` and run with the machine's ``node``."""

    name = "graphile-worker"
    venv = "graphile"
    requirements = ["graphile-worker@0.18.0"]
    driver = "peer_graphile.mjs"
    dbname = "graphile_bench"
    drain_settings = {
        "default": "`run()`: concurrency 1 (its default)",
        "tuned": "`run({concurrency: 16})`",
    }
    about = [
        "a Node.js peer, driven with its own `makeWorkerUtils()` (`addJob()` for W1, "
        "`addJobs()` for W2) and `run()` with a task list for the worker, its own schema "
        "(`runMigrations()`). It has no drain mode but `runOnce` (one job at a time), so a "
        "burst worker stops once a count from outside its pool finds no job left. It "
        "deletes a job when it succeeds: succeeded is the jobs enqueued less the jobs left."
    ]

    @property
    def folder(self) -> Path:
        return NODE_PEERS / self.venv

    def ensure_venv(self) -> None:
        marker = self.folder / "bench-requirements.txt"
        wanted = "\n".join(self.requirements) + "\n"
        installed = self.folder / "node_modules" / "graphile-worker"
        if marker.exists() and marker.read_text() == wanted and installed.exists():
            return
        node, npm = shutil.which("node"), shutil.which("npm")
        if not node or not npm:
            sys.exit("graphile-worker needs Node.js and npm on PATH (apt-get install nodejs npm)")
        print(f"installing {' '.join(self.requirements)} into {self.folder}", file=sys.stderr)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        (self.folder / "package.json").write_text('{"private": true}\n')
        quiet = ["--no-audit", "--no-fund", "--loglevel=error"]
        subprocess.run([npm, "install", *quiet, *self.requirements], cwd=self.folder, check=True)
        marker.write_text(wanted)

    def worker_env(self) -> dict[str, str]:
        return {**super().worker_env(), "BENCH_GRAPHILE_DIR": str(self.folder)}

    def command(self, command: str, *options: str) -> list[str]:
        return [shutil.which("node") or "node", str(PEERS / self.driver), command, *options]

    def notes(self) -> list[str]:
        pins = ", ".join(f"`{r}`" for r in self.requirements)
        return [
            f"installed in `bench/.node/{self.venv}` from the npm registry: {pins}.",
            *self.about,
        ]
