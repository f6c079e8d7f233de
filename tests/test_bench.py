"""The bench: its database guard and report, then its runs at a tiny N, jobqueue only. The
figures are not checked here: speed is measured by bench/, never asserted in a test."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli, database, floor, procfs, report
from bench.report import Row
from bench.serverlog import general_log_counts
from tests.conftest import IN_CI, REPO, wait_for

# Nothing listens there: a command that tried to connect would fail with another error.
NO_SERVER = "postgres://postgres@127.0.0.1:1"
NO_MARIADB = "mysql://root@127.0.0.1:1"
# The machine's MariaDB (docs/performance.md), for the one run that needs the server.
MARIADB = os.environ.get("BENCH_MARIADB_URL", "mysql://root@127.0.0.1:3306")


def run_script(name: str, *args: str) -> str:
    """Run ``bench/<name>`` with ``args``; its output, once it has exited with status 0."""
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / name), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def refusal(name: str, *args: str) -> str:
    """Run ``bench/<name>``, which must refuse to start; what it said."""
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / name), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    return result.stderr


# -- the guard ------------------------------------------------------------------------


def test_the_guard_refuses_a_database_without_the_marker_in_its_name():
    with pytest.raises(SystemExit) as refused:
        database.checked(f"{NO_SERVER}/shop", "bench", "the bench drops its tables")
    assert str(refused.value) == (
        "refusing to use database 'shop': the bench drops its tables, so its name must "
        "contain 'bench'"
    )


def test_the_guard_reads_the_file_name_of_a_sqlite_database_not_its_directory(tmp_path):
    directory = tmp_path / "bench"
    with pytest.raises(SystemExit, match="must contain 'bench'"):
        database.checked(f"sqlite:///{directory / 'dev.sqlite3'}", "bench", "why")
    config = database.checked(f"sqlite:///{directory / 'x_bench.sqlite3'}", "bench", "why")
    assert config["NAME"] == str(directory / "x_bench.sqlite3")


def test_the_guard_gives_the_settings_of_a_database_with_the_marker():
    config = database.checked(f"{NO_SERVER}/jobqueue_bench", "bench", "why")
    assert (config["ENGINE"], config["NAME"], config["PORT"]) == (
        database.POSTGRESQL,
        "jobqueue_bench",
        1,
    )
    assert database.server(config) == {
        "dbname": "postgres",
        "host": "127.0.0.1",
        "port": 1,
        "user": "postgres",
        "password": None,
    }


@pytest.mark.process
def test_the_benchmark_refuses_a_database_without_bench_before_connecting():
    said = refusal("run.py", "--database-url", f"{NO_SERVER}/shop", "--only", "W11")
    assert "refusing to use database 'shop'" in said
    assert "must contain 'bench'" in said


@pytest.mark.process
def test_the_soak_refuses_a_database_without_soak_before_connecting():
    said = refusal("soak.py", "--database-url", f"{NO_SERVER}/jobqueue_bench")
    assert "refusing to use database 'jobqueue_bench': the soak drops it" in said
    assert "must contain 'soak'" in said


# -- MariaDB: its settings, names and statement count, without a server --------------


def test_the_guard_gives_the_settings_of_a_mariadb_database_and_its_server():
    config = database.checked(f"{NO_MARIADB}/bench_jobqueue", "bench", "why")
    assert (config["ENGINE"], config["NAME"], config["PORT"]) == (
        database.MYSQL,
        "bench_jobqueue",
        1,
    )
    assert database.mysql_server(config) == {
        "host": "127.0.0.1",
        "port": 1,
        "user": "root",
        "password": "",
        "charset": "utf8mb4",
        "autocommit": True,
    }
    with pytest.raises(SystemExit, match="refusing to use database 'shop'"):
        database.checked(f"{NO_MARIADB}/shop", "bench", "why")


def test_a_mariadb_name_is_quoted_and_one_with_a_backtick_refused():
    assert database.mysql_name("bench_jobqueue") == "`bench_jobqueue`"
    with pytest.raises(ValueError, match="bad MariaDB database name 'bench`x'"):
        database.mysql_name("bench`x")


def settings_of(module: str, path: str, env: dict[str, str]) -> dict[str, object]:
    """``module``'s default database settings, read in a fresh interpreter with ``env``."""
    code = f"import json, {module} as s; print(json.dumps(s.DATABASES['default']))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": path, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_the_bench_settings_on_mariadb_read_committed_and_utf8mb4():
    path = os.pathsep.join([str(REPO), str(REPO / "testproject")])
    settings = settings_of("bench.settings", path, {"DATABASE_URL": f"{NO_MARIADB}/bench_x"})
    assert settings["ENGINE"] == database.MYSQL
    assert settings["NAME"] == "bench_x"
    options = settings["OPTIONS"]
    assert isinstance(options, dict)
    assert (options["isolation_level"], options["charset"]) == ("read committed", "utf8mb4")


