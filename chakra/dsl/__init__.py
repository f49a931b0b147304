"""Generator DSL, built-in parallel workloads and synthesis of traces from real ones.

from chakra.dsl import Workload, Device
w = Workload(ranks=2, device=Device(tflops=100, mem_bw=2000))
a = w.compute(0, "matmul", flops=1e12, bytes=1e9)
p = w.send(0, 1, 1 << 20, after=a)
w.compute(1, "consume", flops=1e9, bytes=1e6, after=p)
w.save("out/pair")
"""

from chakra.dsl.device import Device
from chakra.dsl.workload import P2P, DSLError, ProcessGroup, Ref, Workload, collective_type

__all__ = ["Device", "DSLError", "P2P", "ProcessGroup", "Ref", "Workload", "collective_type"]
