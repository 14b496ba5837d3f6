"""A headless Chromium for the report: a screenshot, and layout checks run inside the page.

Chromium is optional: :func:`find_chromium` returns None where it is not installed, and callers say
so. The checks are computed by a script injected into a copy of the report and read back from the
DOM that ``--dump-dom`` prints after the page has loaded (no driver library needed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["find_chromium", "screenshot", "layout_checks"]

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def find_chromium() -> str | None:
    """The Chromium executable (``ATTNLAB_CHROMIUM``, then chromium / chromium-browser / google-chrome)."""
    env = os.environ.get("ATTNLAB_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    exe = find_chromium()
    if exe is None:
        raise RuntimeError("no Chromium found (install the chromium package or set ATTNLAB_CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="attnlab-chromium-") as profile:
        try:
            return subprocess.run(
                [exe, *_FLAGS, f"--user-data-dir={profile}", *args],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"Chromium did not finish within {timeout:.0f} s") from e


def screenshot(html: Path, png: Path, width: int = 1400, height: int = 1800, timeout: float = 120) -> Path:
    """Render ``html`` at ``width`` × ``height`` pixels into ``png``."""
    res = _run(
        [f"--screenshot={png}", f"--window-size={width},{height}", Path(html).resolve().as_uri()], timeout
    )
    if not png.exists():
        raise RuntimeError(
            f"Chromium wrote no screenshot (exit {res.returncode}): {res.stderr.strip()[-200:]}"
        )
    return png


_CHECK_JS = r"""
<script>
window.addEventListener('load', function () {
  var W = document.documentElement.clientWidth;
  var imgs = Array.from(document.images);
  var broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                   .map(function (i) { return i.alt; });
  var over = [];
  document.querySelectorAll('body *').forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > W + 1) {
      over.push(el.tagName + (el.id ? '#' + el.id : '') + ' right=' + Math.round(r.right));
    }
  });
  // words of the verdict board (and any table marked data-whole-words) laid out on more than one line
  var midword = [];
  document.querySelectorAll('table.board td, table.board th, [data-whole-words] td').forEach(function (cell) {
    var walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    var node;
    while ((node = walk.nextNode())) {
      var re = /\S+/g, m;
      while ((m = re.exec(node.data))) {
        var range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        var tops = {};
        Array.from(range.getClientRects()).forEach(function (r) {
          if (r.width > 0) { tops[Math.round(r.top)] = true; }
        });
        if (Object.keys(tops).length > 1) { midword.push(m[0]); }
      }
    }
  });
  var sections = Array.from(document.querySelectorAll('section.claim'))
                     .map(function (s) { return s.id; });
  var out = {width: W, images: imgs.length, broken: broken, overflow: over.slice(0, 20),
             overflow_count: over.length, sections: sections, midword: midword.slice(0, 20),
             scroll_width: document.documentElement.scrollWidth};
  var pre = document.createElement('pre'); pre.id = 'attnlab-checks'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def layout_checks(html: Path, width: int = 1400, timeout: float = 120) -> dict[str, Any]:
    """Load ``html`` in headless Chromium at ``width`` px and report what a reader would notice.

    Returns ``images`` (count), ``broken`` (alt texts of images that did not load), ``overflow``
    (elements reaching past the viewport's right edge), ``sections`` (ids of the claim sections),
    ``midword`` (words of the verdict board, or of a table marked ``data-whole-words``, that the layout
    broke across lines: "theore/m").
    """
    text = Path(html).read_text(encoding="utf-8").replace("</body>", _CHECK_JS + "</body>")
    with tempfile.TemporaryDirectory(prefix="attnlab-check-") as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(text, encoding="utf-8")
        res = _run(
            [f"--window-size={width},1000", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
            timeout,
        )
    start = res.stdout.find('<pre id="attnlab-checks">')
    if start < 0:
        raise RuntimeError(
            f"the checks did not run in Chromium (exit {res.returncode}): {res.stderr.strip()[-300:]}"
        )
    body = res.stdout[start + len('<pre id="attnlab-checks">') :]
    import html as _html

    return json.loads(_html.unescape(body[: body.index("</pre>")]))