def test_django_tasks_db_on_mariadb_has_the_same_options_and_its_own_database():
    settings = settings_of(
        "dtdb_settings",
        str(REPO / "bench" / "peers"),
        {"BENCH_DSN": f"{NO_MARIADB}/bench_django_tasks_db"},
    )
    assert (settings["ENGINE"], settings["NAME"], settings["PORT"]) == (
        database.MYSQL,
        "bench_django_tasks_db",
        1,
    )
    assert settings["OPTIONS"] == {"isolation_level": "read committed", "charset": "utf8mb4"}


def test_a_peer_on_mariadb_gets_a_bench_database_and_a_venv_with_mysqlclient(monkeypatch):
    from bench.systems.peers import DjangoTasksDb

    peer = DjangoTasksDb()
    monkeypatch.setenv("DATABASE_URL", f"{NO_SERVER}/jobqueue_bench")
    assert (peer.database(), peer.venv_dir.name) == ("django_tasks_db_bench", "django-tasks-db")
    assert not any(p.startswith("mysqlclient") for p in peer.packages)
    monkeypatch.setenv("DATABASE_URL", f"{NO_MARIADB}/bench_jobqueue")
    assert (peer.database(), peer.venv_dir.name) == (
        "bench_django_tasks_db",
        "django-tasks-db-mysql",
    )
    assert peer.packages[-1].startswith("mysqlclient==")
    assert peer.worker_env()["BENCH_DSN"] == f"{NO_MARIADB}/bench_django_tasks_db"


GENERAL_LOG = (
    "261201 15:56:00\t    20 Quit\t\n"
    "\t\t    21 Connect\troot@127.0.0.1 on bench_a using TCP/IP\n"
    "\t\t    22 Connect\troot@127.0.0.1 on bench_b using TCP/IP\n"
    "\t\t    23 Connect\troot@127.0.0.1 on  using TCP/IP\n"
    "\t\t    21 Query\tSET autocommit=1\n"
    "261201 15:56:01\t    22 Query\tselect\n 2\n"
    "\t\t    23 Init DB\tbench_a\n"
    "\t\t    23 Query\tSELECT 1\n"
    "\t\t    24 Query\tSELECT 1\n"
    "\t\t    21 Quit\t\n"
)


def test_the_general_log_is_counted_by_each_connections_database_past_an_offset():
    assert general_log_counts(GENERAL_LOG, 0, {"bench_a", "bench_b"}) == {
        "bench_a": 2,  # 21's SET and 23's SELECT after its Init DB; not Connect or Quit
        "bench_b": 1,  # one statement over two lines
    }
    assert general_log_counts(GENERAL_LOG, 0, {"bench_b"}) == {"bench_b": 1}
    past = GENERAL_LOG.index("\t\t    23 Init DB")
    # The connections opened before the offset still name their databases.
    assert general_log_counts(GENERAL_LOG, past, {"bench_a", "bench_b"}) == {"bench_a": 1}


@pytest.mark.process
def test_the_benchmark_refuses_a_mariadb_database_without_bench_before_connecting():
    said = refusal("run.py", "--database", "mysql", "--database-url", f"{NO_MARIADB}/shop")
    assert "refusing to use database 'shop'" in said


def mariadb_answers() -> bool:
    try:
        with database.connect_mysql(database.checked(f"{MARIADB}/bench_probe", "bench", "")):
            return True
    except Exception:  # MySQLdb.OperationalError: nothing answers there
        return False


