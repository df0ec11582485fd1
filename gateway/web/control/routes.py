"""The control center's endpoints: JSON for each section, the owner's actions, and one event
stream that tells open pages what changed.

Every route here sits behind :class:`gateway.web.access.security.WebGuard`: only the owner's
session (a sign-in link's or the web token's cookie with its page key; the web token; the
command line's socket) gets in, a section's page being a shell that holds nothing (the
cookie alone opens it), and a request that changes something must come from the server's
own pages (``Origin``). Each action goes
through :class:`gateway.web.view.GatewayView`, which runs the code the chat commands and the
command line run, and is audited there with ``by`` (``web:owner``).

The event stream (``/api/events``, server-sent events) is what keeps pages current without
polling: a page opens it while it is visible and closes it when hidden, and the server
sends a *pulse* (counts and signatures per topic) only when something changed; a section
reloads its data when its topic's signature moves.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, get_args

from aiohttp import web

from gateway.config.people import valid_person_key
from gateway.core.channel import SupportsHealth
from gateway.core.lifecycle import waited
from gateway.core.system.bodies import parse_json
from gateway.core.text.merge import Conflict, Merge
from gateway.core.workspace_files import listing as workspace_listing
from gateway.core.workspace_files import read as read_workspace
from gateway.core.workspace_files import rebased
from gateway.web.access.security import page_route
from gateway.web.control import approvals, conversations, health, jobs, people, usage
from gateway.web.pages import SECTIONS, section_page
from gateway.web.view import HeartbeatAction, JobAction, NotEditable, WorkspaceConflict

if TYPE_CHECKING:
    from gateway.core.webhost import Prepare
    from gateway.web.view import GatewayView

log = logging.getLogger(__name__)

BY = "web:owner"  # who acts, for the audit log: the owner's session
PULSE_SECONDS = 2.0  # how often an open page's stream looks for a change
KEEPALIVE_SECONDS = 25.0
EDITS_SHOWN = 20
MAX_QUERY = 200
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
JOB_ACTIONS: dict[str, JobAction] = {a: a for a in get_args(JobAction)}
HEARTBEAT_ACTIONS: dict[str, HeartbeatAction] = {a: a for a in get_args(HeartbeatAction)}


class BadRequest(Exception):
    pass


def _address(text: str) -> str:
    """``channel:sender id`` as the page sent it, or a BadRequest naming the form."""
    address = text.strip()
    if not valid_person_key(address):
        raise BadRequest(f"{text!r} is not an address: write channel:id, e.g. telegram:123456")
    return address


class ControlRoutes:
    def __init__(self, gateway: GatewayView, prepare: Prepare) -> None:
        self._gateway = gateway
        self._prepare = prepare  # security headers, and ends when the session does
        self._closing = asyncio.Event()
        self.streams = 0  # event streams open now (pages visible somewhere)
        self.unwatched = asyncio.Event()  # set while no stream is open: nothing is computed
        self.unwatched.set()

    def routes(self) -> list[web.RouteDef]:
        # shells only: their scripts fetch the data with the page key (gateway/web/pages.py)
        pages = [page_route(f"/{s.name}", _page(s.name), name=s.name) for s in SECTIONS]
        return [
            *pages,
            web.get("/api/events", self.events),
            web.get("/api/conversations", self._json(self.conversations)),
            web.get("/api/conversations/transcript", self._json(self.transcript)),
            web.get("/api/conversations/search", self._json(self.search)),
            web.post("/api/conversations/stop", self._json(self.stop)),
            web.post("/api/conversations/new", self._json(self.start_fresh)),
            web.get("/api/people", self._json(self.people)),
            web.post("/api/people/revoke", self._json(self.revoke)),
            web.post("/api/people/link", self._json(self.link)),
            web.post("/api/people/unlink", self._json(self.unlink)),
            web.post("/api/people/confirm", self._json(self.confirm_link)),
            web.get("/api/approvals", self._json(self.approvals)),
            web.post("/api/approvals/{id}/{action}", self._json(self.decide)),
            web.get("/api/memory", self._json(self.memory)),
            web.post("/api/memory/diff", self._json(self.diff)),
            web.post("/api/memory/save", self._json(self.save)),
            web.get("/api/jobs", self._json(self.jobs)),
            web.post("/api/jobs/{id}/{action}", self._json(self.change_job)),
            web.post("/api/heartbeat/{action}", self._json(self.change_heartbeat)),
            web.get("/api/usage", self._json(self.usage)),
            web.get("/api/health", self._json(self.health)),
        ]

    def close(self) -> None:
        """The server stops: every open event stream ends now."""
        self._closing.set()

    # -- plumbing ---------------------------------------------------------------------------

    def _json(self, handler: Callable[[web.Request], Awaitable[Any]]) -> Handler:
        """``handler``'s result as JSON; a bad request's reason with 400."""

        async def serve(request: web.Request) -> web.StreamResponse:
            try:
                result = await handler(request)
            except BadRequest as exc:
                return _error(400, str(exc))
            if isinstance(result, web.StreamResponse):
                return result
            return web.json_response(result)

        return serve

    @staticmethod
    async def _body(request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json(loads=parse_json)
        except (ValueError, UnicodeDecodeError):
            raise BadRequest("send a JSON object") from None
        if not isinstance(body, dict):
            raise BadRequest("send a JSON object")
        return body

    @staticmethod
    def _text(body: dict[str, Any], field: str) -> str:
        value = body.get(field)
        if not isinstance(value, str) or not value:
            raise BadRequest(f"{field} is missing")
        return value

    # -- conversations ----------------------------------------------------------------------

    async def conversations(self, request: web.Request) -> Any:
        return {"conversations": await conversations.listing(self._gateway)}

    async def transcript(self, request: web.Request) -> Any:
        key = request.query.get("session", "")
        if not key:
            raise BadRequest("session is missing")
        shown = await conversations.transcript(self._gateway, key)
        if shown is None:
            return _error(404, f"there is no conversation {key}")
        return shown

    async def search(self, request: web.Request) -> Any:
        query = request.query.get("q", "").strip()[:MAX_QUERY]
        if not query:
            raise BadRequest("q is missing")
        return {"query": query, "results": await conversations.search(self._gateway, query)}

    async def stop(self, request: web.Request) -> Any:
        key = self._text(await self._body(request), "session")
        return {"message": await self._gateway.stop_turn(key, by=BY)}

    async def start_fresh(self, request: web.Request) -> Any:
        key = self._text(await self._body(request), "session")
        return {"message": await self._gateway.start_fresh(key, by=BY)}

    # -- people and approvals ---------------------------------------------------------------

    async def people(self, request: web.Request) -> Any:
        return await people.listing(self._gateway)

    async def revoke(self, request: web.Request) -> Any:
        """Their pairing and their place in config.toml's lists, as ``switchboard pairing
        revoke`` takes them; 404 when there was nothing to take, 409 when something lets
        them in that this cannot change (the environment's list); the answer names what
        still lets them in."""
        body = await self._body(request)
        channel, sender = self._text(body, "channel"), self._text(body, "sender_id")
        revoked = await self._gateway.revoke_person(channel, sender, by=BY)
        if not revoked.done:
            nothing = revoked.refused is None and not revoked.still
            return _error(404 if nothing else 409, revoked.text())
        return {
            "message": revoked.text(),
            "pairing": revoked.pairing,
            "lists": list(revoked.lists),
            "still": [*revoked.still, *revoked.notes],
        }

    async def link(self, request: web.Request) -> Any:
        """``address`` becomes one of the person ``to`` is (``channel:id`` each)."""
        body = await self._body(request)
        address, to = _address(self._text(body, "address")), _address(self._text(body, "to"))
        try:
            return {"message": await self._gateway.link_addresses(address, to, by=BY)}
        except ValueError as exc:
            return _error(409, str(exc))

    async def unlink(self, request: web.Request) -> Any:
        address = _address(self._text(await self._body(request), "address"))
        try:
            return {"message": await self._gateway.unlink_address(address, by=BY)}
        except ValueError as exc:
            return _error(409, str(exc))

    async def confirm_link(self, request: web.Request) -> Any:
        code = self._text(await self._body(request), "code")
        return {"message": await self._gateway.confirm_link(code, by=BY)}

    async def approvals(self, request: web.Request) -> Any:
        return await approvals.listing(self._gateway)

    async def decide(self, request: web.Request) -> Any:
        action = request.match_info["action"]
        if action not in ("approve", "deny"):
            return _error(404, "action is approve or deny")
        request_id = request.match_info["id"]
        message = await self._gateway.decide_approval(
            request_id, approve=action == "approve", by=BY
        )
        return {"message": message}

    # -- memory and workspace ---------------------------------------------------------------

    async def memory(self, request: web.Request) -> Any:
        workspace = self._gateway.settings.workspace_dir
        files = await asyncio.to_thread(workspace_listing, workspace)
        edits = await self._gateway.store.audit.recent(EDITS_SHOWN, kind="workspace-edited")
        return {
            "files": [
                {"name": f.name, "kind": f.kind, "size": f.size, "modified": f.modified}
                for f in files
            ],
            "edits": [{"at": e.at, "by": e.sender_id, "path": e.detail.get("path")} for e in edits],
        }

    async def diff(self, request: web.Request) -> Any:
        """What saving ``text`` would change in the file as it is now: the editor's text
        (made from the version ``base``, ``base_text``) merged with what changed the file
        since, as the save would merge it; or the conflicts the owner decides first."""
        body = await self._body(request)
        name, text = self._text(body, "name"), body.get("text")
        if not isinstance(text, str):
            raise BadRequest("text is missing")
        current = await asyncio.to_thread(
            read_workspace, self._gateway.settings.workspace_dir, name
        )
        if current is None:
            return _error(404, "not a bootstrap, memory or skill file")
        base = body.get("base")
        base = base if isinstance(base, str) and base else current.digest
        merged = rebased(current, text, base=base, base_text=_optional(body, "base_text"))
        answer: dict[str, Any] = {
            "name": name,
            "digest": current.digest,
            "changed_since": base != current.digest,
        }
        if answer["changed_since"]:
            answer["now"] = current.text  # what the merged text is made on, from here on
        if merged.text is None:
            return answer | {"parts": _parts(merged)}
        lines = difflib.unified_diff(
            current.text.splitlines(keepends=True),
            merged.text.splitlines(keepends=True),
            fromfile=f"{name} (now)",
            tofile=f"{name} (yours)",
        )
        return answer | {
            "diff": "".join(line if line.endswith("\n") else line + "\n" for line in lines),
            "text": merged.text,
            "merged": merged.text != text,
        }

    async def save(self, request: web.Request) -> Any:
        body = await self._body(request)
        name, base, text = self._text(body, "name"), self._text(body, "base"), body.get("text")
        if not isinstance(text, str):
            raise BadRequest("text is missing")
        base_text = _optional(body, "base_text")
        try:
            saved = await self._gateway.save_workspace_file(
                name, text, base=base, base_text=base_text, by=BY
            )
        except NotEditable as exc:
            return _error(404, str(exc))
        except WorkspaceConflict as exc:
            return web.json_response(
                {
                    "error": f"{name} changed since you opened it (the assistant may have added "
                    "a note), in a part you changed too: decide what stays, then review again.",
                    "current": {"text": exc.current.text, "digest": exc.current.digest},
                    "parts": _parts(exc.merge),
                },
                status=409,
            )
        message = f"Saved {name}."
        if saved.text != text:
            message = f"Saved {name}, with the changes made to it since you opened it kept."
        return {"name": saved.name, "digest": saved.digest, "text": saved.text, "message": message}

    # -- jobs, usage, health ----------------------------------------------------------------

    async def jobs(self, request: web.Request) -> Any:
        return await jobs.listing(self._gateway)

    async def change_job(self, request: web.Request) -> Any:
        action = JOB_ACTIONS.get(request.match_info["action"])
        if action is None:
            return _error(404, "action is pause, resume, run or delete")
        job_id = request.match_info["id"]
        if not await self._gateway.change_job(job_id, action, by=BY):
            return _error(409, f"job {job_id} cannot be {_done(action)} (gone, or already so)")
        return {"message": f"Job {job_id} {_done(action)}."}

    async def change_heartbeat(self, request: web.Request) -> Any:
        action = HEARTBEAT_ACTIONS.get(request.match_info["action"])
        if action is None:
            return _error(404, "action is pause, resume or run")
        if not await self._gateway.change_heartbeat(action, by=BY):
            return _error(409, "the heartbeat is off (heartbeat.enabled)")
        return {"message": f"Heartbeat {_done(action)}."}

    async def usage(self, request: web.Request) -> Any:
        try:
            days = max(1, min(365, int(request.query.get("days", usage.DAYS))))
        except ValueError:
            raise BadRequest("days is a number") from None
        return await usage.report(self._gateway, days=days)

    async def health(self, request: web.Request) -> Any:
        return await health.report(self._gateway)

    # -- the event stream -------------------------------------------------------------------

    async def events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        self._prepare(request, response)
        await response.prepare(request)
        self.streams += 1
        self.unwatched.clear()
        sent: dict[str, Any] | None = None
        quiet = 0.0
        try:
            while not self._closing.is_set() and not _gone(request):
                pulse = await self.pulse()
                if pulse != sent:
                    await response.write(f"event: pulse\ndata: {json.dumps(pulse)}\n\n".encode())
                    sent, quiet = pulse, 0.0
                elif quiet >= KEEPALIVE_SECONDS:
                    await response.write(b": still here\n\n")
                    quiet = 0.0
                await waited(self._closing.wait(), PULSE_SECONDS)
                quiet += PULSE_SECONDS
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the page went away (hidden, closed, navigated)
        finally:
            self.streams -= 1
            if not self.streams:
                self.unwatched.set()
        return response

    async def pulse(self) -> dict[str, Any]:
        """What the pages watch: counts for the navigation's badges and a signature per
        topic (a section reloads when its own moves)."""
        gateway = self._gateway
        store = gateway.store
        work = gateway.work_in_progress()
        waiting = await store.approval_requests.pending()
        pairing = [r for r in await store.pairings.listing() if r.state == "pending"]
        down = sorted(
            name
            for name, channel in gateway.channels.items()
            if isinstance(channel, SupportsHealth) and not channel.health().connected
        )
        schedule = gateway.schedule() or []
        return {
            "running": work.running_turns,
            "approvals": len(waiting),
            "pairing": len(pairing),
            "problems": len(down),
            "topics": {
                "conversations": [await store.history.last_activity(), work.running_turns],
                "approvals": [r.id for r in waiting],
                "people": [r.code for r in pairing],
                "jobs": [[i.id, i.next_run.timestamp() if i.next_run else None] for i in schedule],
                "health": [down, work.running_turns, work.queued_messages],
            },
        }


def _gone(request: web.Request) -> bool:
    """The page went away (hidden, closed, navigated): stop looking for it at once."""
    transport = request.transport
    return transport is None or transport.is_closing()


def _page(name: str) -> Handler:
    section = next(s for s in SECTIONS if s.name == name)

    async def serve(request: web.Request) -> web.StreamResponse:
        return section_page(section)

    return serve


def _done(action: str) -> str:
    return {"pause": "paused", "resume": "resumed", "run": "started", "delete": "deleted"}[action]


def _optional(body: dict[str, Any], field: str) -> str | None:
    value = body.get(field)
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"{field} is text")
    return value


def _parts(merge: Merge) -> list[dict[str, str]]:
    """A merge as the page shows it: merged text as ``{"text"}``, each conflict as
    ``{"base", "mine", "theirs"}`` (the file's lines before, the owner's, the file's now)."""
    return [
        {"base": p.base, "mine": p.mine, "theirs": p.theirs}
        if isinstance(p, Conflict)
        else {"text": p}
        for p in merge.parts
    ]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
