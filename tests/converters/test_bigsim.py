"""BigSim converter on the 10 real text2log cases (binary v6 logs, their text inputs, detail dumps).

Expected values come from the `log<proc>.txt` files text2log read to write the binary logs,
parsed here with a few independent regexes, never from the converter's own reader.
"""

from __future__ import annotations

import re
import tarfile
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from chakra.converters.bigsim import convert, convert_log, load_logs, read_binary_logs, read_detail_logs
from chakra.io import read_traces
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.validate import validate_traces

CASES = [f"case{i}" for i in range(10)]


@pytest.fixture(scope="session")
def examples(samples_dir: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bigsim")
    with tarfile.open(samples_dir / "bigsim" / "text2log_v6_examples.tgz") as tf:
        tf.extractall(out, filter="data")
    return out / "examples"


# --- the text2log inputs, read independently -------------------------------------------------

REC = re.compile(r"^\[(\d+)\] name:(\S+) \(srcpe:(-?\d+) msgID:(-?\d+)\) ep:(-?\d+) charm_ep:(-?\d+)")
TIMES = re.compile(r"^startTime:(\S+) endTime:(\S+)")
MSG = re.compile(r"^-msgID:(\d+) sent:(\S+) recvtime:(\S+) dstNode:(-?\d+) tid:(-?\d+) size:(\d+) group:(-?\d+)")


def text_inputs(case_dir: Path) -> dict[int, list[dict]]:
    procs: dict[int, list[dict]] = {}
    for path in case_dir.glob("log*.txt"):
        proc = int(path.stem[3:])
        recs: list[dict] = []
        for line in path.read_text().splitlines():
            if m := REC.match(line):
                recs.append(dict(name=m[2], src=int(m[3]), mid=int(m[4]), msgs=[], fwd=[]))
            elif m := TIMES.match(line):
                recs[-1].update(start=float(m[1]), end=float(m[2]))
            elif m := MSG.match(line):
                recs[-1]["msgs"].append(
                    dict(mid=int(m[1]), sent=float(m[2]), dst=int(m[4]), tid=int(m[5]), size=int(m[6]))
                )
            elif line.startswith("forward:"):
                recs[-1]["fwd"] = [int(v) for v in re.findall(r"\[(\d+)\]", line)]
        procs[proc] = recs
    return procs


def us(x: float) -> int:
    return round(x * 1e6)  # the text inputs hold whole microseconds


def seb_nodes(trace) -> dict[int, list]:
    """SEB index -> its COMP pieces in order."""
    out: dict[int, list] = defaultdict(list)
    for n in trace.nodes:
        if n.type == NodeType.COMP_NODE:
            out[get_int(n, "bigsim_seqno")].append(n)
    return out


@pytest.fixture(scope="session")
def converted(examples: Path, tmp_path_factory) -> dict[str, list]:
    out = tmp_path_factory.mktemp("bigsim_et")
    result = {}
    for case in CASES:
        (out / case).mkdir()
        assert convert([examples / case], out / case / "trace").paths
        result[case] = read_traces([str(out / case / "trace")])
    return result


# --- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_binary_and_detail_dumps_agree(examples: Path, case: str) -> None:
    d = examples / case
    binary = read_binary_logs(d)
    detail = read_detail_logs(sorted(d.glob("detail-*.log")))
    assert binary.version == 6
    assert sorted(binary.timelines) == sorted(detail.timelines) == list(range(binary.total_procs))
    for proc, sebs in binary.timelines.items():
        other = detail.timelines[proc]
        assert len(sebs) == len(other)
        for a, b in zip(sebs, other):
            assert (a.seqno, a.name, a.ep, a.charm_ep, a.src_pe, a.src_msg_id, a.back, a.fwd) == (
                b.seqno,
                b.name,
                b.ep,
                b.charm_ep,
                b.src_pe,
                b.src_msg_id,
                b.back,
                b.fwd,
            )
            # the dump prints %f: start/end/recv are exact here, execTime (end - start in binary) within 0.5 µs
            assert (a.start_time, a.end_time, a.recv_time) == (b.start_time, b.end_time, b.recv_time)
            assert abs(a.exec_time - b.exec_time) <= 5e-7
            assert [(m.msg_id, m.dst_node, m.send_time, m.recv_time, m.tid, m.size, m.group) for m in a.msgs] == [
                (m.msg_id, m.dst_node, m.send_time, m.recv_time, m.tid, m.size, m.group) for m in b.msgs
            ]


@pytest.mark.parametrize("case", CASES)
def test_detail_conversion_equals_binary_conversion(examples: Path, case: str) -> None:
    d = examples / case
    from_binary, s1 = convert_log(load_logs([d]))
    from_detail, s2 = convert_log(load_logs([d], prefer_detail=True))
    assert s2.source == "detail" and s1.source == "binary"
    assert len(from_binary) == len(from_detail)

    def key(n):
        comm = tuple(get_attr(n, a) for a in ("comm_src", "comm_dst", "comm_tag", "comm_size", "comm_type"))
        return (n.id, n.name, n.type, n.start_time_micros, n.duration_micros, tuple(n.data_deps), comm)

    for a, b in zip(from_binary, from_detail):
        assert [key(n) for n in a.nodes] == [key(n) for n in b.nodes]


@pytest.mark.parametrize("case", CASES)
def test_sebs_times_and_names_match_text_inputs(examples: Path, converted, case: str) -> None:
    text = text_inputs(examples / case)
    traces = converted[case]
    assert [t.rank for t in traces] == sorted(text)
    for trace in traces:
        recs = text[trace.rank]
        pieces = seb_nodes(trace)
        assert sorted(pieces) == list(range(len(recs)))
        for i, rec in enumerate(recs):
            ps = pieces[i]
            assert {p.name for p in ps} == {rec["name"]}
            assert ps[0].start_time_micros == us(rec["start"])
            assert sum(p.duration_micros for p in ps) == us(rec["end"]) - us(rec["start"])
            # pieces tile the SEB without gaps
            for p, q in zip(ps, ps[1:]):
                assert q.start_time_micros == p.start_time_micros + p.duration_micros
                assert list(q.data_deps) == [p.id]
            assert get_attr(ps[0], "bigsim_start_s") == rec["start"]


@pytest.mark.parametrize("case", CASES)
def test_forward_deps_become_data_deps(examples: Path, converted, case: str) -> None:
    text = text_inputs(examples / case)
    for trace in converted[case]:
        pieces = seb_nodes(trace)
        for i, rec in enumerate(text[trace.rank]):
            for j in rec["fwd"]:
                assert pieces[i][-1].id in pieces[j][0].data_deps


@pytest.mark.parametrize("case", CASES)
def test_every_message_has_send_and_recv(examples: Path, converted, case: str) -> None:
    text = text_inputs(examples / case)
    traces = {t.rank: t for t in converted[case]}
    # who received what, from the text inputs: (src, msgID) -> [(proc, SEB index)]
    receivers = defaultdict(list)
    for proc, recs in text.items():
        for i, rec in enumerate(recs):
            if rec["src"] >= 0:
                receivers[(rec["src"], rec["mid"])].append((proc, i))
    sizes = {(p, m["mid"]): m["size"] for p, recs in text.items() for r in recs for m in r["msgs"]}
    expected = Counter()
    for (src, mid), procs in receivers.items():
        for proc, _ in procs:
            expected[(src, proc, mid, sizes[(src, mid)])] += 1
    sends, recvs = Counter(), Counter()
    for rank, t in traces.items():
        for n in t.nodes:
            if n.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
                k = (get_int(n, "comm_src"), get_int(n, "comm_dst"), get_int(n, "comm_tag"), get_int(n, "comm_size"))
                (sends if n.type == NodeType.COMM_SEND_NODE else recvs)[k] += 1
                assert rank == (k[0] if n.type == NodeType.COMM_SEND_NODE else k[1])
    assert sends == recvs == expected
    # each receive feeds exactly the SEB that names its message
    for rank, t in traces.items():
        by_id = {n.id: n for n in t.nodes}
        pieces = seb_nodes(t)
        for n in t.nodes:
            if n.type != NodeType.COMM_RECV_NODE:
                continue
            fed = [m for m in t.nodes if n.id in m.data_deps and m.type == NodeType.COMP_NODE]
            assert len(fed) == 1  # (a send at the SEB's very first instant may depend on it too)
            i = get_int(fed[0], "bigsim_seqno")
            rec = text[rank][i]
            assert (rec["src"], rec["mid"]) == (get_int(n, "comm_src"), get_int(n, "comm_tag"))
            assert fed[0] is pieces[i][0] and by_id[fed[0].id] is fed[0]


@pytest.mark.parametrize("case", CASES)
def test_sends_leave_at_their_send_time(examples: Path, converted, case: str) -> None:
    text = text_inputs(examples / case)
    for trace in converted[case]:
        by_id = {n.id: n for n in trace.nodes}
        sends = [n for n in trace.nodes if n.type == NodeType.COMM_SEND_NODE]
        sent = sorted(us(m["sent"]) for rec in text[trace.rank] for m in rec["msgs"])
        assert sorted({n.start_time_micros for n in sends}) == sorted(set(sent))
        for n in sends:
            for d in n.data_deps:  # the piece it follows ends exactly at the send time
                dep = by_id[d]
                if dep.type == NodeType.COMP_NODE:
                    assert dep.start_time_micros + dep.duration_micros == n.start_time_micros


def test_broadcast_expansion_case7(converted) -> None:
    """case7 (2 workers/node): 'all except node 0 core 0', 'except node 1 core 0', 'except node 0'."""
    pairs = Counter()
    for t in converted["case7"]:
        for n in t.nodes:
            if n.type == NodeType.COMM_SEND_NODE:
                pairs[(get_int(n, "comm_src"), get_int(n, "comm_tag"))] += 0
                pairs[(get_int(n, "comm_src"), get_int(n, "comm_tag"), get_int(n, "comm_dst"))] += 1
    dests = {k[:2]: set() for k in pairs if len(k) == 3}
    for k in pairs:
        if len(k) == 3:
            dests[k[:2]].add(k[2])
    assert dests == {(0, 0): {1, 2, 3}, (1, 0): {0, 1, 3}, (1, 1): {2, 3}}


@pytest.mark.parametrize("case", CASES)
def test_validate_single_and_cross_rank(converted, case: str) -> None:
    traces = converted[case]
    for t in traces:
        assert validate_traces([t], cross_rank=False).ok
    report = validate_traces(traces)
    assert report.ok, report.to_json()
    assert report.warning_count == 0


def test_cli_convert_and_auto_detect(examples: Path, tmp_path: Path, run_cli) -> None:
    res = run_cli("convert", "bigsim", str(examples / "case8"), "-o", str(tmp_path / "c8"), "--json")
    assert res.exit_code == 0, res.stderr
    import json

    summary = json.loads(res.stdout)
    assert summary["procs"] == 6 and summary["sebs"] == 12 and summary["messages"] == 9
    assert summary["workers_per_node"] == 3 and summary["version"] == 6
    assert len(list(tmp_path.glob("c8.*.et"))) == 6
    res = run_cli("convert", "auto", str(examples / "case6"), "-o", str(tmp_path / "c6"), "-q")
    assert res.exit_code == 0, res.stderr
    assert len(list(tmp_path.glob("c6.*.et"))) == 4
    res = run_cli("validate", str(tmp_path / "c6"))
    assert res.exit_code == 0, res.stdout + res.stderr


def test_detail_only_folder_infers_workers_per_node(examples: Path, tmp_path: Path) -> None:
    """Without bgTrace, workers per node come from who received each message (case8: 3)."""
    for p in (examples / "case8").glob("detail-*.log"):
        (tmp_path / p.name).write_bytes(p.read_bytes())
    log = load_logs([tmp_path])
    assert log.source == "detail" and log.num_wth == 3 and log.total_procs == 6
    traces, summary = convert_log(log)
    assert summary.messages == 9 and summary.unmatched_receivers == 0
    assert validate_traces(traces).ok


def test_serialize_chains_sebs_in_logged_order(examples: Path) -> None:
    traces, _ = convert_log(load_logs([examples / "case2"]), serialize=True)
    pieces = seb_nodes(traces[0])
    for i in range(1, len(pieces)):
        assert list(pieces[i][0].ctrl_deps) == [pieces[i - 1][-1].id]
    assert validate_traces(traces).ok
