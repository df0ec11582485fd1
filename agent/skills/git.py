"""Fetching one commit of a git repository for a skill: the ``git`` program, kept on a leash.

Only the transports :class:`~agent.skills.downloads.Reach` allows (https in production: no
``ssh``, ``file``, ``ext::`` or ``git://``), the host judged by the SSRF guard first, no
configuration of the system's or the user's (no credential helper, no hooks, no templates),
no prompts, no submodules, and a time limit. The checkout is then copied like any folder
(:func:`agent.skills.unpack.copy_folder`), which refuses links and oversized trees. Git
resolves the host name itself, so a name that answers differently a second time (DNS
rebinding) is not caught here as it is for downloads; the commit is recorded either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from yarl import URL

from agent.skills.downloads import DownloadError, Reach

GIT_SECONDS = 120.0  # for the whole fetch and checkout


class GitError(Exception):
    """The repository or the ref could not be fetched; the message says why."""


async def fetch_commit(url: str, ref: str, target: Path, reach: Reach) -> str:
    """Check out ``ref`` (a branch, tag or commit; ``HEAD``: the default branch) of the
    repository at ``url`` into ``target`` (a new folder); returns the commit's id."""
    try:
        await reach.vet(URL(url))
    except (ValueError, TypeError) as exc:
        raise GitError(f"{url!r} is not a valid URL: {exc}") from None
    except DownloadError as exc:
        raise GitError(str(exc)) from None
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(target),
        "LANG": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ALLOW_PROTOCOL": ":".join(sorted(reach.schemes)),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ASKPASS": "true",
    }
    options = ["-c", "core.hooksPath=" + os.devnull, "-c", "submodule.recurse=false"]
    options += ["-c", "protocol.file.allow=never", "-c", "credential.helper="]
    async with asyncio.timeout(GIT_SECONDS):
        await _git("init", ["init", "-q", "--template=", str(target)], env)
        fetch = ["-C", str(target), *options, "fetch", "-q", "--no-tags"]
        try:
            await _git(f"fetch of {ref}", [*fetch, "--depth", "1", url, ref], env)
        except GitError as exc:
            if "shallow" not in str(exc) and "dumb" not in str(exc):
                raise
            # A server that cannot serve one commit alone (the dumb protocol of a static
            # file host): the whole history, then the one commit.
            await _git(f"fetch of {ref}", [*fetch, url, ref], env)
        await _git("checkout", ["-C", str(target), *options, "checkout", "-q", "FETCH_HEAD"], env)
        commit = await _git("rev-parse", ["-C", str(target), "rev-parse", "FETCH_HEAD"], env)
        return commit.strip()


async def _git(what: str, arguments: list[str], env: dict[str, str]) -> str:
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            *arguments,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise GitError("git is not installed (Debian/Ubuntu: apt install git)") from None
    try:
        out, err = await process.communicate()
    except asyncio.CancelledError:  # the time limit: the whole group goes
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        raise
    if process.returncode != 0:
        said = " ".join(err.decode(errors="replace").split()[-60:])
        raise GitError(f"git {what} failed: {said or f'exit code {process.returncode}'}")
    return out.decode(errors="replace")
