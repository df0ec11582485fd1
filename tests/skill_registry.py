"""A skill registry the tests serve themselves: a static index and archives on 127.0.0.1.

``Registry`` fills a :class:`tests.fakes.web.FakeSite` with ``/index.json`` and one archive per
published version, the way a static file host would serve them; ``archive`` packs a skill's
files (or hand-made hostile entries) as a ``.tar.gz`` or ``.zip``. Downloads from loopback
are allowed only through :meth:`agent.skills.downloads.Reach.for_tests`, which the tests
pass explicitly.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from agent.skills.downloads import Reach
from tests.fakes.web import FakeSite

LOOPBACK = Reach.for_tests("127.0.0.1")


def skill_md(body: str = "Do the thing.", **fields: Any) -> str:
    """A SKILL.md: YAML front matter from ``fields``, then ``body``."""
    head = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True)
    return f"---\n{head}---\n{body}\n"


def archive(
    files: Mapping[str, str | bytes],
    *,
    kind: str = "tar.gz",
    top: str = "",
    links: Mapping[str, str] | None = None,
) -> bytes:
    """The files (path -> content) as an archive, under the folder ``top`` if given;
    ``links`` adds symbolic links (name -> target) the way a hostile archive would."""
    prefix = f"{top}/" if top else ""
    buffer = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buffer, "w") as packed:
            for name, content in files.items():
                packed.writestr(prefix + name, content)
            for name, target in (links or {}).items():
                info = zipfile.ZipInfo(prefix + name)
                info.external_attr = 0o120777 << 16  # a symbolic link
                packed.writestr(info, target)
        return buffer.getvalue()
    with tarfile.open(fileobj=buffer, mode="w:gz") as packed:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith((".py", ".sh")) else 0o644
            info.mtime = int(time.time())
            packed.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(prefix + name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            packed.addfile(info)
    return buffer.getvalue()


@dataclass
class Registry:
    site: FakeSite
    entries: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def index_url(self) -> str:
        return self.site.url("/index.json")

    def publish(
        self,
        name: str,
        version: str,
        data: bytes,
        *,
        description: str = "",
        served: bytes | None = None,
    ) -> str:
        """List ``name`` at ``version`` with the sha256 of ``data``; the archive URL serves
        ``served`` instead when given (a tampered download). Returns the digest."""
        digest = hashlib.sha256(data).hexdigest()
        path = f"/archives/{name}-{version}.tar.gz"
        self.site.page(path, served if served is not None else data, "application/gzip")
        self.entries[name] = {
            "name": name,
            "version": version,
            "description": description,
            "url": path.lstrip("/"),  # relative to the index, as a static host would have it
            "sha256": digest,
        }
        index = {"skills": list(self.entries.values())}
        self.site.page("/index.json", json.dumps(index), "application/json")
        return digest
