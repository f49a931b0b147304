"""Self-contained interactive HTML reports (plotly, with plotly.js embedded: works offline).

`html` assembles a page from sections of figures and tables; `figures` builds the figures for
sweep results, `chakra analyze` and `chakra whatif` reports.
"""
