"""Every link between the documentation's files (README.md, docs/, CHANGELOG.md) leads to a file that exists, and to
a heading of it that exists: a page renamed or a section retitled breaks no reader's path. Every page of docs/ is
reachable from the README."""

from __future__ import annotations

import pytest

from tests.support.documented import REPO, Link, anchors, document_paths, links, rel

LINKS = links()


@pytest.mark.parametrize("link", LINKS, ids=lambda link: f"{link.file}:{link.line}:{link.target}")
def test_every_link_leads_to_a_file_and_heading_that_exist(link: Link) -> None:
    assert link.path.exists(), f"{link.file}:{link.line}: {link.target} leads to no file"
    if link.anchor is not None:
        assert link.path.suffix == ".md", f"{link.file}:{link.line}: an anchor into {link.target}, not Markdown"
        assert link.anchor in anchors(link.path), \
            f"{link.file}:{link.line}: {rel(link.path)} has no heading for #{link.anchor}: {sorted(anchors(link.path))}"


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {rel(link.path) for link in LINKS if link.file == "README.md"}
    pages = {rel(path) for path in document_paths() if path.parent == REPO / "docs"}
    assert pages, "no pages in docs/: the extraction looks in the wrong place"
    assert pages <= linked, f"docs pages the README's 'Where to go next' does not link: {sorted(pages - linked)}"


def test_the_documentation_includes_the_docs_pages_and_the_changelog() -> None:
    # guards the extraction: the pages of docs/ and CHANGELOG.md follow the same rules as the READMEs
    files = {rel(path) for path in document_paths()}
    assert {"README.md", "CHANGELOG.md", "docs/reference.md", "docs/trust-model.md", "jobs/higgs/README.md"} <= files
    assert len(LINKS) >= 30
