"""Every relative link in README.md and docs/ leads to a file, and to a heading, that exist.

A link is markdown's `[text](target)` (images too) or a reference definition
`[name]: target`, outside fenced code blocks and inline code. Links with a
scheme (`https:`, `mailto:` ...) are not checked. A target is resolved
relative to the file that holds it (`/path` from the repository root); a
`#anchor`, alone or after a `.md` path, must be a heading of that file under
GitHub's slug rules (lowercase; punctuation dropped except `-` and `_`; each
space a `-`; a repeated slug gets `-1`, `-2` ...) or an explicit
`<a id="...">` / `<a name="...">`.

Stdlib only, so it runs without the project installed.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# A newcomer's page: what it is, the two commands, an example, the CLI, where to go next.
README_MAX_LINES = 250

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
# [text](target) or [text](target "title"); `!` before it (an image) is fine too.
_INLINE_LINK = re.compile(
    r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]"  # the text, which may hold one level of brackets
    r"\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"  # (target "optional title")
)
_REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HTML_ANCHOR = re.compile(r"""<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_HTML_TAG = re.compile(r"<[^>]+>")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading's rendered text (before de-duplication)."""
    slug = []
    for ch in heading.strip().lower():
        if ch == " ":
            slug.append("-")
        elif ch == "-" or unicodedata.category(ch)[0] in "LNM" or unicodedata.category(ch) == "Pc":
            slug.append(ch)
    return "".join(slug)


def _rendered_text(markdown: str) -> str:
    """Roughly the text a heading renders to: code spans keep their content,
    links their text, images their alt text; tags and emphasis marks go."""
    parts: list[str] = []
    pos = 0
    for span in _CODE_SPAN.finditer(markdown):
        parts.append(_rendered_prose(markdown[pos:span.start()]))
        parts.append(span.group(2).strip() if span.group(2).strip() else span.group(2))
        pos = span.end()
    parts.append(_rendered_prose(markdown[pos:]))
    return "".join(parts)


