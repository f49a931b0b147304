"""What-if: rewrite traces to ask "what if" (recipes over transform primitives) and fit duration
models to measured samples (interpolation). Everything here reads and writes Chakra traces and may
run the simulator; the simulator itself knows nothing of it (docs/whatif.md)."""
