"""One start/stop lifecycle for every long-lived component, usable with ``async with``."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Service:
    """Subclasses implement :meth:`start` and :meth:`stop`; ``async with`` calls them."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