@pytest.mark.process
def test_the_benchmark_runs_a_tiny_w1_on_mariadb_and_drops_its_database():
    # Only the environments with jobqueue's mysql extra can talk to MariaDB (tox's
    # py312-django61-mariadb); there, under CI, the server must answer.
    pytest.importorskip("MySQLdb", reason="needs mysqlclient (jobqueue's mysql extra)")
    if not mariadb_answers():
        if IN_CI:
            pytest.fail(f"no MariaDB at {MARIADB}: CI starts one (BENCH_MARIADB_URL)")
        pytest.skip(f"no MariaDB at {MARIADB} (BENCH_MARIADB_URL)")
    name = f"bench_tiny_{os.getpid()}"
    output = run_script(
        "run.py",
        "--database",
        "mysql",
        "--database-url",
        f"{MARIADB}/{name}",
        "--systems",
        "jobqueue",
        "--only",
        "W1",
        "--jobs",
        "20",
        "--repeat",
        "1",
        "--no-write",
    )
    assert "| W1 |" in output
    assert "- database: MariaDB " in output
    config = database.checked(f"{MARIADB}/{name}", "bench", "")
    with database.connect_mysql(config) as conn, conn.cursor() as cursor:
        cursor.execute("SHOW DATABASES LIKE %s", [name])
        assert cursor.fetchall() == ()


# -- /proc -----------------------------------------------------------------------------


