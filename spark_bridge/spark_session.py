"""Spark sessions for offset analytics: RayDP on the current Ray cluster.

Owns starting and stopping Spark. Rules:
- `session()` starts Spark with `raydp.init_spark` on the Ray cluster this
  process is connected to. With none, it connects to `ray_address` (or
  $RAY_ADDRESS) or starts a local Ray, and then shuts that Ray down again
  on stop. Plain local Spark (`local[2]`) runs only when asked with
  `fallback_local=True`, meant for machines without Ray; it is logged as
  such, never chosen silently.
- Java 17 is checked before anything starts (`jvm.require_java17`), and
  its `--add-opens` options go to the driver, the executors and RayDP's
  app master.
- The driver and the app master compile with C1 only (`QUICK_JIT`): they
  plan, generate code and schedule, short bursts of many methods that C2's
  compilations slowed more than they sped; the executors, which run every
  row, keep both compilers. Arrow Java's bounds and null checks are off in
  the driver and the executors (`UNCHECKED_ARROW`). A user's own options
  come after ours (the last -XX or -D flag wins).
- Spark's Python workers run this interpreter: PYSPARK_PYTHON is set to it
  for the start only, unless the user set it.
- One session per process at a time: RayDP keeps one global Spark context.
- `stop()` is idempotent and leaves nothing running: RayDP's executors and
  app master, the driver JVM if this session launched it, and the Ray it
  started. It waits for the session's JVMs to exit, kills (by pid) those
  still running after a grace period, and deletes the temp files they left
  (see `jvm.JvmTracker`).
- Ray objects a DataFrame reads from (`replica_reader`'s Arrow blocks) are
  kept by the session (`ray_objects`) and released when it stops: Spark
  reads them again for every job, and no DataFrame object outlives them.
- `quiet=True` (the CLI's default) keeps Spark's and the JVM's logging out
  of the terminal: errors only, start-up output captured and shown with the
  exception when something fails (`quiet.QuietJvm`).
- RayDP's fault-tolerant mode is off by default: it connects the driver JVM
  to Ray for Spark->Ray dataset conversion, which these analytics never do,
  at the cost of a slower start and one more 40 MB library copy in /tmp.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from spark_bridge.jvm import JAVA17_OPTIONS, JvmTracker, require_java17
from spark_bridge.quiet import QuietJvm

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)

DEFAULT_EXECUTORS = 1
DEFAULT_EXECUTOR_CORES = 1
DEFAULT_EXECUTOR_MEMORY = "1GB"
LOCAL_MASTER = "local[2]"
# The report's seven tables the first time: 14.2-14.6 s with C1 only on the driver, 18.2-18.4
# with both compilers (1 M records, one executor; docs/analytics.md).
QUICK_JIT = "-XX:TieredStopAtLevel=1"
# Arrow Java's per-access checks off where Spark reads Arrow (the executors, and the driver,
# which is the executor in local mode): a bounds check (an atomic read of the buffer's
# reference count) on every validity bit and a second validity read in every `get`, after
# Spark's own `isNullAt`. A 2-executor read of every row: 1.75-1.85 s against 2.06-2.08
# (4 M records; docs/analytics.md). These JVMs read only the Arrow that pyarrow wrote in the
# session's own Python workers and Ray tasks.
UNCHECKED_ARROW = "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"
# Each JVM's Java options before the user's.
OUR_JAVA_OPTIONS = {
    "spark.driver.extraJavaOptions": f"{JAVA17_OPTIONS} {QUICK_JIT} {UNCHECKED_ARROW}",
    "spark.executor.extraJavaOptions": f"{JAVA17_OPTIONS} {UNCHECKED_ARROW}",
    "spark.ray.raydp_app_master.extraJavaOptions": f"{JAVA17_OPTIONS} {QUICK_JIT}",
}
JAVA_OPTION_KEYS = tuple(OUR_JAVA_OPTIONS)
# Seconds the session's JVMs get to exit after Spark stops before they are killed.
JVM_EXIT_GRACE_S = 15.0
# RayDP's app master actor is `<app name>` + this (raydp.spark.ray_cluster_master).
SPARK_MASTER_SUFFIX = "_SPARK_MASTER"

_active: BridgeSession | None = None


@dataclass
class BridgeSession:
    """A running Spark session and everything needed to stop it without leftovers."""

    spark: SparkSession
    mode: Literal["raydp", "local"]
    tracker: JvmTracker
    owns_ray: bool = False
    owns_gateway: bool = False
    quiet: QuietJvm | None = None
    stopped: bool = False
    # Ray objects the session's DataFrames read (`arrow_frame`): Spark reads them again for
    # every job over those DataFrames, so they live until `stop`.
    ray_objects: list[Any] = field(default_factory=list)

    def arrow_frame(self, schema: pa.Schema, streams: list[Any]) -> DataFrame:
        """A DataFrame of Arrow IPC streams in Ray's object store (object refs of bytes of
        `schema`), read by RayDP's JVMs (its `RayDatasetRDD`); the streams are kept by the
        session. A RayDP session only (`raydp_session`)."""
        if not streams:
            from pyspark.sql.pandas.types import from_arrow_schema

            return self.spark.createDataFrame([], from_arrow_schema(schema))
        self.ray_objects.extend(streams)
        from raydp.spark import ray_dataset_to_spark_dataframe

        frame: DataFrame = ray_dataset_to_spark_dataframe(self.spark, schema, streams)
        return frame

    def stop(self) -> None:
        """Stop Spark (and the Ray this session started); idempotent."""
        global _active
        if self.stopped:
            return
        self.stopped = True
        if _active is self:
            _active = None
        atexit.unregister(self.stop)
        self.ray_objects.clear()
        try:
            _shutdown(self.spark, self.mode, self.tracker, self.owns_ray, self.owns_gateway)
        finally:
            if self.quiet is not None:
                self.quiet.close()

    def __enter__(self) -> SparkSession:
        return self.spark

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None and self.quiet is not None:
            self.quiet.annotate(exc)
        self.stop()


def session(
    num_executors: int = DEFAULT_EXECUTORS,
    executor_cores: int = DEFAULT_EXECUTOR_CORES,
    executor_memory: str | int = DEFAULT_EXECUTOR_MEMORY,
    *,
    app_name: str | None = None,
    configs: dict[str, str] | None = None,
    fallback_local: bool = False,
    ray_address: str | None = None,
    quiet: bool = False,
    on_ray: Callable[[], None] | None = None,
) -> BridgeSession:
    """Start Spark for analytics; use as `with session() as spark:` or call `.stop()`.

    Executors, their cores and memory are RayDP's (each executor holds its
    cores and memory as Ray resources while it lives). `configs` are extra
    Spark settings, applied last (Java options are appended to ours).
    `fallback_local=True` runs plain `local[2]` Spark without Ray. `quiet`:
    errors only from Spark's JVM, its other output captured (module docstring).
    `on_ray` is called once Ray is up, before RayDP starts: work that needs Ray but not
    Spark runs while Spark starts (the CLI's prefetched read). Raises `JavaVersionError`
    without Java 17, before anything starts.
    """
    if _active is not None:
        raise RuntimeError("a Spark session is already running in this process: stop it first")
    require_java17()
    name = app_name or f"raygroups-analytics-{os.getpid()}"
    quiet_jvm = QuietJvm() if quiet else None
    logging_configs = quiet_jvm.log4j_configs(raydp=not fallback_local) if quiet_jvm else {}
    conf = spark_configs(num_executors * executor_cores, _merged(logging_configs, configs))
    from pyspark import SparkContext

    owns_gateway = SparkContext._gateway is None
    if fallback_local:
        logger.warning("starting plain local Spark (%s), not RayDP: fallback_local=True", LOCAL_MASTER)
        mode: Literal["raydp", "local"] = "local"
        owns_ray, tracker = False, JvmTracker()
    else:
        owns_ray, session_dir = _ensure_ray(ray_address, num_executors * executor_cores)
        mode, tracker = "raydp", JvmTracker(ray_session_dir=session_dir)
    try:
        if on_ray is not None and mode == "raydp":
            on_ray()
        with _python_for_workers(), quiet_jvm.capture() if quiet_jvm else nullcontext():
            if fallback_local:
                spark = _start_local(name, conf)
            else:
                spark = _start_raydp(name, num_executors, executor_cores, executor_memory, conf)
    except BaseException as exc:
        if quiet_jvm is not None:
            quiet_jvm.annotate(exc)
            quiet_jvm.close()
        _shutdown(None, mode, tracker, owns_ray, owns_gateway)
        raise
    started = BridgeSession(spark, mode, tracker, owns_ray, owns_gateway, quiet_jvm)
    _register(started)
    return started


def active_session() -> BridgeSession | None:
    """The session started by `session()` and not stopped yet, if any."""
    return _active


def raydp_session(spark: SparkSession) -> BridgeSession | None:
    """The running RayDP session whose Spark is `spark`; None for any other Spark, which
    cannot read Ray's object store."""
    started = _active
    if started is None or started.spark is not spark or started.mode != "raydp":
        return None
    return started


def stop_session() -> None:
    """Stop the active session, if any."""
    if _active is not None:
        _active.stop()


def spark_configs(total_cores: int, configs: dict[str, str] | None) -> dict[str, str]:
    """Spark settings: small-machine defaults, our Java options, then the user's."""
    conf = {
        # Spark's default of 200 shuffle partitions is 200 tiny tasks per aggregation here.
        "spark.sql.shuffle.partitions": str(max(2, 2 * total_cores)),
        # Adaptive execution re-plans every stage on the driver; with few shuffle partitions
        # and cached inputs it has nothing to adapt: the report's read and tables took
        # 2-2.5 s less without it (1 M records, 1 executor, 2 runs each way).
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    user = dict(configs or {})
    for key, ours in OUR_JAVA_OPTIONS.items():
        conf[key] = " ".join(filter(None, [ours, user.pop(key, "")]))
    conf.update(user)
    return conf


def _merged(ours: dict[str, str], user: dict[str, str] | None) -> dict[str, str]:
    """The user's settings over ours; Java options of both are kept, the user's last."""
    merged = {**ours, **(user or {})}
    for key in JAVA_OPTION_KEYS:
        if key in ours and user and key in user:
            merged[key] = f"{ours[key]} {user[key]}"
    return merged


def _register(started: BridgeSession) -> None:
    global _active
    _active = started
    # A session left running at exit still gets its leftovers removed.
    atexit.register(started.stop)


def _ensure_ray(address: str | None, cores: int) -> tuple[bool, str | None]:
    """Connect to Ray unless connected; returns (whether we did, the local session dir)."""
    import ray

    owns = not ray.is_initialized()
    if owns:
        address = address or os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            # Executors hold their CPUs for their lifetime: leave room for Ray tasks and actors.
            # "local": a bare ray.init() would join any cluster another user started on this machine.
            num_cpus = max(os.cpu_count() or 1, cores + 2)
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return owns, _ray_session_dir()


def _ray_session_dir() -> str | None:
    import ray

    # Private API, hence the guard: only a driver on a Ray node has a local session dir.
    node = getattr(getattr(ray, "_private", None), "worker", None)
    node = getattr(getattr(node, "_global_node", None), "get_session_dir_path", None)
    try:
        return str(node()) if node is not None else None
    except Exception:  # a missing session dir only narrows the cleanup
        return None


def _start_raydp(
    name: str, executors: int, cores: int, memory: str | int, conf: dict[str, str]
) -> SparkSession:
    import raydp

    spark: SparkSession = raydp.init_spark(
        name, executors, cores, memory, fault_tolerant_mode=False, configs=conf
    )
    return spark


def _start_local(name: str, conf: dict[str, str]) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(LOCAL_MASTER).appName(name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@contextmanager
def _python_for_workers() -> Iterator[None]:
    """PYSPARK_PYTHON = this interpreter while the SparkContext reads it, unless set by the user."""
    if "PYSPARK_PYTHON" in os.environ:
        yield
        return
    os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        yield
    finally:
        os.environ.pop("PYSPARK_PYTHON", None)


def _shutdown(
    spark: SparkSession | None, mode: str, tracker: JvmTracker, owns_ray: bool, owns_gateway: bool
) -> None:
    tracker.collect()
    try:
        if mode == "raydp":
            import raydp

            master = _master_name(spark)
            raydp.stop_spark()
            if master is not None and not owns_ray:
                _wait_actor_gone(master, JVM_EXIT_GRACE_S)
        elif spark is not None:
            spark.stop()
        if owns_gateway:
            _stop_driver_gateway()
    finally:
        if owns_ray:
            import ray

            ray.shutdown()
        _reap(tracker)


def _master_name(spark: SparkSession | None) -> str | None:
    """The name of the session's RayDP app master actor (None: no session, or its JVM is gone)."""
    try:
        return None if spark is None else spark.sparkContext.appName + SPARK_MASTER_SUFFIX
    except Exception:  # a JVM that died: nothing to ask, stop_spark cleans up what it can
        return None


def _wait_actor_gone(name: str, timeout_s: float) -> None:
    """`raydp.stop_spark` kills its app master actor and returns before Ray has removed it:
    wait (bounded) until the name is free, so a stopped session leaves nothing named and the
    next session of the same name can start at once."""
    import ray

    deadline = time.monotonic() + timeout_s
    while name in ray.util.list_named_actors():
        if time.monotonic() > deadline:
            logger.warning("Ray still lists the stopped Spark session's actor %s", name)
            return
        time.sleep(0.05)


def _stop_driver_gateway() -> None:
    """End the driver JVM that PySpark launched for this session; the next session launches anew."""
    from pyspark import SparkContext

    gateway: Any = SparkContext._gateway
    if gateway is None:
        return
    SparkContext._gateway = None
    SparkContext._jvm = None
    gateway.shutdown()
    process = getattr(gateway, "proc", None)
    if process is not None:
        process.terminate()
        process.wait(timeout=JVM_EXIT_GRACE_S)


def _reap(tracker: JvmTracker) -> None:
    """Wait for the session's JVMs, kill the stragglers (ours, by pid), remove their temp files."""
    for pid in tracker.wait_exit(JVM_EXIT_GRACE_S):
        logger.warning("killing JVM %d of the stopped Spark session: it did not exit", pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    tracker.wait_exit(5.0)
    removed = tracker.remove_leftovers()
    logger.debug("removed Spark leftovers: %s", removed)
