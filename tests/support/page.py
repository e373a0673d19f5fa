"""The provenance page in a browser, as a user drives it: the page opened with a token, the
search form filled and submitted, nodes clicked, with the waits every step needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.service import TOKEN


class Page:
    """The page in the browser, with the waits every step needs."""

    def __init__(self, d: Any, base: str) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        self.d, self.by, self.ec = d, By, ec
        self.wait = WebDriverWait(d, 60)
        d.get("about:blank")  # a fresh page: the same URL with a fragment would not reload
        d.get(f"{base}/#token={TOKEN}")
        self.wait.until(ec.text_to_be_present_in_element((By.ID, "search-summary"), "latest"))

    def css(self, sel: str) -> Any:
        return self.d.find_element(self.by.CSS_SELECTOR, sel)

    def all(self, sel: str) -> list[Any]:
        return list(self.d.find_elements(self.by.CSS_SELECTOR, sel))

    def texts(self, sel: str) -> list[str]:
        """The elements' visible texts, read in one script: a list of element handles goes
        stale when the page redraws between finding them and reading each one."""
        script = "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.innerText)"
        return list(self.d.execute_script(script, sel))

    def attrs(self, sel: str, name: str) -> list[str | None]:
        """One attribute of every element, read in one script (see `texts`)."""
        script = (
            "return Array.from(document.querySelectorAll(arguments[0]))"
            ".map(e => e.getAttribute(arguments[1]))"
        )
        return list(self.d.execute_script(script, sel, name))

    def present(self, sel: str) -> Any:
        return self.wait.until(self.ec.presence_of_element_located((self.by.CSS_SELECTOR, sel)))

    def text_in(self, ident: str, text: str) -> None:
        self.wait.until(self.ec.text_to_be_present_in_element((self.by.ID, ident), text))

    def search(self, **fields: str) -> list[str]:
        """Fill the search form (cleared first), submit, the rows' texts."""
        self.d.execute_script("document.getElementById('search-form').reset()")
        self.d.execute_script("document.getElementById('search-summary').textContent = ''")
        for name, value in fields.items():
            self.css(f'#search-form [name="{name}"]').send_keys(value)
        self.css("#search-form button[type=submit]").click()
        self.text_in("search-summary", "found")
        return self.texts("#events tbody tr")

    def lineage(self, flowfile_uuid: str) -> None:
        """Ask for a FlowFile's lineage by the form and wait until it replaces the graph shown:
        until then the old graph's nodes still match every selector."""
        drawn = self.all("#graph g.node")
        self.css("#lineage-uuid").clear()
        self.css("#lineage-uuid").send_keys(flowfile_uuid)
        self.css("#lineage-form button[type=submit]").click()
        if drawn:
            self.wait.until(self.ec.staleness_of(drawn[0]))
        self.present("#graph g.node.event")

    def node(self, event_type: str) -> None:
        """Click the event node of that type and wait for its details."""
        self.css(f'#graph g[data-event-type="{event_type}"]').click()
        self.text_in("details-title", event_type)

    def downloaded(self, suffix: str) -> bytes:
        folder: Path = self.d.downloads
        self.wait.until(lambda _: any(folder.glob(f"*{suffix}")))
        return next(folder.glob(f"*{suffix}")).read_bytes()

    def error(self) -> str:
        return str(self.css("#error").text)