def test_proc_gives_a_process_its_command_and_parent_and_nothing_once_it_is_reaped():
    child = subprocess.Popen(["sleep", "60"])
    try:
        assert child.pid in procfs.pids()
        # Popen returns once the exec has closed the child's copy of its error pipe, which the
        # kernel does just before it renames the process: for an instant the child may still
        # carry this process's name ("pytest" under tox).
        wait_for(lambda: procfs.command(child.pid) == "sleep", timeout=5, message="the exec")
        assert procfs.stat(child.pid)[1] == str(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert procfs.stat(child.pid) is None and procfs.command(child.pid) is None


def test_proc_finds_a_process_s_children_and_grandchildren_for_w13_to_sum():
    # A shell that starts a shell that starts sleep: two generations below it.
    parent = subprocess.Popen(["sh", "-c", "sh -c 'sleep 60; :' & wait"])
    try:
        wait_for(
            lambda: [procfs.command(p) for p in procfs.descendants(parent.pid)] == ["sh", "sleep"],
            timeout=5,
            message="the shell and its sleep below the first shell",
        )
        assert all(procfs.rss_kib(pid) for pid in procfs.descendants(parent.pid))
    finally:
        for pid in procfs.descendants(parent.pid):
            os.kill(pid, 9)
        parent.kill()
        parent.wait()


# -- the report -----------------------------------------------------------------------


def test_a_median_comes_with_the_range_of_the_runs():
    assert report.spread([3_100.0, 1_000.4, 2_000.0], "jobs/s") == "2,000 (1,000-3,100)"
    assert report.spread([250.0, 240.0, 262.0], "ms") == "250 (240-262)"
    assert report.spread([2.0, 3.0], "s") == "2.50 (2.00-3.00)"
    assert report.spread([0.0284, 0.0276, 0.0281], "stmt/job") == "0.028"


def test_runs_that_agree_once_rounded_show_one_value():
    assert report.spread([1_200.4, 1_199.6], "jobs/s") == "1,200"
    assert report.spread([2.54, 2.46, 2.5], "ms") == "2.5"
    assert report.spread([12.0], "us/job") == "12.0"


def test_a_table_aligns_its_figures_right_and_its_labels_left():
    assert report.table(["system", "scenario", "jobs/s"], [["a", "b", "1"]], left=2) == [
        "| system | scenario | jobs/s |",
        "|---|---|---:|",
        "| a | b | 1 |",
    ]


def a_report(measured: list[report.Measured], tables: list[report.Table]) -> str:
    return report.markdown(
        title="t",
        command="c",
        info={"host": "h"},
        repeat=2,
        measured=measured,
        counted=[],
        tables=tables,
        systems=["jobqueue", "pgqueuer"],
        notes=report.notes_on({table.key for table in tables}),
    )


def test_a_workloads_own_table_is_a_section_of_the_report_without_the_systems_table():
    table = report.Table("W11", "floor", "Medians.", ["drain", "jobs/s"], [["raw", "9"]], 1, ["."])
    text = a_report([], [table])
    assert "## Results" not in text and "ratio to each peer" not in text
    section = text[text.index("## W11: floor") : text.index("## Notes")]
    assert section.splitlines() == [
        "## W11: floor",
        "",
        "Medians.",
        "",
        "| drain | jobs/s |",
        "|---|---:|",
        "| raw | 9 |",
        "",
        ".",
        "",
    ]
    notes = text[text.index("## Notes") :]
    assert "W6, W11 and W12" in notes and "W1 and W2" not in notes


def test_the_systems_table_gives_medians_and_the_ratio_table_jobqueues_over_the_peers():
    row = Row("W1", "enqueue", "jobs/s", True)
    measured = report.Measured(row, {"jobqueue": [2_000.0, 3_000.0], "pgqueuer": [1_000.0]})
    text = a_report([measured], [])
    assert "| W1 | enqueue | jobs/s | 2,500 (2,000-3,000) | 1,000 |" in text
    assert "| W1 | enqueue | higher | 2.50 |" in text


def test_the_floor_gives_each_drain_as_a_share_of_raw_100_and_of_the_durable_floor():
    def runs(
        *rates: float, server: float | None = 50.0, client: float = 8.0
    ) -> list[dict[str, float | None]]:
        return [{"jobs/s": r, "server us/job": server, "client us/job": client} for r in rates]

    table = floor.table(
        [
            (floor.RawDrain.label, "1", runs(40_000, 50_000, 60_000)),
            (floor.RawDrain.label, "4", runs(80_000)),
            (floor.DurableDrain.label, "1", runs(20_000, server=42.0)),
            (floor.DurableDrain.label, "4", runs(40_000, server=None)),
            (floor.WorkerDrain.label, "1 + slots", runs(10_000, client=25.0)),
        ],
        jobs=300,
        repeat=3,
    )
    assert table.headings == [
        "drain",
        "connections",
        "jobs/s",
        "share of raw-100",
        "share of the durable floor",
        "server CPU us/job",
        "client CPU us/job",
        "CPU per job, x the floor's",
    ]
    # The worker's row is measured against the floor on one connection: 10,000 of 20,000
    # jobs/s, and (50 + 25) of (42 + 8) us of CPU per job.
    assert table.rows == [
        [
            floor.RawDrain.label,
            "1",
            "50,000 (40,000-60,000)",
            "1.00",
            "2.50",
            "50.0",
            "8.0",
            "1.16",
        ],
        [floor.RawDrain.label, "4", "80,000", "1.00", "2.00", "50.0", "8.0", "n/a"],
        [floor.DurableDrain.label, "1", "20,000", "0.40", "1.00", "42.0", "8.0", "1.00"],
        [floor.DurableDrain.label, "4", "40,000", "0.50", "1.00", "n/a", "8.0", "n/a"],
        [floor.WorkerDrain.label, "1 + slots", "10,000", "0.20", "0.50", "50.0", "25.0", "1.50"],
    ]


# -- the runs -------------------------------------------------------------------------


@pytest.mark.process
def test_the_benchmark_runs_on_a_tiny_n(tmp_path):
    output = run_script(
        "run.py",
        "--database",
        "sqlite",
        "--database-url",
        f"sqlite:///{tmp_path / 'tiny_bench.sqlite3'}",
        "--systems",
        "jobqueue",
        "--only",
        "W1",
        "W2",
        "W3",
        "W7",
        "W11",
        "--jobs",
        "20",
        "--count-jobs",
        "20",
        "--repeat",
        "1",
        "--no-write",
    )
    for row in ("| W1 |", "| W2 |", "| W3 |", "statements per job"):
        assert row in output
    assert "## W11" not in output  # PostgreSQL only: left out, and the run goes on


def bench_database_url(suffix: str) -> str:
    """A PostgreSQL database of its own on the test server, named as the bench demands: it
    empties its tables."""
    from django.db import connection

    settings = connection.settings_dict
    host, port = settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432
    password = f":{settings['PASSWORD']}" if settings["PASSWORD"] else ""
    user = f"{settings['USER']}{password}@" if settings["USER"] else ""
    return f"postgres://{user}{host}:{port}/{settings['NAME']}_{suffix}"


def section(output: str, key: str) -> list[list[str]]:
    """The rows of workload ``key``'s own table in the report, each a list of cells."""
    text = output[output.index(f"## {key}: ") :]
    text = text[: text.index("\n## ", 1)]
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


@pytest.mark.process
def test_a_run_takes_its_companions_sections_with_its_own_sizes(postgresql_only, tmp_path):
    report = tmp_path / "report.md"
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("companion_bench"),
        "--systems",
        "jobqueue",
        "--only",
        "W2",
        "--also",
        "prepared",
        "sqlite",
        "--jobs",
        "20",
        "--latency-jobs",
        "10",
        "--repeat",
        "1",
        "--output",
        str(report),
    )
    # This run's table, then each companion's report one heading level down, in the file too.
    assert report.read_text().strip() == output.strip()
    prepared = output[output.index("# With prepared statements (`--prepared`)") :]
    sqlite = output[output.index("# On SQLite (`--database sqlite`)") :]
    assert output.index("| W2 |") < len(output) - len(prepared)
    assert "## Results" in prepared and "| W1 |" in prepared and "| W4 |" in prepared
    assert "- prepared statements: on in jobqueue" in prepared[: len(prepared) - len(sqlite)]
    # On this run's database: only the binding changes, not the server.
    assert "--database-url " + bench_database_url("companion_bench") in prepared
    assert "(sqlite)" in sqlite and "| W4 |" in sqlite
    # The companions took this run's sizes: 20 jobs, one run each.
    assert "enqueue 20 jobs" in sqlite and "median of 1 runs" in sqlite


