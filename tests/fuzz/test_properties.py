"""Property-based tests (hypothesis): the .et/JSON round trip, the feeder, and total readers.

The traces are built by hypothesis from the protobuf schema's own value ranges (every attribute
arm, 64-bit ids, unknown node types): no sample file can cover that space.
"""

from __future__ import annotations

import contextlib
import math

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chakra.errors import ChakraError
from chakra.feeder import ETFeeder
from chakra.io import read_json_trace, read_trace, write_json_trace, write_trace
from chakra.jsonform import document_to_trace
from chakra.schema import pb
from chakra.trace import Trace

U64 = st.integers(0, (1 << 64) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
I32 = st.integers(-(1 << 31), (1 << 31) - 1)
U32 = st.integers(0, (1 << 32) - 1)
# JSON spells every NaN "NaN": the sign and payload bits of other NaNs cannot survive the trip
F64 = st.floats(allow_nan=False) | st.just(math.nan)
F32 = st.floats(width=32, allow_nan=False) | st.just(math.nan)
TEXT = st.text(max_size=20)
BYTES = st.binary(max_size=20)

ARMS = {
    "double": F64,
    "float": F32,
    "int32": I32,
    "int64": I64,
    "uint32": U32,
    "uint64": U64,
    "sint32": I32,
    "sint64": I64,
    "fixed32": U32,
    "fixed64": U64,
    "sfixed32": I32,
    "sfixed64": I64,
    "bool": st.booleans(),
    "string": TEXT,
    "bytes": BYTES,
}


@st.composite
def attributes(draw) -> pb.AttributeProto:
    arm = draw(st.sampled_from(sorted(ARMS)))
    attr = pb.AttributeProto(name=draw(TEXT))
    if draw(st.booleans()):
        setattr(attr, f"{arm}_val", draw(ARMS[arm]))
    else:
        lst = getattr(attr, f"{arm}_list")
        lst.SetInParent()
        lst.values.extend(draw(st.lists(ARMS[arm], max_size=4)))
    return attr


@st.composite
def traces(draw) -> Trace:
    ids = draw(st.lists(U64, min_size=0, max_size=12, unique=True))
    nodes = []
    for i in ids:
        node = pb.Node(
            id=i,
            name=draw(TEXT),
            type=draw(st.integers(0, 12)),
            data_deps=draw(st.lists(U64, max_size=3)),
            ctrl_deps=draw(st.lists(U64, max_size=3)),
            start_time_micros=draw(U64),
            duration_micros=draw(U64),
        )
        if draw(st.booleans()):
            node.inputs.values = draw(TEXT)
        node.attr.extend(draw(st.lists(attributes(), max_size=3)))
        nodes.append(node)
    md = pb.GlobalMetadata(version=draw(TEXT))
    md.attr.extend(draw(st.lists(attributes(), max_size=2)))
    return Trace(metadata=md, nodes=nodes, rank=draw(st.integers(0, 64)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=traces())
def test_et_json_et_round_trip_is_byte_identical(tmp_path, trace):
    r = trace.rank  # .et files carry the rank in their name only
    et1, js, et2 = tmp_path / f"a.{r}.et", tmp_path / f"a.{r}.json", tmp_path / f"b.{r}.et"
    write_trace(et1, trace)
    write_json_trace(js, read_trace(et1))
    back = read_json_trace(js)
    write_trace(et2, back)
    assert et2.read_bytes() == et1.read_bytes()
    assert back.rank == trace.rank


@st.composite
def dags(draw) -> tuple[Trace, dict[int, set[int]]]:
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))
    ids = [sum(gaps[: i + 1]) for i in range(n)]
    parents: dict[int, set[int]] = {}
    nodes = []
    for k, i in enumerate(ids):
        deps = sorted(set(draw(st.lists(st.sampled_from(ids[:k]), max_size=3)))) if k else []
        ctrl = sorted(set(draw(st.lists(st.sampled_from(ids[:k]), max_size=2)))) if k else []
        parents[i] = set(deps) | set(ctrl)
        nodes.append(pb.Node(id=i, name=f"n{i}", type=4, data_deps=deps, ctrl_deps=ctrl))
    order = draw(st.permutations(range(n)))  # file order need not be id order
    return Trace(nodes=[nodes[j] for j in order], rank=0), parents


@settings(max_examples=100, deadline=None)
@given(case=dags())
def test_feeder_issues_every_node_once_after_its_parents(case):
    trace, parents = case
    feeder = ETFeeder(trace)
    done: set[int] = set()
    issued = []
    while True:
        node = feeder.get_next_issuable_node()
        if node is None:
            break
        assert parents[node.id] <= done, (node.id, parents[node.id] - done)
        issued.append(node.id)
        done.add(node.id)
        feeder.free_children_nodes(node.id)
    assert sorted(issued) == sorted(parents)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300))
def test_reading_arbitrary_bytes_only_raises_chakra_errors(tmp_path, data):
    path = tmp_path / "x.0.et"
    path.write_bytes(data)
    with contextlib.suppress(ChakraError):
        read_trace(path)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
NODE_KEYS = ["id", "name", "type", "data_deps", "ctrl_deps", "duration_micros", "attr", "inputs", "_unknown"]
OFFICIAL_KEYS = ["Id", "Name", "NodeType", "data_deps", "ctrlDeps", "runtime", "is_cpu_op", "comm_size"]


@settings(max_examples=200, deadline=None)
@given(
    form=st.sampled_from(["ours", "official"]),
    items=st.lists(st.dictionaries(st.sampled_from(NODE_KEYS + OFFICIAL_KEYS), JSON_VALUES, max_size=6), max_size=4),
    metadata=JSON_VALUES,
)
def test_json_documents_of_any_shape_only_raise_chakra_errors(form, items, metadata):
    if form == "ours":
        doc = {"format": "chakra-et-json/1", "rank": 0, "metadata": metadata, "nodes": items}
    else:
        doc = {"workload_graph": items}
    doc = orjson.loads(orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)) if _finite(doc) else doc
    with contextlib.suppress(ChakraError):
        document_to_trace(doc, "doc.json")


def _finite(obj) -> bool:
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, int) and not isinstance(obj, bool):
        return -(1 << 63) <= obj < (1 << 64)
    if isinstance(obj, list):
        return all(map(_finite, obj))
    if isinstance(obj, dict):
        return all(map(_finite, obj.values()))
    return True