def _rendered_prose(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = _HTML_TAG.sub("", text)
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # emphasis underscores, not snake_case
    return text.replace("*", "")


def _lines_outside_fences(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    kept: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = _FENCE.match(line)
        if fence is None:
            if opening:
                fence = opening.group(1)
                continue
            kept.append((number, line))
        elif opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence) \
                and not line.strip()[len(opening.group(1)):].strip():
            fence = None
    return kept


def anchors_of(text: str) -> set[str]:
    """Every anchor a markdown file offers: heading slugs (de-duplicated as
    GitHub does) and explicit <a id/name> anchors."""
    found: set[str] = set()
    counts: dict[str, int] = {}

    def add_heading(raw: str) -> None:
        base = github_slug(_rendered_text(raw))
        slug = base
        while slug in counts:
            counts[base] += 1
            slug = f"{base}-{counts[base]}"
        counts.setdefault(slug, 0)
        found.add(slug)

    previous: tuple[int, str] | None = None
    for number, line in _lines_outside_fences(text):
        found.update(_HTML_ANCHOR.findall(line))
        atx = _ATX.match(line)
        if atx:
            add_heading(atx.group(2) or "")
            previous = None
            continue
        setext = _SETEXT.match(line)
        if setext and previous is not None and previous[0] == number - 1 and previous[1].strip() \
                and not previous[1].lstrip().startswith(("|", "-", "*", "+", ">")):
            add_heading(previous[1].strip())
            previous = None
            continue
        previous = (number, line)
    return found


def links_of(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link outside fenced code and inline code."""
    found: list[tuple[int, str]] = []
    for number, line in _lines_outside_fences(text):
        prose = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        definition = _REFERENCE_DEF.match(prose)
        if definition:
            found.append((number, definition.group(1)))
            continue
        found.extend((number, m.group(1)) for m in _INLINE_LINK.finditer(prose))
    return found


def check_links(files: list[Path], root: Path) -> list[str]:
    """One line per broken link: a target file that does not exist, or an
    anchor that its markdown file does not have."""
    problems: list[str] = []
    anchor_cache: dict[Path, set[str]] = {}
    for source in files:
        text = source.read_text(encoding="utf-8")
        where = source.relative_to(root).as_posix()
        for number, target in links_of(text):
            if not target or _SCHEME.match(target):
                continue
            path_part, _, anchor = target.partition("#")
            path_part = unquote(path_part.split("?", 1)[0])
            if not path_part:
                resolved = source
            elif path_part.startswith("/"):
                resolved = (root / path_part.lstrip("/")).resolve()
            else:
                resolved = (source.parent / path_part).resolve()
            if not resolved.exists():
                problems.append(f"{where}:{number}: {target}: no file {path_part}")
                continue
            if not anchor or resolved.suffix.lower() != ".md" or not resolved.is_file():
                continue
            if resolved not in anchor_cache:
                anchor_cache[resolved] = anchors_of(resolved.read_text(encoding="utf-8"))
            if unquote(anchor) not in anchor_cache[resolved]:
                shown = resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else resolved
                problems.append(f"{where}:{number}: {target}: no anchor #{anchor} in {shown}")
    return problems


def documentation_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


# The repository's documentation.


def test_every_relative_link_in_readme_and_docs_resolves() -> None:
    problems = check_links(documentation_files(REPO_ROOT), REPO_ROOT)

    assert problems == [], "\n".join(problems)


def test_readme_links_every_docs_page() -> None:
    readme = REPO_ROOT / "README.md"
    linked = {
        (readme.parent / unquote(target.partition("#")[0])).resolve()
        for _, target in links_of(readme.read_text(encoding="utf-8"))
        if target and not _SCHEME.match(target) and target.partition("#")[0]
    }
    pages = sorted((REPO_ROOT / "docs").glob("*.md"))

    assert pages, "docs/ holds the documentation beyond the README"
    assert [p.name for p in pages if p.resolve() not in linked] == []


def test_readme_stays_a_newcomers_page() -> None:
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").count("\n")

    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move details into docs/"


# The checker itself: it must catch what it is for.


def _write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_checker_reports_a_link_to_a_missing_file(tmp_path: Path) -> None:
    page = _write(tmp_path, "README.md", "# Top\n\nSee [the guide](docs/guide.md) and [ok](README.md).\n")

    assert check_links([page], tmp_path) == ["README.md:3: docs/guide.md: no file docs/guide.md"]


def test_checker_reports_a_missing_anchor_alone_and_after_a_path(tmp_path: Path) -> None:
    _write(tmp_path, "docs/ops.md", "# Operations\n\n## Version pins\n")
    page = _write(
        tmp_path,
        "README.md",
        "# Top\n\n[a](#top) [b](#bottom)\n[c](docs/ops.md#version-pins) [d](docs/ops.md#pins)\n",
    )

    assert check_links([page], tmp_path) == [
        "README.md:3: #bottom: no anchor #bottom in README.md",
        "README.md:4: docs/ops.md#pins: no anchor #pins in docs/ops.md",
    ]


def test_checker_resolves_relative_to_the_linking_file(tmp_path: Path) -> None:
    _write(tmp_path, "docs/a.md", "# A\n")
    page = _write(tmp_path, "docs/b.md", "[up](../README.md) [here](a.md#a) [wrong](docs/a.md)\n")
    _write(tmp_path, "README.md", "# R\n")

    assert check_links([page], tmp_path) == ["docs/b.md:1: docs/a.md: no file docs/a.md"]


def test_checker_ignores_external_links_fenced_code_and_inline_code(tmp_path: Path) -> None:
    page = _write(
        tmp_path,
        "README.md",
        "[web](https://example.com/x.md#nope) [mail](mailto:a@b.c) `[code](missing.md)`\n"
        "```text\n[fenced](missing.md)\n```\n"
        "~~~~\n```\n[fenced](missing.md)\n```\n~~~~\n",
    )

    assert check_links([page], tmp_path) == []


def test_checker_sees_reference_definitions_and_images(tmp_path: Path) -> None:
    page = _write(tmp_path, "README.md", "![plot](plot.png)\n\n[guide]: docs/guide.md\n")

    assert check_links([page], tmp_path) == [
        "README.md:1: plot.png: no file plot.png",
        "README.md:3: docs/guide.md: no file docs/guide.md",
    ]


def test_anchors_follow_githubs_slug_rules() -> None:
    text = (
        "# raygroups\n"
        "### Offset analytics (`lag`, `report`)\n"
        "## Kafka clients: the gateway\n"
        "## Benchmarks\n"
        "## Benchmarks\n"
        "## Benchmarks\n"
        "## `bench.core` and `ServiceSettings.replica_lag_time_max_ms`\n"
        "## When a disk fills or fails\n"
        "Setext heading, with *emphasis*\n"
        "---------------------------------\n"
        "| a | b |\n| --- | --- |\n"
        '<a id="custom-id"></a> <a name="legacy">x</a>\n'
        "```\n# not a heading\n```\n"
    )

    assert anchors_of(text) == {
        "raygroups",
        "offset-analytics-lag-report",
        "kafka-clients-the-gateway",
        "benchmarks",
        "benchmarks-1",
        "benchmarks-2",
        "benchcore-and-servicesettingsreplica_lag_time_max_ms",
        "when-a-disk-fills-or-fails",
        "setext-heading-with-emphasis",
        "custom-id",
        "legacy",
    }


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Version pins", "version-pins"),
        ("What it answers — and why", "what-it-answers--and-why"),
        ("Failover: 0.3–0.6 s", "failover-0306-s"),
        ("  Trailing  spaces  ", "trailing--spaces"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug
