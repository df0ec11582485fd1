"""Whether a model is shown pictures.

``llm.vision`` says so (on by default). A server that refuses a request with pictures says
otherwise: its provider then sends no more pictures, and the gateway's intake, which reads
this for every message, reads the words in a picture or a scanned page by OCR instead (for
a model that sees none). One per configured model, shared by its provider and by whoever
asks about that model; a change of ``llm.vision`` makes a new provider, with a new one.
"""

from __future__ import annotations


class Sight:
    def __init__(self, configured: bool = True) -> None:
        self._configured = configured  # llm.vision
        self._refused = False

    @property
    def sees(self) -> bool:
        return self._configured and not self._refused

    def refused(self) -> bool:
        """The server refused a request with pictures: none from now on. Whether this is
        news (it saw them until now)."""
        news = self.sees
        self._refused = True
        return news
