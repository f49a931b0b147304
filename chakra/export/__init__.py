"""Writers of traces for other tools: `astrasim` makes a trace the real ASTRA-sim 2.x runs to the end."""
