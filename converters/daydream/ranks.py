"""Which rank each device, process and CPU thread of a report belongs to (a small pre-pass in SQL).

`per="device"` (default): one rank per GPU (deviceId) that ran work; a CPU thread joins the rank
of the device it launched most work on (in the usual one-GPU-per-process job: its process's GPU).
`per="process"`: one rank per process (pid from globalPid/globalTid). Only GROUP BY results come
back to Python, never whole tables.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Optional

from chakra.converters.daydream import schema as S
from chakra.converters.daydream.schema import Report
from chakra.errors import InputError

PER_CHOICES = ("device", "process")
_GPU_TABLES = (S.KERNEL, S.MEMCPY, S.MEMSET)


@dataclass
class RankPlan:
    per: str
    keys: list[int]  # deviceId or pid, one per local rank (sorted)
    thread_rank: dict[int, int] = field(default_factory=dict)  # globalTid -> local rank
    device_names: dict[int, str] = field(default_factory=dict)
    pids: dict[int, set[int]] = field(default_factory=dict)  # local rank -> pids in it
    devices: dict[int, set[int]] = field(default_factory=dict)  # local rank -> devices in it

    def gpu_rank(self, global_pid: Optional[int], device: int) -> int:
        if self.per == "device":
            return self._index[device]
        return self._index[S.split_global_id(global_pid)[0]]

    def __post_init__(self) -> None:
        self._index = {key: i for i, key in enumerate(self.keys)}


def plan_ranks(report: Report, per: str = "device") -> RankPlan:
    if per not in PER_CHOICES:
        raise InputError(f"--per must be one of {', '.join(PER_CHOICES)}, not {per!r}")
    conn = report.conn
    pid_devices: dict[int, Counter] = defaultdict(Counter)  # pid -> device -> GPU task count
    for table in _GPU_TABLES:
        if not report.has(table):
            continue
        gpid = "globalPid" if report.has(table, "globalPid") else "0"
        for g, dev, n in conn.execute(f'SELECT {gpid}, deviceId, COUNT(*) FROM "{table}" GROUP BY 1, 2'):
            pid_devices[S.split_global_id(g)[0]][dev] += n
    threads: list[int] = []
    if report.has(S.RUNTIME):
        threads = [g for (g,) in conn.execute(f'SELECT DISTINCT globalTid FROM "{S.RUNTIME}"') if g is not None]
    api_pids = {S.split_global_id(g)[0] for g in threads}

    if per == "device":
        keys = sorted({d for c in pid_devices.values() for d in c})
        if not keys:
            keys = [0]  # API calls only: one rank holding the CPU side
    else:
        keys = sorted(set(pid_devices) | api_pids)
    plan = RankPlan(per=per, keys=keys)
    plan.device_names = _device_names(report)

    multi = {pid for pid, c in pid_devices.items() if len(c) > 1}
    thread_device = _thread_devices(report, multi) if per == "device" and multi else {}
    for g in threads:
        pid = S.split_global_id(g)[0]
        if per == "process":
            rank = plan._index[pid]
        else:
            dev = thread_device.get(g)
            if dev is None:
                counts = pid_devices.get(pid)
                dev = counts.most_common(1)[0][0] if counts else keys[0]
            rank = plan._index[dev]
        plan.thread_rank[g] = rank
        plan.pids.setdefault(rank, set()).add(pid)
    for pid, counts in pid_devices.items():
        for dev in counts:
            rank = plan._index[dev] if per == "device" else plan._index[pid]
            plan.pids.setdefault(rank, set()).add(pid)
            plan.devices.setdefault(rank, set()).add(dev)
    return plan


def _thread_devices(report: Report, pids: set[int]) -> dict[int, int]:
    """Majority device per thread, for processes driving several GPUs (join API -> GPU by pid and corr)."""
    parts = []
    for table in _GPU_TABLES:
        if report.has(table) and report.has(table, "globalPid"):
            parts.append(f'SELECT correlationId AS c, globalPid AS p, deviceId AS d FROM "{table}"')
    if not parts or not report.has(S.RUNTIME):
        return {}
    pid_list = ", ".join(str(p) for p in sorted(pids))
    sql = (
        f'SELECT r.globalTid, g.d, COUNT(*) FROM "{S.RUNTIME}" r JOIN ({" UNION ALL ".join(parts)}) g '
        "ON g.c = r.correlationId AND g.p = ((r.globalTid >> 24) << 24) "
        f"WHERE ((r.globalTid >> 24) & 16777215) IN ({pid_list}) GROUP BY 1, 2"
    )
    best: dict[int, tuple[int, int]] = {}
    for g, dev, n in report.conn.execute(sql):
        if g not in best or n > best[g][1]:
            best[g] = (dev, n)
    return {g: dev for g, (dev, _) in best.items()}


def _device_names(report: Report) -> dict[int, str]:
    if not report.has(S.GPU_INFO, "id") or not report.has(S.GPU_INFO, "name"):
        return {}
    return {int(i): str(n) for i, n in report.conn.execute(f'SELECT id, name FROM "{S.GPU_INFO}"')}


def stream_flags(report: Report) -> dict[tuple[int, int], int]:
    """(pid, streamId) -> ENUM_CUPTI_STREAM_TYPE flag (1 default/blocking, 2 non-blocking, 3 legacy null)."""
    flags: dict[tuple[int, int], int] = {}
    t = S.STREAMS
    if report.has(t, "streamId") and report.has(t, "processId") and report.has(t, "flag"):
        for sid, pid, flag in report.conn.execute(f'SELECT streamId, processId, flag FROM "{t}"'):
            flags[(int(pid), int(sid))] = int(flag) if flag is not None else 0
    null_table = "TARGET_INFO_CUDA_NULL_STREAM"
    if report.has(null_table, "streamId") and report.has(null_table, "processId"):
        for sid, pid in report.conn.execute(f'SELECT streamId, processId FROM "{null_table}"'):
            flags[(int(pid), int(sid))] = 3
    ctx_table = "TARGET_INFO_CUDA_CONTEXT_INFO"
    if report.has(ctx_table, "nullStreamId") and report.has(ctx_table, "processId"):
        for sid, pid in report.conn.execute(f'SELECT nullStreamId, processId FROM "{ctx_table}"'):
            if sid is not None:
                flags[(int(pid), int(sid))] = 3
    return flags


def copy_engines(report: Report) -> dict[int, int]:
    """deviceId -> number of async copy engines (TARGET_INFO_GPU.asyncEngines), when the report says."""
    if not report.has(S.GPU_INFO, "asyncEngines") or not report.has(S.GPU_INFO, "id"):
        return {}
    return {int(i): int(n or 0) for i, n in report.conn.execute(f'SELECT id, asyncEngines FROM "{S.GPU_INFO}"')}
