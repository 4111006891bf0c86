"""What the run page must show, checked by parsing its HTML: every stage item links to evidence that exists on the
page, and every case has its picture. Shared by the toy-track tests (test_viewer.py) and the every-demo test
(test_runpage_demos.py)."""

from __future__ import annotations

import base64
import html.parser
import io
import json
from pathlib import Path

from automedbench.pictures import MAX_CASE_BYTES, MAX_RUN_BYTES, THUMB


class RunPage(html.parser.HTMLParser):
    """The page's ids, each stage item's evidence links, each case figure's images and texts."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.item_links: dict[str, list[str]] = {}
        self.figures: dict[str, dict[str, list[str]]] = {}
        self._row: str | None = None
        self._in_ev = False
        self._figure: str | None = None
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "tr":
            self._row = attrs["id"][len("item-"):] if str(attrs.get("id", "")).startswith("item-") else None
            if self._row:
                self.item_links[self._row] = []
        if tag == "td" and self._row and "ev" in str(attrs.get("class", "")).split():
            self._in_ev = True
        if tag == "a" and self._in_ev and self._row:
            self.item_links[self._row].append(attrs.get("href", ""))
        if tag == "figure" and str(attrs.get("id", "")).startswith("picture-"):
            self._figure = attrs["id"]
            self.figures[self._figure] = {"img": [], "texts": []}
        if self._figure and tag == "img":
            self.figures[self._figure]["img"].append(attrs.get("src", ""))
        if self._figure and tag == "div" and attrs.get("class") == "texts":
            self.figures[self._figure]["texts"].append("texts")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_ev = False
        if tag == "tr":
            self._row = None
        if tag == "figure":
            self._figure = None


def parse_page(page: Path) -> RunPage:
    parsed = RunPage()
    parsed.feed(page.read_text())
    return parsed


def png_of(src: str) -> bytes:
    assert src.startswith("data:image/png;base64,"), src[:60]
    return base64.b64decode(src.split(",", 1)[1])


def check_run_page(run_dir: Path, images: bool = True) -> RunPage:
    """Every stage item of the run has an evidence link naming an element of the page; every case of the
    evaluation has a picture (an image, within the size budget, where `images`; else its texts)."""
    from PIL import Image

    result = json.loads((run_dir / "result.json").read_text())
    page = parse_page(run_dir / "view.html")
    for stage in result["stages"]:
        for item in stage["items"]:
            links = page.item_links.get(item["id"])
            assert links is not None, f"{item['id']}: no row on the page"
            resolved = [h for h in links if h.startswith("#") and h[1:] in page.ids]
            why = f"{item['id']} ({item['value']}, {item['rationale'][:80]})"
            assert resolved, f"{why}: no evidence link resolves ({links})"
    cases = [c["case_id"] for c in json.loads((run_dir / "evaluation.json").read_text())["cases"]]
    assert len(page.figures) == len(cases), f"{len(page.figures)} case pictures for {len(cases)} cases"
    for index, case in enumerate(cases):
        figure = page.figures[f"picture-{index}"]
        if images:
            assert figure["img"], f"case {case}: no image"
            for src in figure["img"]:
                data = png_of(src)
                assert len(data) <= MAX_CASE_BYTES
                with Image.open(io.BytesIO(data)) as image:
                    assert image.format == "PNG" and image.height <= THUMB + 32
        else:
            assert figure["img"] or figure["texts"], f"case {case}: neither an image nor texts"
    pictures = run_dir / "pictures"
    assert sum(p.stat().st_size for p in pictures.iterdir()) <= MAX_RUN_BYTES + (4 << 20)
    return page