def test_a_run_of_every_workload_on_postgresql_has_both_companions_and_others_none():
    everything = cli.parse([])
    assert cli.companions(everything, "postgresql") == ["prepared", "sqlite"]
    assert cli.companions(cli.parse(["--only", "W1"]), "postgresql") == []
    assert cli.companions(everything, "other") == []
    assert cli.companions(cli.parse(["--prepared"]), "postgresql") == []
    assert cli.companions(cli.parse(["--also"]), "postgresql") == []
    assert cli.passed_on(["--quick", "--only", "W1", "W2", "--jobs=5", "--database-url", "x"]) == [
        "--quick",
        "--jobs=5",
    ]


@pytest.mark.process
def test_the_large_table_workload_runs_on_a_tiny_table(postgresql_only):
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("large_bench"),
        "--only",
        "W6",
        "--large-finished",
        "200",
        "--large-jobs",
        "20",
        "--large-concurrency",
        "2",
        "--repeat",
        "2",
        "--no-write",
    )
    headings, *rows = section(output, "W6")
    assert headings == ["figure", "empty table", "200 finished rows", "ratio"]
    assert [row[0] for row in rows] == [
        "claim statement, execution (EXPLAIN ANALYZE, median of 30), ms",
        "drain 20 no-op jobs, one in-process worker, concurrency 2, jobs/s",
        "`jobs queues` figures, ms",
    ]
    assert "## Results" not in output  # no system was compared


@pytest.mark.process
def test_the_floor_workload_drains_every_job_each_way(postgresql_only):
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("floor_bench"),
        "--only",
        "W11",
        "--floor-jobs",
        "300",
        "--repeat",
        "1",
        "--floor-connections",
        "1",
        "2",
        "--no-write",
    )
    headings, *rows = section(output, "W11")
    assert headings[:4] == ["drain", "connections", "jobs/s", "share of raw-100"]
    assert [(row[0], row[1]) for row in rows] == [
        (floor.RawDrain.label, "1"),
        (floor.RawDrain.label, "2"),
        (floor.DurableDrain.label, "1"),
        (floor.DurableDrain.label, "2"),
        (floor.ClaimStatementDrain.label, "1"),
        (floor.ClaimStatementDrain.label, "2"),
        (floor.WorkerDrain.label, "1 + slots"),
    ]
    # The workload counts the succeeded rows after each drain and fails on a shortfall.
    assert "Every drain finished all 300 jobs." in output


