"""A small CalDAV client over aiohttp: the account's calendars, the events of a time range,
and one event written or deleted.

Only what the ``calendar`` tool needs of RFC 4791 and RFC 6638: discovery (the URL's own
calendar, or ``current-user-principal`` → ``calendar-home-set`` → its calendars, through
``/.well-known/caldav`` when the root does not say; whether it schedules, from the DAV
header of OPTIONS), ``calendar-query`` REPORTs (a time
range, or one UID), and PUT / DELETE guarded by the event's ETag, so a change made meanwhile
on another device is never overwritten. Every request is asynchronous (nothing blocks the
event loop) and carries the account's login; XML answers are parsed without entities or
network access. The server is the owner's own configuration, so its addresses are not
checked against the public-address guard of ``web_fetch``.
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import aiohttp
from lxml import etree

from gateway.config.integrations import CalendarSettings
from gateway.core.system.bodies import read_capped

DAV = "DAV:"
CALDAV = "urn:ietf:params:xml:ns:caldav"
NS = {"d": DAV, "c": CALDAV}
DISCOVERY_SECONDS = 600.0  # calendars found are used this long before asking again
MAX_RESPONSE_BYTES = 20_000_000


class CalendarError(Exception):
    """The calendar server could not do what was asked; the message says why."""


class CalendarChanged(CalendarError):
    """The event changed (or appeared) on the server since it was read."""


@dataclass(frozen=True, slots=True)
class Calendar:
    name: str  # the display name, else the last part of its path
    url: str  # the collection's absolute URL, ending in "/"


@dataclass(frozen=True, slots=True)
class Stored:
    """One calendar object as the server holds it."""

    calendar: Calendar
    url: str  # absolute
    etag: str | None
    ical: str


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    url: str  # where it came from, after redirects
    body: bytes
    dav: str = ""  # the DAV header: what the server supports (RFC 4918, RFC 6638)


@dataclass(frozen=True, slots=True)
class Account:
    calendars: tuple[Calendar, ...]
    addresses: frozenset[str]  # the account's own calendar user addresses, lower-case
    # The server delivers invitations and changes to attendees itself (RFC 6638 implicit
    # scheduling: ``calendar-auto-schedule`` in its DAV header). Radicale, for one, does not:
    # an attendee is then only written on the event, and nobody is told.
    schedules: bool = False


def _propfind(*props: str) -> bytes:
    body = "".join(f"<{p}/>" for p in props)
    return (
        f'<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="{DAV}" xmlns:c="{CALDAV}">'
        f"<d:prop>{body}</d:prop></d:propfind>"
    ).encode()


def _query(filter_xml: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="utf-8"?><c:calendar-query xmlns:d="{DAV}" '
        f'xmlns:c="{CALDAV}"><d:prop><d:getetag/><c:calendar-data/></d:prop><c:filter>'
        f'<c:comp-filter name="VCALENDAR"><c:comp-filter name="VEVENT">{filter_xml}'
        f"</c:comp-filter></c:comp-filter></c:filter></c:calendar-query>"
    ).encode()


def _xml_text(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def utc_stamp(moment: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(moment))


class CalDav:
    """One CalDAV account (``[calendar]``)."""

    def __init__(self, settings: CalendarSettings) -> None:
        assert settings.url is not None  # built only when configured
        self._settings = settings
        self._url = settings.url if settings.url.endswith("/") else settings.url + "/"
        self._account: tuple[float, Account] | None = None
        self._lock = asyncio.Lock()

    @property
    def url(self) -> str:
        return self._url

    # -- discovery ----------------------------------------------------------------------

    async def account(self) -> Account:
        """The account's calendars (of events) and addresses, found once in a while."""
        async with self._lock:
            now = time.monotonic()
            if self._account is not None and now - self._account[0] < DISCOVERY_SECONDS:
                return self._account[1]
            async with self._session() as http:
                account = await self._discover(http)
            self._account = (now, account)
            return account

    async def _discover(self, http: aiohttp.ClientSession) -> Account:
        props = ("d:resourcetype", "d:displayname", "d:current-user-principal")
        found = await self._props(http, self._url, props, depth="0")
        here = found[0] if found else None
        if here is not None and _is_calendar(here[1]):
            principal = _href(here, "d:current-user-principal")
            addresses = await self._principal_addresses(http, principal)
            calendar = _calendar(here[0], here[1])
            return Account((calendar,), addresses, await self._schedules(http, calendar))
        principal = None if here is None else _href(here, "d:current-user-principal")
        if principal is None:  # the root does not say: ask the well-known address
            well_known = urljoin(self._url, "/.well-known/caldav")
            found = await self._props(http, well_known, ("d:current-user-principal",), depth="0")
            principal = next((_href(f, "d:current-user-principal") for f in found), None)
        if principal is None:
            raise CalendarError(
                f"{self._url} is neither a calendar nor a CalDAV server that names the "
                "account's calendars (no current-user-principal); set calendar.url to the "
                "server's CalDAV address or to one calendar's address"
            )
        principal_props = ("c:calendar-home-set", "c:calendar-user-address-set")
        answer = await self._props(http, principal, principal_props, depth="0")
        homes = [h for found in answer for h in _hrefs(found, "c:calendar-home-set")]
        addresses = frozenset(a for _, p in answer for a in _addresses(p))
        if not homes:
            raise CalendarError(f"the server names no calendar home for {principal}")
        calendars: list[Calendar] = []
        wanted = ("d:resourcetype", "d:displayname", "c:supported-calendar-component-set")
        for home in homes:
            for url, found in await self._props(http, home, wanted, depth="1"):
                if _is_calendar(found) and _holds_events(found):
                    calendars.append(_calendar(url, found))
        if not calendars:
            raise CalendarError(f"the account has no calendar of events under {homes[0]}")
        schedules = await self._schedules(http, calendars[0])
        return Account(tuple(calendars), addresses | self._login_address(), schedules)

    async def _schedules(self, http: aiohttp.ClientSession, calendar: Calendar) -> bool:
        """Whether the server schedules (RFC 6638 section 2: a server that does names
        ``calendar-auto-schedule`` in the DAV header of OPTIONS on its calendars)."""
        try:
            reply = await self._request(http, "OPTIONS", calendar.url, None, {})
        except CalendarError:
            return False  # not said: nothing is claimed of it
        features = {f.strip().lower() for f in reply.dav.split(",")}
        return reply.status < 300 and "calendar-auto-schedule" in features

    async def _principal_addresses(
        self, http: aiohttp.ClientSession, principal: str | None
    ) -> frozenset[str]:
        if principal is None:
            return self._login_address()
        answer = await self._props(http, principal, ("c:calendar-user-address-set",), depth="0")
        return frozenset(a for _, p in answer for a in _addresses(p)) | self._login_address()

    def _login_address(self) -> frozenset[str]:
        name = self._settings.username.strip().lower()
        return frozenset({name}) if "@" in name else frozenset()

    # -- events ---------------------------------------------------------------------------

    async def events(self, calendar: Calendar, start: float, end: float) -> list[Stored]:
        """Events with an occurrence between ``start`` and ``end`` (Unix times); a recurring
        event comes once, whole (the caller expands it)."""
        time_range = f'<c:time-range start="{utc_stamp(start)}" end="{utc_stamp(end)}"/>'
        async with self._session() as http:
            return await self._report(http, calendar, _query(time_range))

    async def find(self, calendar: Calendar, uid: str) -> Stored | None:
        match = (
            '<c:prop-filter name="UID"><c:text-match collation="i;octet">'
            f"{_xml_text(uid)}</c:text-match></c:prop-filter>"
        )
        async with self._session() as http:
            found = await self._report(http, calendar, _query(match))
        return found[0] if found else None

    async def create(self, calendar: Calendar, uid: str, ical: str) -> None:
        """A new event at ``<calendar>/<uid>.ics``; :class:`CalendarChanged` when one is there."""
        url = urljoin(calendar.url, _safe_name(uid) + ".ics")
        await self._write("PUT", url, ical, {"If-None-Match": "*"})

    async def replace(self, stored: Stored, ical: str) -> None:
        await self._write("PUT", stored.url, ical, _if_match(stored))

    async def delete(self, stored: Stored) -> None:
        await self._write("DELETE", stored.url, None, _if_match(stored))

    # -- HTTP -----------------------------------------------------------------------------

    def _session(self) -> aiohttp.ClientSession:
        settings = self._settings
        secret = settings.password.get_secret_value() if settings.password else ""
        headers = {"User-Agent": "Switchboard"}
        if settings.username:
            login = base64.b64encode(f"{settings.username}:{secret}".encode()).decode()
            headers["Authorization"] = f"Basic {login}"
        elif secret:
            headers["Authorization"] = f"Bearer {secret}"
        timeout = aiohttp.ClientTimeout(total=settings.timeout_seconds)
        return aiohttp.ClientSession(headers=headers, timeout=timeout)

    async def _props(
        self, http: aiohttp.ClientSession, url: str, props: tuple[str, ...], *, depth: str
    ) -> list[tuple[str, Any]]:
        reply = await self._request(http, "PROPFIND", url, _propfind(*props), {"Depth": depth})
        if reply.status == 404:
            return []
        if reply.status != 207:
            raise CalendarError(f"PROPFIND {url} answered HTTP {reply.status}")
        return [(urljoin(reply.url, href), prop) for href, prop in _responses(reply.body)]

    async def _report(
        self, http: aiohttp.ClientSession, calendar: Calendar, query: bytes
    ) -> list[Stored]:
        reply = await self._request(http, "REPORT", calendar.url, query, {"Depth": "1"})
        if reply.status != 207:
            raise CalendarError(f"the calendar {calendar.name!r} answered HTTP {reply.status}")
        found = []
        for href, prop in _responses(reply.body):
            data = prop.find("c:calendar-data", NS)
            if data is None or not (data.text or "").strip():
                continue
            etag = prop.findtext("d:getetag", None, NS)
            found.append(Stored(calendar, urljoin(reply.url, href), etag, data.text))
        return found

    async def _write(
        self, method: str, url: str, ical: str | None, headers: dict[str, str]
    ) -> None:
        body = None if ical is None else ical.encode()
        if body is not None:
            headers = {**headers, "Content-Type": "text/calendar; charset=utf-8"}
        async with self._session() as http:
            reply = await self._request(http, method, url, body, headers)
        status = reply.status
        if status == 412:
            raise CalendarChanged(
                "the event was changed on the server since it was read (or already exists)"
            )
        if status == 404 and method == "DELETE":
            raise CalendarChanged("the event is no longer on the server")
        if status not in (200, 201, 204):
            raise CalendarError(f"{method} {url} answered HTTP {status}")

    async def _request(
        self,
        http: aiohttp.ClientSession,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
    ) -> Reply:
        if body is not None and "Content-Type" not in headers:
            headers = {**headers, "Content-Type": "application/xml; charset=utf-8"}
        try:
            async with http.request(method, url, data=body, headers=headers) as response:
                if response.status == 401:
                    raise CalendarError(
                        "the calendar server refused the login (HTTP 401); check "
                        "calendar.username and calendar.password (an app password for "
                        "iCloud, Fastmail and Nextcloud with two-factor sign-in)"
                    )
                if response.status == 403:
                    raise CalendarError(
                        f"the calendar server does not let this account {method} {url} "
                        "(HTTP 403; a calendar shared read-only?)"
                    )
                data = await read_capped(response.content, MAX_RESPONSE_BYTES)
                if data is None:
                    raise CalendarError(f"the answer of {url} is too large")
                dav = ", ".join(response.headers.getall("DAV", []))
                return Reply(response.status, str(response.url), data, dav)
        except (aiohttp.ClientError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            raise CalendarError(f"cannot reach the calendar server at {url}: {reason}") from None


def _if_match(stored: Stored) -> dict[str, str]:
    return {"If-Match": stored.etag} if stored.etag else {}


def _safe_name(uid: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "-" for c in uid)[:200] or "event"


_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def _responses(body: bytes) -> list[tuple[str, Any]]:
    """(href, the <prop> of its 200 propstat) of each response of a multistatus."""
    try:
        root = etree.fromstring(body, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise CalendarError(f"the server's answer is not XML: {exc}") from None
    found = []
    for response in root.iterfind("d:response", NS):
        href = response.findtext("d:href", None, NS)
        if not href:
            continue
        for propstat in response.iterfind("d:propstat", NS):
            status = propstat.findtext("d:status", "", NS)
            prop = propstat.find("d:prop", NS)
            if prop is not None and " 200 " in f"{status} ":
                found.append((href.strip(), prop))
    return found


def _href(found: tuple[str, Any], name: str) -> str | None:
    hrefs = _hrefs(found, name)
    return hrefs[0] if hrefs else None


def _hrefs(found: tuple[str, Any], name: str) -> list[str]:
    """The addresses a property names, absolute (relative to the resource that has it)."""
    url, prop = found
    return [urljoin(url, href) for href in _texts(prop, name)]


def _texts(prop: Any, name: str) -> list[str]:
    element = prop.find(name, NS)
    if element is None:
        return []
    return [h.text.strip() for h in element.iterfind("d:href", NS) if h.text]


def _addresses(prop: Any) -> list[str]:
    """The account's email addresses (its ``mailto:`` calendar user addresses), lower-case."""
    found = (unquote(a).strip().lower() for a in _texts(prop, "c:calendar-user-address-set"))
    return [a.removeprefix("mailto:") for a in found if a.startswith("mailto:")]


def _is_calendar(prop: Any) -> bool:
    return prop.find("d:resourcetype/c:calendar", NS) is not None


def _holds_events(prop: Any) -> bool:
    components = prop.find("c:supported-calendar-component-set", NS)
    if components is None or len(components) == 0:
        return True  # not said: any component
    return any(c.get("name") == "VEVENT" for c in components.iterfind("c:comp", NS))


def _calendar(url: str, prop: Any) -> Calendar:
    name = (prop.findtext("d:displayname", "", NS) or "").strip()
    path = urlsplit(url).path.rstrip("/")
    return Calendar(name or unquote(path.rsplit("/", 1)[-1]) or url, url.rstrip("/") + "/")
