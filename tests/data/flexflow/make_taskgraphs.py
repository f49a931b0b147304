"""Writes the hand-built FlexFlow task graphs in this folder (run: python make_taskgraphs.py).

No public FlexFlow `--taskgraph` output exists (docs/input-formats.md §E.3), so these files are built
to the writer's format exactly as FlexFlow's source defines it (flexflow/FlexFlow
`Simulator::simulate_runtime` with `DotFile<SimTask*>` and `RecordFormatter`):

* the file opens with `digraph taskgraph {`;
* tasks are written in simulated order; each task's line is
  `  nodeN [label="{ NAME | TYPE | { START | END } }",shape=record];` (attributes sorted by key,
  NAME and its ` | ` left out when the task has no name), followed at once by one
  `  nodeN -> nodeM;` line per successor;
* node numbers are handed out at first sight (a task line or an edge), so an edge can name a
  node whose line comes later;
* START/END are simulated ms printed with C++'s default float format (`%g`, 6 digits);
* transfers are Comm tasks named `seg J from SRC to DST` (one per segment per network hop);
  weight synchronisation adds unnamed Barrier (per device) and Update tasks;
* the file ends with `}` and no newline.

The tasks below describe small but complete FlexFlow training steps; the device of each task
(not in the file) is noted in comments, and the tests pass it back through --placement.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def write_taskgraph(path: Path, tasks: list[tuple[str, str, str, float, float, list[str]]]) -> None:
    """tasks: (key, name, type, start_ms, end_ms, successor keys), in simulated order."""
    numbers: dict[str, int] = {}

    def number(key: str) -> int:
        if key not in numbers:
            numbers[key] = len(numbers)
        return numbers[key]

    out = ["digraph taskgraph {\n"]
    for key, name, ttype, start, end, succs in tasks:
        label = "{ " + (f"{name} | " if name else "") + f"{ttype} | " + "{ " + f"{start:g} | {end:g}" + " }" + " }"
        out.append(f'  node{number(key)} [label="{label}",shape=record];\n')
        for s in succs:
            out.append(f"  node{number(key)} -> node{number(s)};\n")
    out.append("}")
    path.write_text("".join(out))


# 2-way data parallelism (conv1, fc1 on GPUs 0 and 1), bulk-synchronous weight update:
# per-GPU barrier after the backward pass, one Update task per weight on GPU 0 fed by the
# gradient from GPU 1 (2 segments over one link), the new weights sent back to GPU 1's final
# barrier. Devices: *.0 tasks on GPU 0, *.1 on GPU 1, updates on GPU 0, final1 on GPU 1,
# final0 on GPU 0 (isolated: nothing returns to GPU 0).
DATA_PARALLEL = [
    ("f_conv1.0", "conv1", "Forward", 0.0, 0.5, ["f_fc1.0", "b_conv1.0"]),
    ("f_conv1.1", "conv1", "Forward", 0.0, 0.5, ["f_fc1.1", "b_conv1.1"]),
    ("final0", "", "Barrier", 0.0, 0.0, []),
    ("f_fc1.0", "fc1", "Forward", 0.5, 0.8, ["b_fc1.0"]),
    ("f_fc1.1", "fc1", "Forward", 0.5, 0.8, ["b_fc1.1"]),
    ("b_fc1.0", "fc1", "Backward", 0.8, 1.4, ["b_conv1.0", "barrier0"]),
    ("b_fc1.1", "fc1", "Backward", 0.8, 1.4, ["b_conv1.1", "barrier1"]),
    ("b_conv1.0", "conv1", "Backward", 1.4, 2.4, ["barrier0"]),
    ("b_conv1.1", "conv1", "Backward", 1.4, 2.4, ["barrier1"]),
    ("barrier0", "", "Barrier", 2.4, 2.4, ["upd_conv1", "upd_fc1"]),
    ("barrier1", "", "Barrier", 2.4, 2.4, ["x_conv1.s0", "x_conv1.s1", "x_fc1.s0"]),
    ("x_conv1.s0", "seg 0 from  to ", "Comm", 2.4, 2.65, ["upd_conv1"]),
    ("x_conv1.s1", "seg 1 from  to ", "Comm", 2.65, 2.9, ["upd_conv1"]),
    ("x_fc1.s0", "seg 0 from  to ", "Comm", 2.9, 3.0125, ["upd_fc1"]),
    ("upd_conv1", "", "Update", 2.9, 2.9, ["r_conv1.s0", "r_conv1.s1"]),
    ("r_conv1.s0", "seg 0 from  to ", "Comm", 2.9, 3.15, ["final1"]),
    ("upd_fc1", "", "Update", 3.0125, 3.0125, ["r_fc1.s0"]),
    ("r_conv1.s1", "seg 1 from  to ", "Comm", 3.15, 3.4, ["final1"]),
    ("r_fc1.s0", "seg 0 from  to ", "Comm", 3.4, 3.5125, ["final1"]),
    ("final1", "", "Barrier", 3.5125, 3.5125, []),
]

# Model (pipeline) parallelism: conv1 on GPU 0, fc1 on GPU 1 in another node. The activation
# crosses two hops (GPU0->NIC, NIC->GPU1) in two segments, with FlexFlow's NIC ordering edge from
# segment 0's second hop to segment 1's first; the gradient comes back in one segment, one hop.
MODEL_PARALLEL = [
    ("f_conv1", "conv1", "Forward", 0.0, 1.25, ["a.s0.h0", "a.s1.h0", "b_conv1"]),
    ("a.s0.h0", "seg 0 from conv1 to fc1", "Comm", 1.25, 1.5, ["a.s0.h1"]),
    ("a.s0.h1", "seg 0 from conv1 to fc1", "Comm", 1.5, 1.75, ["f_fc1", "a.s1.h0"]),
    ("a.s1.h0", "seg 1 from conv1 to fc1", "Comm", 1.75, 2.0, ["a.s1.h1"]),
    ("a.s1.h1", "seg 1 from conv1 to fc1", "Comm", 2.0, 2.25, ["f_fc1"]),
    ("f_fc1", "fc1", "Forward", 2.25, 2.75, ["b_fc1"]),
    ("b_fc1", "fc1", "Backward", 2.75, 3.75, ["g.s0"]),
    ("g.s0", "seg 0 from fc1 to conv1", "Comm", 3.75, 4.0, ["b_conv1"]),
    ("b_conv1", "conv1", "Backward", 4.0, 6.25, []),
]


def write_legacy(path: Path) -> None:
    """The `npu=` labelled variant the deprecated Chakra converter read (docs/input-formats.md §E.2).

    Fields: npu | name | (unused) | COMP_NODE | wall_clock_time=<s>, or
    npu | name | (unused) | COMM_SEND_RECV_NODE | comm_src= | comm_dst= | comm_size=<bytes>.
    No producer of this variant is public; its layout is inferred from that converter.
    """
    nodes = [
        ("n0", "{npu=0 | conv1_fwd | 0 | COMP_NODE | wall_clock_time=0.00125}"),
        ("n1", "{npu=0 | act_conv1_fc1 | 1 | COMM_SEND_RECV_NODE | comm_src=0 | comm_dst=1 | comm_size=65536}"),
        ("n2", "{npu=1 | fc1_fwd | 2 | COMP_NODE | wall_clock_time=0.0005}"),
        ("n3", "{npu=1 | fc1_bwd | 3 | COMP_NODE | wall_clock_time=0.001}"),
        ("n4", "{npu=1 | grad_fc1_conv1 | 4 | COMM_SEND_RECV_NODE | comm_src=1 | comm_dst=0 | comm_size=65536}"),
        ("n5", "{npu=0 | conv1_bwd | 5 | COMP_NODE | wall_clock_time=0.00225}"),
        ("n6", "{npu=1 | fc1_upd | 6 | COMP_NODE | wall_clock_time=0.0001}"),
    ]
    edges = [("n0", "n1"), ("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n5"), ("n0", "n5"), ("n3", "n6")]
    out = ["digraph G {\n"]
    for key, label in nodes:
        out.append(f'  {key} [shape=record, label="{label}"];\n')
    for a, b in edges:
        out.append(f"  {a} -> {b};\n")
    out.append("}\n")
    path.write_text("".join(out))


if __name__ == "__main__":
    write_taskgraph(HERE / "dp2_taskgraph.dot", DATA_PARALLEL)
    write_taskgraph(HERE / "mp2_taskgraph.dot", MODEL_PARALLEL)
    write_legacy(HERE / "legacy_npu.dot")
