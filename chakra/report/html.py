"""One self-contained HTML page of plotly figures: plotly.js is embedded once, no network needed.

The page records script errors in `#chakra-js-errors` and, once every plot has drawn, sets
`data-plots-rendered` on <body> to the number of plots: what a browser test (or a person
wondering why a plot is blank) looks at.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from chakra.errors import ChakraError
from chakra.io import atomic_output

_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<script>
window.chakraErrors = [];
window.addEventListener("error", function (e) {{
  window.chakraErrors.push(String(e.message || e));
  var box = document.getElementById("chakra-js-errors");
  if (box) {{ box.textContent = window.chakraErrors.join("\\n"); box.hidden = false; }}
}});
</script>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }}
h1 {{ font-size: 1.5em; }} h2 {{ font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }}
p.note {{ color: #555; }} table {{ border-collapse: collapse; font-size: 0.9em; }}
td, th {{ border: 1px solid #ddd; padding: 0.2em 0.6em; text-align: right; }}
th {{ background: #f4f4f4; }} #chakra-js-errors {{ color: #b00; white-space: pre; }}
</style></head>
<body>
<pre id="chakra-js-errors" hidden></pre>
<h1>{title}</h1>
<p class="note">{subtitle}</p>
"""

_TAIL = """<script>
(function () {{
  var expected = {count};
  function check(tries) {{
    var drawn = document.querySelectorAll(".js-plotly-plot .main-svg").length > 0
      ? document.querySelectorAll(".js-plotly-plot").length : 0;
    if (drawn >= expected || tries <= 0) {{ document.body.setAttribute("data-plots-rendered", String(drawn)); return; }}
    setTimeout(function () {{ check(tries - 1); }}, 50);
  }}
  check(200);
}})();
</script>
</body></html>
"""


@dataclass
class Section:
    title: str
    note: str = ""
    figures: list[Any] = field(default_factory=list)
    table: Optional[tuple[list[str], list[list[Any]]]] = None  # (header, rows)


def plotly() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise ChakraError("HTML reports need plotly: pip install 'chakra-et[dist]'") from None
    return go


def _table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["<table><tr>", *(f"<th>{html.escape(str(h))}</th>" for h in header), "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return "" if v is None else str(v)


def write_html(path: Path, title: str, sections: list[Section], subtitle: str = "") -> Path:
    """Write the page atomically; plotly.js goes in with the first figure only."""
    parts = [_HEAD.format(title=html.escape(title), subtitle=html.escape(subtitle))]
    count = 0
    for sec in sections:
        parts.append(f"<h2>{html.escape(sec.title)}</h2>")
        if sec.note:
            parts.append(f'<p class="note">{html.escape(sec.note)}</p>')
        for fig in sec.figures:
            parts.append(
                fig.to_html(
                    full_html=False,
                    include_plotlyjs=count == 0,
                    div_id=f"chakra-plot-{count}",
                    config={"displaylogo": False, "responsive": True},
                )
            )
            count += 1
        if sec.table is not None:
            parts.append(_table(*sec.table))
    parts.append(_TAIL.format(count=count))
    with atomic_output(path, "w") as f:
        f.write("\n".join(parts))
    return Path(path)
