"""Reading rendered pages in tests: a small element tree over `html.parser`, so tests
assert on elements and attributes, never on raw substrings of markup."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID_ELEMENTS = frozenset(
    "area base br col embed hr img input link meta source track wbr".split()  # noqa: SIM905
)


@dataclass
class Element:
    """One element: its tag, attributes (None for a bare attribute) and children."""

    tag: str
    attrs: dict[str, str | None]
    children: list[Element | str] = field(default_factory=list)

    def iter(self) -> Iterator[Element]:
        """This element and every element below it, in document order."""
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, predicate: Callable[[Element], bool]) -> list[Element]:
        """Every element below (or at) this one that matches."""
        return [element for element in self.iter() if predicate(element)]

    def by_id(self, element_id: str) -> Element:
        """The element with this id (AssertionError when there is not exactly one)."""
        found = self.find_all(lambda e: e.attrs.get("id") == element_id)
        assert len(found) == 1, f"{len(found)} elements with id {element_id!r}"
        return found[0]

    def by_class(self, name: str) -> list[Element]:
        """Elements whose class list holds `name`."""
        return self.find_all(lambda e: name in (e.attrs.get("class") or "").split())

    def by_tag(self, tag: str) -> list[Element]:
        """Elements of one tag."""
        return self.find_all(lambda e: e.tag == tag)

    @property
    def text(self) -> str:
        """The text inside, whitespace collapsed."""
        parts: list[str] = []

        def walk(element: Element) -> None:
            for child in element.children:
                if isinstance(child, str):
                    parts.append(child)
                else:
                    walk(child)

        walk(self)
        return re.sub(r"\s+", " ", "".join(parts)).strip()


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.stack[-1].children.append(element)
        if tag not in VOID_ELEMENTS:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str | bytes) -> Element:
    """The element tree of a page or a fragment."""
    builder = _TreeBuilder()
    builder.feed(html.decode() if isinstance(html, bytes) else html)
    builder.close()
    return builder.root


def top_elements(document: Element) -> list[Element]:
    """The elements at the top of a fragment (whitespace between them ignored)."""
    return [child for child in document.children if isinstance(child, Element)]