@pytest.mark.process
def test_the_admin_workload_renders_every_page(postgresql_only):
    from bench.admin_changelist import PAGES

    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("admin_bench"),
        "--only",
        "W12",
        "--admin-jobs",
        "5000",
        "--admin-renders",
        "1",
        "--admin-minutes",
        "180",
        "--no-write",
    )
    headings, *rows = section(output, "W12")
    assert headings == ["page", "median ms", "p95 ms", "min ms", "max ms", "queries"]
    assert [row[0] for row in rows] == [page for page, _ in PAGES]
    assert all(int(row[5]) > 0 for row in rows)


@pytest.mark.process
def test_the_backlog_workload_drains_each_backlog_with_one_and_four_supervisors(
    postgresql_only,
):
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("backlog_bench"),
        "--systems",
        "jobqueue",
        "--only",
        "W10",
        "--backlog-sizes",
        "30",
        "60",
        "--backlog-batch",
        "25",
        "--no-write",
    )
    headings, *rows = section(output, "W10")
    assert headings[:3] == ["backlog", "supervisors", "drain, jobs/s"]
    assert headings[-3:] == ["claim p50, ms", "claim p99, ms", "claims"]
    # The workload counts the succeeded rows after each drain and fails on a shortfall;
    # every drain's claims were timed in its workers.
    assert [(row[0], row[1]) for row in rows] == [
        ("30", "1"),
        ("30", "4"),
        ("60", "1"),
        ("60", "4"),
    ]
    assert all(int(row[-1].replace(",", "")) > 0 for row in rows)
    assert [row[3] for row in rows[:2]] == ["1.00", "1.00"]


@pytest.mark.process
def test_the_churn_workload_samples_each_interval_and_runs_every_job(postgresql_only):
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("churn_bench"),
        "--only",
        "W8",
        "--systems",
        "jobqueue",
        "--churn-minutes",
        "0.2",
        "--churn-interval",
        "3",
        "--churn-probe-jobs",
        "100",
        "--churn-share",
        "0.1",
        "--no-write",
    )
    headings, *rows = section(output, "W8")
    assert headings[:3] == ["minute", "jobs/s", "pending"]
    # The table's size, then one column per index of the jobs table, the claim index's
    # among them; the claim's scan of that index, read with EXPLAIN each interval.
    sizes = headings.index("jobqueue_job, MiB")
    assert "claim, MiB" in headings[sizes + 1 :]
    assert "claim scan, buffers" in headings[:sizes]
    assert [row[0] for row in rows] == ["0.05", "0.1", "0.15", "0.2"]  # 12 s, every 3 s
    # Every interval's claims were timed in the worker.
    assert all(int(row[5].replace(",", "")) > 0 for row in rows)
    # The workload checks that every job enqueued succeeded (pruned or left) and fails on
    # a shortfall; the summaries compare the first third with the last.
    summary = section(output[output.index("## W8: sustained churn: the last window") :], "W8")
    assert [row[:2] for row in summary[1:3]] == [
        ["jobqueue", "drain, jobs/s"],
        ["jobqueue", "claim p50, ms"],
    ]
    assert "## W8: sustained churn: each relation's size over the last half" in output
    assert "pgqueuer" not in output.split("## Notes")[0]


@pytest.mark.process
def test_the_processes_workload_drains_with_each_number_of_processes(postgresql_only):
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("processes_bench"),
        "--systems",
        "jobqueue",
        "--only",
        "W9",
        "--processes-jobs",
        "40",
        "--processes",
        "1",
        "2",
        "--repeat",
        "1",
        "--no-write",
    )
    headings, *rows = section(output, "W9")
    assert headings[:3] == ["processes", "drain, jobs/s", "share of 1's"]
    # The workload counts the succeeded rows after each drain and fails on a shortfall.
    assert [row[0] for row in rows] == ["1", "2"]
    assert rows[0][2] == "1.00"
    # The supervisor's CPU, its workers' included, was read before the bench reaped it.
    assert all(float(row[3].replace(",", "")) > 0 for row in rows)


