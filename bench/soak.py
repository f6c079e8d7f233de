"""The chaos soak: ``python bench/soak.py --help`` (see bench/README.md).

N jobs of two tasks, ``on_crash="retry"`` and ``on_crash="park"``, each with two
``ctx.step``s, drain under ONE supervisor (``manage.py runjobs``) while the soak SIGKILLs
its busy workers, pauses one with SIGSTOP for longer than LEASE, restarts PostgreSQL three
times and SIGKILLs the supervisor itself once (then starts a fresh one). Every handler run
records, fenced by its claim token and lease, its start, its steps and its end in a side
table. At the end one table, and a non-zero exit status unless: no job was lost, every
"retry" job succeeded, no "park" job started twice, no two runs of one job overlapped, no
stored step ran again, every job is terminal, and all of the chaos happened.

A calm drain of the same tasks first (``--baseline-jobs``) gives the throughput without
chaos, so that the table can give the chaos throughput as a share of it.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# jobqueue and the bench from the repository, and the example project the bench settings
# extend; the supervisor and its workers get the same through PYTHONPATH.
sys.path[:0] = [str(REPO), str(REPO / "testproject")]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
from typing import Any  # noqa: E402

from bench import database  # noqa: E402
from bench.chaos import Cluster, SupervisorProcess  # noqa: E402
from bench.soak_chaos import calm_drain, chaos_drain  # noqa: E402
from bench.soak_checks import checks, table  # noqa: E402
from bench.soak_jobs import drop_database, progress, set_up_tables, throughput  # noqa: E402

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/jobqueue_soak"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/soak.py",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--database-url",
        default=DEFAULT_URL,
        help="PostgreSQL; the database is dropped and created, so its name must contain "
        "'soak'; the soak restarts the server that serves it",
    )
    parser.add_argument(
        "--pg-cluster",
        default=os.environ.get("JOBQUEUE_PG_CLUSTER"),
        help="the pg_ctlcluster cluster to restart, e.g. '15 chaos' (default: "
        "JOBQUEUE_PG_CLUSTER, else the local cluster listening on the database's port)",
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs under chaos")
    parser.add_argument("--park-share", type=float, default=0.5, help='share of "park" jobs')
    parser.add_argument(
        "--duration",
        type=float,
        help="s of chaos (default: until drained); jobs left when it ends drain calmly",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="s from the start of the chaos after which the soak gives up waiting for the "
        "drain (and fails: jobs not terminal)",
    )
    parser.add_argument("--kill-every", type=float, default=1.0, help="s between SIGKILLs")
    parser.add_argument(
        "--pause-every", type=float, default=20.0, help="s between SIGSTOP pauses' starts"
    )
    parser.add_argument(
        "--pause-for", type=float, help="s a paused worker stays stopped (default: LEASE + 3)"
    )
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=4, help="threads per process")
    parser.add_argument("--lease", type=float, default=6.0, help="JOBQUEUE['LEASE'], s")
    parser.add_argument(
        "--safety-buffer", type=float, default=2.0, help="JOBQUEUE['SAFETY_BUFFER'], s"
    )
    parser.add_argument(
        "--baseline-jobs",
        type=int,
        default=3_000,
        help="jobs of the calm drain before the chaos (at most --jobs; 0: none)",
    )
    parser.add_argument("--seed", type=int, help="random seed of the chaos (default: random)")
    parser.add_argument("--log", type=Path, help="the supervisors' output (default: a temp file)")
    parser.add_argument(
        "--keep-database", action="store_true", help="leave the soak database for inspection"
    )
    args = parser.parse_args(argv)
    if args.pause_for is None:
        args.pause_for = args.lease + 3.0
    if args.pause_for <= args.lease:
        parser.error("--pause-for must be longer than --lease, or no lease runs out")
    args.baseline_jobs = min(args.baseline_jobs, args.jobs)
    return args


def worker_env(settings: dict[str, Any]) -> dict[str, str]:
    return {
        **os.environ,
        "JOBQUEUE_SOAK_SETTINGS": json.dumps(settings),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "testproject")]),
        "PYTHONUNBUFFERED": "1",
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    config = database.checked(args.database_url, "soak", "the soak drops it")
    if config["ENGINE"] != database.POSTGRESQL:
        sys.exit("soak: PostgreSQL only (it restarts the server)")
    cluster = (
        Cluster(args.pg_cluster)
        if args.pg_cluster
        else Cluster.serving(int(config.get("PORT") or 5432))
    )
    if args.log is None:
        args.log = Path(tempfile.mkstemp(prefix="jobqueue-soak-", suffix=".log")[1])
    settings = {
        "LEASE": args.lease,
        "SAFETY_BUFFER": args.safety_buffer,
        "MAX_CRASHES": 1000,  # every "retry" job must get through whatever the soak does
        "TIMEOUT": 60,  # far above a run's few milliseconds, even on a loaded machine
        "SHUTDOWN_TIMEOUT": 3,
        "POOLS": {
            "default": {
                "queues": "*",
                "processes": args.processes,
                "concurrency": args.concurrency,
            }
        },
    }
    database.use(args.database_url, "bench.soak_settings")
    os.environ["JOBQUEUE_SOAK_SETTINGS"] = json.dumps(settings)
    # A `timeout` or Ctrl-C ends the soak through the finally blocks: the paused worker is
    # continued, the supervisor stopped and the database dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("soak: terminated"))
    progress(
        f"database {config['NAME']} on {config.get('HOST')}:{config.get('PORT')}, "
        f"cluster {cluster}; supervisors' output in {args.log}"
    )
    database.create(config, replace=True, wait=120)
    try:
        import django

        django.setup()
        set_up_tables()
        env = worker_env(settings)
        baseline = calm_drain(args, env) if args.baseline_jobs else None
        chaos, ids, seconds, over = chaos_drain(args, cluster, env)
        chaos_rate = throughput(over)
        held = checks(ids)
        complete = chaos.done()
        held["all of the chaos happened"] = (
            complete,
            "kills, a pause, 3 restarts and the supervisor's kill"
            if complete
            else "too few jobs or too short a --duration for all of it",
        )
        orphans_gone = all(s is not None for s in chaos.orphans.values())
        held["orphaned workers stopped by themselves"] = (
            orphans_gone,
            f"{sum(s is not None for s in chaos.orphans.values())} of {len(chaos.orphans)}",
        )
        print(table(args, cluster, chaos, ids, seconds, chaos_rate, baseline, held))
        passed = all(ok for ok, _ in held.values())
        print(f"result: {'PASS' if passed else 'FAIL'}")
        return 0 if passed else 1
    finally:
        from django.db import connections

        connections.close_all()
        for supervisor in SupervisorProcess.started:  # nothing of ours outlives the soak
            supervisor.stop()
        if not args.keep_database:
            drop_database(config)


if __name__ == "__main__":
    sys.exit(main())
