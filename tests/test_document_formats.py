"""Every format read_file reads, from real files made here: the text a person would want
from each, in order, tables kept as tables."""

from __future__ import annotations

from pathlib import Path

from agent.documents.reader import DocumentReader, document_kind
from gateway.config.media import DocumentSettings
from tests import documents

READER = DocumentReader(DocumentSettings())


async def read(path: Path, **kwargs: object) -> str:
    kind = document_kind(path)
    assert kind is not None, path
    return (await READER.read(path, kind, **kwargs)).render()  # type: ignore[arg-type]


async def test_slides_in_the_presentations_order_with_their_tables(tmp_path: Path) -> None:
    path = documents.pptx(
        tmp_path / "deck.pptx",
        [("Roadmap", []), ("Costs", [["Item", "EUR"], ["Venue", "900"]]), ("Thanks", [])],
    )
    assert (await read(path)).splitlines() == [
        "[deck.pptx: presentation, 3 slides]",
        "--- slide 1 ---",
        "Roadmap",
        "--- slide 2 ---",
        "Costs",
        "",
        "| Item | EUR |",
        "| --- | --- |",
        "| Venue | 900 |",
        "--- slide 3 ---",
        "Thanks",
    ]
    assert "Thanks" not in await read(path, pages=(2,))


async def test_an_epub_by_chapter(tmp_path: Path) -> None:
    path = documents.epub(
        tmp_path / "book.epub",
        [("Arrival", "The ship came in at dawn."), ("Departure", "They left by night.")],
    )
    both = await read(path)
    assert both.startswith("[book.epub: EPUB book, 2 chapters]")
    assert both.index("The ship came in at dawn.") < both.index("They left by night.")
    second = await read(path, pages=(2,))
    assert "They left by night." in second and "dawn" not in second


async def test_html_and_csv_keep_their_tables(tmp_path: Path) -> None:
    page = tmp_path / "prices.html"
    page.write_text(
        "<html><body><article><h1>Prices</h1><p>Valid from March, for every member of the"
        " club and their guests.</p><table><tr><th>Plan</th><th>Price</th></tr>"
        "<tr><td>Basic</td><td>5</td></tr></table></article></body></html>"
    )
    html = await read(page)
    assert "Valid from March" in html and "| Basic | 5 |" in html
    table = tmp_path / "people.csv"
    table.write_text("name;city\nAnn;Lisbon\nBob;Porto\n")
    assert (await read(table)).splitlines()[1:] == [
        "| name | city |",
        "| --- | --- |",
        "| Ann | Lisbon |",
        "| Bob | Porto |",
    ]
