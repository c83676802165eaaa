"""Campaign 4, Markdown (docs/reliability.md): hostile names in `report`, `stress` and `track` pages.

A newline in a target, folder or corpus name became a ``#`` heading, and `track --baseline -f
markdown` wrote its "baseline ...; candidate ..." line unescaped (a folder named ``<b>c<b>`` was raw
HTML): only ``<`` and ``*`` were escaped. Every name that reaches Markdown now goes through one
function (:func:`geoanalyze.results.md_text`: newlines, ``#``, backticks that would open a span
reaching past the name, HTML, ANSI escapes, links, entities; a table cell's ``|`` through
:func:`geoanalyze.io.markdown_cell`); code spans and link targets through its two neighbours. Each page is rendered by
a GFM parser (markdown-it-py's gfm-like preset) and read back as a browser shows it.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import linked_copy
from markdown_it import MarkdownIt

from geoanalyze.io import markdown_cell
from geoanalyze.results import link_target, md_text

from .harness import Sandbox

GFM = MarkdownIt("gfm-like", {"linkify": False}).disable("linkify")

#: names as a file system holds them: a heading after a newline, HTML, a table cell's end, a code
#: span, an ANSI colour, a link, an entity, a bidirectional override
HOSTILE = {
    "newline": "a\n# heading",
    "html": "<b>c<b>",
    "pipe": "x|y",
    "backtick": "it`s",
    "ansi": "\x1b[31mred",
    "link": "[x](http://e)",
    "entity": "&lt;i&gt;",
    "bidi": "a\u202eb",
}
QUICK = ["--null-draws", "2", "--compare", "", "-t", "whitespace", "--limit", "60", "--min-count", "5"]


class Page(HTMLParser):
    """What a browser makes of rendered Markdown: the tags, the headings' texts, the shown text."""

    def __init__(self, markdown: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.headings: list[str] = []
        self.text: list[str] = []
        self._in_heading = False
        self.feed(GFM.render(markdown))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if re.fullmatch(r"h[1-6]", tag):
            self._in_heading = True
            self.headings.append("")

    def handle_endtag(self, tag: str) -> None:
        if re.fullmatch(r"h[1-6]", tag):
            self._in_heading = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_heading:
            self.headings[-1] += data

    @property
    def shown(self) -> str:
        return " ".join("".join(self.text).split())


def shown(name: str) -> str:
    """How a page shows a name: on one line, its controls as escapes."""
    return name.replace("\n", " ").replace("\x1b", "\\x1b").replace("\u202e", "\\u202e")


def check_page(markdown: str, name: str) -> Page:
    """No heading, tag or escape of the name's making, and the name shown whole on one line."""
    page = Page(markdown)
    assert not [h for h in page.headings if h.startswith("heading")], page.headings
    assert not {"b", "i", "a"} & set(page.tags), page.tags
    assert "\x1b" not in markdown and "\u202e" not in markdown
    assert " ".join(shown(name).split()) in page.shown, (shown(name), page.shown)
    return page


@pytest.mark.parametrize("name", HOSTILE.values(), ids=HOSTILE.keys())
def test_md_text_shows_every_hostile_name_literally_on_one_line(name: str) -> None:
    from geoanalyze.results import md_code

    once = md_text(name)
    assert md_text(once) == once and "\n" not in once
    cell = markdown_cell(name, md_text)  # a table cell, as every table writes one
    page = Page(f"## {once}\n\n| a |\n|---|\n| {cell} |\n")
    assert page.tags.count("td") == 1 and len(page.headings) == 1
    assert not {"b", "a", "code", "i"} & set(page.tags)
    assert page.headings[0] == shown(name)
    assert [t.strip() for t in Page(f"| a |\n|---|\n| {cell} |\n").text if t.strip()] == ["a", shown(name).strip()]
    assert "".join(Page(md_code(name)).text).strip("\n") == shown(name)
    assert "\n" not in link_target(name) and "<b>" not in link_target(name)


@pytest.mark.parametrize("key", ["newline", "html", "backtick", "ansi"])
def test_a_hostile_corpus_name_in_stress_markdown_stays_text(sandbox: Sandbox, key: str) -> None:
    name = HOSTILE[key] + ".txt"
    sandbox.copy_sample("drift-words.txt", name)
    run = sandbox.accepted("stress", "rope:d=16", "--dataset", name, *QUICK, "-f", "markdown")
    assert len(check_page(run.stdout, name).headings) == 1


@pytest.mark.parametrize("key", ["newline", "html", "pipe", "ansi"])
def test_a_hostile_corpus_name_in_a_report_page_stays_text(sandbox: Sandbox, key: str) -> None:
    name = HOSTILE[key] + ".txt"
    sandbox.copy_sample("drift-words.txt", name)
    sandbox.accepted("report", "rope:d=16", "--dataset", name, *QUICK, "-o", "page.md")
    markdown = sandbox.path("page.md").read_text(encoding="utf-8")
    title = check_page(markdown, name).headings[0]
    assert title == f"Positional geometry report: {shown(name)}"


@pytest.mark.slow  # two members of the real MiniLM per run
@pytest.mark.parametrize("key", ["newline", "html", "ansi"])
def test_hostile_names_in_track_markdown_stay_text(sandbox: Sandbox, minilm_path: Path, key: str) -> None:
    corpus = HOSTILE[key] + ".txt"
    sandbox.copy_sample("drift-words.txt", corpus)
    base, candidate = (
        linked_copy(minilm_path, sandbox.path("base")),
        linked_copy(minilm_path, sandbox.path(HOSTILE[key])),
    )
    args = ["--dataset", corpus, "--layers", "none", "--null-draws", "2", "--limit", "60", "--min-count", "5"]
    run = sandbox.accepted("track", "--baseline", base, candidate, *args, "-f", "markdown")
    page = check_page(run.stdout, HOSTILE[key])
    assert page.headings == [f"Geometry over training: 2 checkpoints on {shown(corpus)}", "Against the baseline"]
    assert re.search(rf"baseline \S*base; candidate \S*{re.escape(shown(HOSTILE[key]))} ", page.shown), page.shown