@pytest.mark.process
def test_the_flow_control_workload_drains_each_way_and_times_key_b_behind_key_a(
    postgresql_only,
):
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("flow_bench"),
        "--only",
        "W14",
        "--flow-jobs",
        "40",
        "--flow-keys",
        "4",
        "--flow-head",
        "40",
        "--repeat",
        "1",
        "--no-write",
    )
    headings, *rows = section(output, "W14")
    assert headings[:3] == ["limits", "drain, jobs/s", "drain / without"]
    assert headings[-4:] == ["claim p50, ms", "claim p50 / without", "claim p99, ms", "claims"]
    # The same jobs, each way; the workload fails unless every job of a drain succeeded,
    # and each drain's claims were timed in its worker.
    assert [row[0] for row in rows] == [
        "none",
        '`Concurrency(key="key", limit=2)`',
        '`RateLimit(key="key", limit=1000, per=1.0)`',
    ]
    assert [rows[0][2], rows[0][4]] == ["1.00", "1.00"]
    assert all(int(row[-1]) > 0 for row in rows)
    assert "Goals (issue 29): the drain with limits at least 0.8" in output
    head = output[output.index("## W14: flow control: the head-of-line case") :]
    headings, *rows = section(head, "W14")
    assert headings[:2] == ["B's 10 jobs: enqueue to last finish, s", "A jobs finished meanwhile"]
    # One row of medians: B's jobs all finished (the workload waits for them), some time
    # after their enqueue, with A's jobs counted on either side of that moment.
    [(seconds, meanwhile, waiting, claims, _)] = rows
    assert float(seconds) > 0 and int(claims) > 0
    assert int(meanwhile) + int(waiting) <= 40 - 20  # 20 of A's finished before B came
    assert "Goal (issue 29): within 2 s:" in head
    assert "pgqueuer" not in output.split("## Notes")[0]


@pytest.fixture
def pgqueuer_venv() -> None:
    """pgqueuer's virtualenv, made from PyPI in bench/.venvs if it is not there yet; the
    test is skipped if it cannot be made (no Python 3.12, no index)."""
    from bench.systems.peers import PgQueuer

    try:
        PgQueuer().ensure_venv()
    except (subprocess.CalledProcessError, SystemExit, OSError) as exc:
        pytest.skip(f"cannot make pgqueuer's virtualenv: {exc}")


@pytest.mark.process
def test_the_processes_and_backlog_workloads_measure_pgqueuer_beside_jobqueue(
    postgresql_only, pgqueuer_venv
):
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("peered_bench"),
        "--systems",
        "jobqueue",
        "pgqueuer",
        "--only",
        "W9",
        "W10",
        "--processes-jobs",
        "40",
        "--processes",
        "1",
        "2",
        "--repeat",
        "1",
        "--backlog-sizes",
        "40",
        "--backlog-batch",
        "25",
        "--backlog-window",
        "30",
        "--no-write",
    )
    headings, *rows = section(output, "W9")
    assert headings[:4] == ["system", "processes", "drain, jobs/s", "share of 1's"]
    # Each drain's succeeded jobs are counted from the system's rows; a shortfall fails.
    assert [(row[0], row[1]) for row in rows] == [
        ("jobqueue", "1"),
        ("jobqueue", "2"),
        ("pgqueuer", "1"),
        ("pgqueuer", "2"),
    ]
    assert [row[3] for row in rows[::2]] == ["1.00", "1.00"]
    # pgqueuer's driver and its worker processes, read from /proc before the bench reaped it.
    assert all(float(row[4].replace(",", "")) > 0 for row in rows)
    headings, *rows = section(output, "W10")
    assert headings[:4] == ["system", "backlog", "workers", "drain, jobs/s"]
    assert headings[-4:] == ["jobs counted", "claim p50, ms", "claim p99, ms", "claims"]
    assert [(row[0], row[1], row[2]) for row in rows] == [
        ("jobqueue", "40", "1"),
        ("jobqueue", "40", "4"),
        ("pgqueuer", "40", "1"),
        ("pgqueuer", "40", "4"),
    ]
    # Both drains end within the window: every job succeeded and the claims were timed in
    # the workers, jobqueue's by its execute wrapper, pgqueuer's in its driver.
    assert all(int(row[-1].replace(",", "")) > 0 for row in rows)
    assert [row[4] for row in rows] == ["1.00"] * 4


MEMORY_HEADINGS = [
    "system",
    "moment",
    "RSS, MB",
    "peak RSS, MB",
    "growth over idle",
    "jobs drained",
]


@pytest.mark.process
def test_the_memory_workload_reads_the_worker_s_resident_set_three_times(postgresql_only):
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("memory_bench"),
        "--systems",
        "jobqueue",
        "--only",
        "W13",
        "--memory-jobs",
        "30",
        "--no-write",
    )
    headings, *rows = section(output, "W13")
    assert headings == MEMORY_HEADINGS
    assert [row[:2] for row in rows] == [
        ["jobqueue", "idle after start-up"],
        ["jobqueue", "after 30 no-op jobs"],
        ["jobqueue", "after 30 jobs returning 10 KB"],
    ]
    assert all(float(row[2]) > 10 for row in rows)  # a Python process with Django loaded
    assert rows[0][4] == "+0.0%"
    assert [row[5] for row in rows] == ["0", "30", "60"]
    assert "Every worker is one process, with no children." in output


@pytest.mark.process
def test_the_memory_workload_reads_a_peer_s_worker_beside_jobqueue_s(postgresql_only):
    # pgqueuer's virtualenv is installed from PyPI on first use (bench/.venvs/pgqueuer).
    output = run_script(
        "run.py",
        "--database-url",
        bench_database_url("memory_bench"),
        "--systems",
        "jobqueue",
        "pgqueuer",
        "--only",
        "W13",
        "--memory-jobs",
        "20",
        "--no-write",
    )
    headings, *rows = section(output, "W13")
    assert headings == MEMORY_HEADINGS
    assert [row[:2] for row in rows] == [
        ["jobqueue", "idle after start-up"],
        ["jobqueue", "after 20 no-op jobs"],
        ["jobqueue", "after 20 jobs returning 10 KB"],
        ["pgqueuer", "idle after start-up"],
        ["pgqueuer", "after 20 no-op jobs"],
        ["pgqueuer", "after 20 jobs building 10 KB"],  # it keeps no results
    ]
    # Its worker ran every job of both tasks (the bench waits for them to succeed).
    assert [row[5] for row in rows] == ["0", "20", "40"] * 2
    assert all(float(row[2]) > 10 for row in rows)  # a Python process with psycopg loaded
    assert [row[4] for row in rows[::3]] == ["+0.0%", "+0.0%"]
    assert "pgqueuer: no results are kept" in output


def test_the_ten_kb_task_returns_ten_kilobytes():
    from bench.benchapp.tasks import ten_kb

    assert len(ten_kb.func(0)) == 10_240


def test_graphile_worker_is_a_peer_run_with_node_from_its_own_folder(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
    from bench import systems
    from bench.systems.peers import NODE_PEERS, PEERS

    peer = systems.available()["graphile-worker"]()
    command = peer.command("work", "--setting", "default", "--burst")
    assert Path(command[0]).name == "node"
    assert command[1:] == [
        str(PEERS / "peer_graphile.mjs"),
        "work",
        "--setting",
        "default",
        "--burst",
    ]
    env = peer.worker_env()
    assert env["BENCH_GRAPHILE_DIR"] == str(NODE_PEERS / "graphile")
    assert env["BENCH_DSN"] == "postgres://postgres@127.0.0.1:5432/graphile_bench"
    assert set(peer.drain_settings) == {"default", "tuned"}


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_the_graphile_worker_driver_is_valid_javascript():
    from bench.systems.peers import PEERS

    node = shutil.which("node")
    assert node is not None
    checked = subprocess.run(
        [node, "--check", str(PEERS / "peer_graphile.mjs")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
