"""Reading Kineto traces (the PyTorch profiler's Chrome-trace JSON): `trace`.

A leaf the PyTorch converter uses: it links these events to Execution Traces, and converts them
alone for `chakra convert kineto` (that plugin is `chakra.converters.pytorch.kineto_alone`).
"""
