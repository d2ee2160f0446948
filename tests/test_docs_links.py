"""Every link of the README and docs/ to a file of the repository, or to a heading in one, resolves."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def heading_anchors(text):
    """GitHub's anchors of a page's headings (lower case, punctuation dropped, spaces to hyphens)."""
    anchors, seen, fenced = set(), {}, False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else re.match(r"^#{1,6} (.*)$", line)
        if match:
            slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_heading_anchors_follow_github():
    text = "# Top\n## The mask's floor\n### `--noise-sample FILE`\n## Cost\n## Cost\n```\n## not a heading\n```\n"
    assert heading_anchors(text) == {"top", "the-masks-floor", "--noise-sample-file", "cost", "cost-1"}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_links_resolve(page):
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked.read_text(encoding="utf-8")):
            broken.append(target)
    assert not broken, f"{page.name}: links that do not resolve: {broken}"
