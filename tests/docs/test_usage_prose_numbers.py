"""Every number in the prose of docs/usage.md is tied to a regenerated block, so regenerating the
blocks (``python tests/docs/regenerate_usage.py``) and not the prose fails here.

A decimal number or a percentage outside the fenced blocks must be shown by the regenerated block
just above it or just below it (printed, or typed in its commands), exactly or rounded (a rounding
keeps at least two significant digits: 0.895 from 0.8951; a percentage is the fraction times 100:
89.5% from 0.8951), or exactly as written by another block of one of those two blocks' sessions.
The constants of a definition (chance, a test's level, the paper's figures) are in
:data:`ALLOWED`, each with its reason, matched by the phrase around it. A measured time is never restated in the prose: times differ between runs, so
the prose points at the block's own timing line or at the benchmark that measures it. The page is
read, not run: cheap enough for the default job.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from decimal import Decimal

from usage_blocks import PAGE, TIME, Block, blocks

from geoanalyze.geometry.null import ALPHA
from geoanalyze.results import NOISE_WARNING

#: a decimal number or a percentage in the prose (``0.895``, ``89.5%``, ``5%``, ``2.9x``, ``+0.0086``)
PROSE_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?%|\d+\.\d+)(?![\d.]\d)")
#: any number a block shows, integers and percentages too (a prose 2.0 may be a printed 2)
BLOCK_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?%?")

#: phrase of the prose (whitespace collapsed) -> why its number is not a block's: the constants of a
#: definition and figures quoted from elsewhere. Each phrase holds its number and must occur in the page.
ALLOWED = {
    "(0.5 = random)": "the chance level of a violation score (definition, docs/scores.md)",
    "chance 0.5": "the chance level of the lag violation (definition, docs/scores.md)",
    "fraction above 0.5": f"the noise warning's threshold, geoanalyze.results.NOISE_WARNING = {NOISE_WARNING}",
    "adds 95% basic-bootstrap intervals": "the --bootstrap intervals' level (definition, analysis.bootstrap)",
    "0.563 for ALiBi": "the paper's reported figure (docs/claims.md compares it with ours)",
    "the 0.43 quoted in the project's design notes": "a figure quoted from the design notes, beside ours",
}


@dataclass(frozen=True)
class ProseNumber:
    line: int  # 1-based line of the page
    text: str  # as written: 0.895, 89.5%, 2.9
    context: str  # the paragraph it sits in, whitespace collapsed
    at: int  # its offset in context
    near: tuple[Block, ...]  # the regenerated blocks just above and just below


def prose_paragraphs(lines: list[str]) -> list[list[tuple[int, str]]]:
    """Runs of non-blank lines outside every fenced block (``` fences, marked or not), with their indices."""
    paragraphs: list[list[tuple[int, str]]] = [[]]
    inside = False
    for index, line in enumerate(lines):
        if line.startswith("```"):
            inside = not inside
            paragraphs.append([])
        elif inside or not line.strip() or line.startswith("<!--"):
            paragraphs.append([])
        else:
            paragraphs[-1].append((index, line))
    return [paragraph for paragraph in paragraphs if paragraph]


def neighbours(found: list[Block], index: int) -> tuple[Block, ...]:
    """The regenerated blocks just above and just below page line ``index`` (0-based)."""
    above = [block for block in found if block.end < index][-1:]
    below = [block for block in found if block.start > index][:1]
    return tuple(above + below)


def prose_numbers(text: str) -> list[ProseNumber]:
    """Every decimal number and percentage of the page's prose, in order."""
    lines = text.split("\n")
    found = blocks(text)
    numbers = []
    for paragraph in prose_paragraphs(lines):
        context, starts = "", []
        for _index, line in paragraph:
            starts.append(len(context))
            context += " ".join(line.split()) + " "
        for match in PROSE_NUMBER.finditer(context):
            index = paragraph[bisect.bisect_right(starts, match.start()) - 1][0]
            numbers.append(ProseNumber(index + 1, match[1], context, match.start(), neighbours(found, index)))
    return numbers


def block_numbers(members: list[Block] | tuple[Block, ...]) -> set[str]:
    """Every number some blocks show: their outputs and what their commands and files type."""
    return {
        number
        for block in members
        for part in (*block.commands, *block.outputs)
        for number in BLOCK_NUMBER.findall(part)
    }


def figures(found: list[Block]) -> tuple[dict[int, set[str]], dict[str, set[str]]]:
    """The numbers each block shows (by its start line) and each session's."""
    shown = {block.start: block_numbers([block]) for block in found}
    by_session: dict[str, set[str]] = {}
    for block in found:
        by_session.setdefault(block.session, set()).update(shown[block.start])
    return shown, by_session


def traced(number: ProseNumber, shown: dict[int, set[str]], by_session: dict[str, set[str]]) -> bool:
    """Whether a neighbouring block shows ``number`` (exactly or rounded), or its session exactly
    (``shown``: each block's numbers by its start line; ``by_session``: each session's)."""
    if any(matches(number.text, figure) for block in number.near for figure in shown[block.start]):
        return True
    return any(number.text in by_session[block.session] for block in number.near)


def significant_digits(text: str) -> int:
    """How many significant digits a written number keeps (0.029: 2; 0.5: 1; 12.0: 3)."""
    return len(text.replace(".", "").lstrip("0"))


def matches(prose: str, shown: str) -> bool:
    """Whether prose figure ``prose`` is ``shown`` as printed, or ``shown`` rounded to the digits ``prose``
    keeps (two significant digits at least; a percentage is a fraction times 100)."""
    if prose == shown:
        return True
    digits = prose.removesuffix("%")
    if significant_digits(digits) < 2:
        return False
    value = Decimal(digits).scaleb(-2 if prose.endswith("%") else 0)
    try:
        printed = Decimal(shown.removesuffix("%")).scaleb(-2 if shown.endswith("%") else 0)
    except ArithmeticError:
        return False
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return abs(printed - value) <= Decimal(5).scaleb(exponent - 1)


def allowed(number: ProseNumber) -> str | None:
    """The reason of the allowlist phrase around ``number``, if one is."""
    for phrase, reason in ALLOWED.items():
        start = number.context.find(phrase)
        while start >= 0:
            if start <= number.at < start + len(phrase):
                return reason
            start = number.context.find(phrase, start + 1)
    return None


def untraced(text: str) -> list[str]:
    """The prose numbers of ``text`` no neighbouring block's session shows and no allowlist phrase explains."""
    shown, by_session = figures(blocks(text))
    problems = []
    for number in prose_numbers(text):
        if allowed(number) is None and not traced(number, shown, by_session):
            sessions = " or ".join(sorted({block.session for block in number.near})) or "(none)"
            problems.append(
                f"docs/usage.md:{number.line}: {number.text} is in neither neighbouring block (nor, exactly, "
                f"in session {sessions}): print it from a block, or reword; a constant of a definition "
                f"goes in ALLOWED with its reason"
            )
    return problems


def prose_times(text: str) -> list[str]:
    """Measured times restated in the prose (they differ between runs, so no block can hold them)."""
    problems = []
    for paragraph in prose_paragraphs(text.split("\n")):
        for index, line in paragraph:
            for match in TIME.finditer(line):
                problems.append(f"docs/usage.md:{index + 1}: {match[0]!r}: a measured time in the prose")
    return problems


PAGE_TEXT = PAGE.read_text(encoding="utf-8")


def test_the_rules_on_a_small_page() -> None:
    page = (
        "intro 0.75 and 12.5%\n\n<!-- regenerate: s -->\n```\n$ echo 0.12345 0.8951 --x=0.25\n0.12345 0.8951\n```\n\n"
        "after: 0.1235, 0.895, 89.5%, 0.25, 0.12 and 0.9 and 0.8952 (0.5 = random)\n\n"
        "<!-- regenerate: t -->\n```\n$ echo 1\n1\n```\n\n<!-- regenerate: s -->\n```\n$ echo 2\n2\n```\n\n"
        "far from the first block: 0.12345 (exact, same session) but not 0.895 (a rounding)\n"
    )
    bad = [problem.split(": ")[1].split(" is in")[0] for problem in untraced(page)]
    # 0.75 and 12.5% sit above the block but are not in it; 0.9 keeps one digit; 0.8952 is not 0.8951
    assert bad == ["0.75", "12.5%", "0.9", "0.8952", "0.895"]
    assert [allowed(n) is not None for n in prose_numbers(page) if n.text == "0.5"] == [True]  # (0.5 = random)
    assert prose_times("took 5.3 s wall\n\n```\n1.0 s\n```\n") == [
        "docs/usage.md:1: '5.3 s': a measured time in the prose"
    ]


def test_rounding() -> None:
    assert matches("0.895", "0.8951") and matches("89.5%", "0.8951") and matches("2.1%", "0.02111")
    assert matches("0.3072", "0.30721510308080985") and matches("0.0086", "0.008601292328604626")
    assert matches("0.960", "0.9601") and matches("0.29", "0.2906") and matches("0.55", "0.5486")
    assert not matches("0.896", "0.8951") and not matches("0.5", "0.4999") and not matches("0.5", "0.5486")
    assert matches("0.5", "0.5") and not matches("0.43", "0.424")


def test_every_prose_number_is_printed_by_a_neighbouring_block() -> None:
    assert len(prose_numbers(PAGE_TEXT)) >= 40
    problems = untraced(PAGE_TEXT)
    assert not problems, "\n".join(problems)


def test_no_measured_time_in_the_prose() -> None:
    problems = prose_times(PAGE_TEXT)
    assert not problems, "\n".join(problems)


def test_the_allowed_constants_are_the_codes_own() -> None:
    assert ALPHA == 0.05 and NOISE_WARNING == 0.5  # "rank test at 5%", "fraction above 0.5"


def test_every_allowed_phrase_is_on_the_page() -> None:
    text = " ".join(PAGE_TEXT.split())
    for phrase in ALLOWED:
        assert phrase in text, f"ALLOWED phrase {phrase!r} is no longer on the page: remove it"
        assert PROSE_NUMBER.search(phrase), f"ALLOWED phrase {phrase!r} holds no number"


def test_a_block_regenerated_without_its_prose_fails() -> None:
    # each traced prose number is guarded: move the block figures it comes from (plus 1, as a
    # regeneration that changed them would) and it is traced no more
    shown, by_session = figures(blocks(PAGE_TEXT))
    checked = 0
    for number in prose_numbers(PAGE_TEXT):
        if allowed(number) is not None or not traced(number, shown, by_session):
            continue  # an untraced number fails the test above
        checked += 1

        def move(found: set[str], prose: str = number.text) -> set[str]:
            return {str(Decimal(f.rstrip("%")) + 1) if matches(prose, f) else f for f in found}

        near = {block.start: move(shown[block.start]) for block in number.near}
        sessions = {block.session: move(by_session[block.session] & {number.text}) for block in number.near}
        assert not traced(number, near, sessions), number
    assert checked >= 30
