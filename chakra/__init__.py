"""chakra: a toolchain for MLCommons Chakra execution traces.

Quick use::

    from chakra.io import read_trace, write_trace
    from chakra.schema import NodeType
    trace = read_trace("run.0.et")
    comms = [n for n in trace.nodes if n.type == NodeType.COMM_COLL_NODE]
"""

from chakra.errors import ChakraError, ConfigError, InputError, TraceFormatError

__version__ = "0.1.0"

__all__ = ["ChakraError", "ConfigError", "InputError", "TraceFormatError", "__version__"]
