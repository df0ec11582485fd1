"""Configuration: one typed tree, read from env vars and ``$SWITCHBOARD_HOME/config.toml``.

Source order (first wins): explicit arguments, then ``SWITCHBOARD_*`` environment variables
(nested with ``__``: ``SWITCHBOARD_LLM__MODEL``), then ``$SWITCHBOARD_HOME/.env``, then secret
files, then ``config.toml``, then defaults (:mod:`gateway.config.sources`). Unknown keys are
errors, so a typo fails at start naming the key, who set it and the key probably meant
(:mod:`gateway.config.explain`). Secrets are :class:`~pydantic.SecretStr` and never print.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from gateway.config.agents import (
    AgentProfile,
    AgentsSection,
    RouteRule,
    valid_agent_name,
)
from gateway.config.channels import ChannelSection, StrList, WebSettings, address_role
from gateway.config.connect import ApiSettings, HookSettings, parse_target, valid_hook_name
from gateway.config.explain import ENV_PREFIX, env_name, settings_error, validation_error
from gateway.config.integrations import CalendarSettings, ImagesSettings
from gateway.config.llm import LLMSettings, repeated_model
from gateway.config.mcp import McpSettings
from gateway.config.media import DocumentSettings, VoiceSettings
from gateway.config.memory import MemorySettings
from gateway.config.people import (
    PersonSettings,
    SessionSettings,
    UserSettings,
    configured_addresses,
    hours_range,
    valid_person_key,
    valid_person_name,
)
from gateway.config.plugins import channel_sections_model, plugin_problems
from gateway.config.skills import SkillSettings
from gateway.config.sources import (
    DEFAULT_HOME,
    check_dotenv,
    describe,
    dotenv_api_key,
    home_from,
    read_toml,
    sources_for,
)
from gateway.config.toml.moves import move_keys, refuse_moved, report_unknown_variables
from gateway.core.addressing import DEFAULT_AGENT
from gateway.core.channel import ChannelContext
from gateway.core.principal import Role
from gateway.core.system.connections import ConnectionLimits

if TYPE_CHECKING:
    from gateway.core.system.mail import SendMailSettings


__all__ = ["DEFAULT_HOME", "ENV_PREFIX", "LLMSettings", "Settings", "env_name", "load_settings"]


class Section(BaseModel):
    """Base of every config section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentSettings(Section):
    """How one turn runs."""

    name: str = "Switchboard"
    max_iterations: int = Field(default=20, ge=1, le=200)
    turn_timeout_seconds: float = Field(default=600.0, gt=0)
    bootstrap_max_chars: int = Field(default=12_000, ge=500)
    tool_result_max_chars: int = Field(default=12_000, ge=500)
    history_max_messages: int = Field(default=200, ge=4)
    default_reply: str = "I have nothing to add to that."
    max_resume_attempts: int = Field(default=2, ge=0, le=10)
    # A message that says only one of these, while a turn runs, stops it like /stop ([]: off).
    stop_phrases: StrList = (
        "stop",
        "stop it",
        "stop that",
        "cancel",
        "cancel that",
        "abort",
        "halt",
        "never mind",
        "nevermind",
    )
    max_turn_tokens: int = Field(default=600_000, ge=1_000)
    review_retries: int = Field(default=2, ge=0, le=5)  # termination review re-prompts
    llm_review: bool = False  # ask the model to review answers the rules passed
    verify_claims: Literal["model", "rules", "off"] = "model"
    reflection: bool = True  # after long turns or "remember ...": update memory in the background
    session_reset: Literal["never", "daily", "idle"] = "never"
    idle_reset_minutes: int = Field(default=240, ge=5)


class LimitSettings(Section):
    """Concurrency caps (how much runs at once), and what one person may use."""

    max_concurrent_turns: int = Field(default=64, ge=1)
    max_concurrent_llm_calls: int = Field(default=64, ge=1)
    max_concurrent_tools: int = Field(default=32, ge=1)
    # Per person over a rolling window; the owner is exempt; 0 turns a limit off.
    user_daily_tokens: int = Field(default=1_000_000, ge=0)
    user_turns_per_hour: int = Field(default=60, ge=0)
    # Money caps in US dollars at the prices of [llm.prices] (gateway/runtime/people/spend.py);
    # a day and a month are the owner's (user.timezone); 0 turns a cap off.
    gateway_daily_usd: float = Field(default=0.0, ge=0)
    gateway_monthly_usd: float = Field(default=0.0, ge=0)
    person_daily_usd: float = Field(default=0.0, ge=0)
    person_monthly_usd: float = Field(default=0.0, ge=0)
    background_daily_usd: float = Field(default=0.0, ge=0)
    # The gateway's HTTP servers (gateway/core/system/connections.py): the web server,
    # Slack's Events API, Telegram's webhook.
    http_header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    http_connections: int = Field(default=512, ge=8)
    http_connections_per_client: int = Field(default=64, ge=1)

    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(
            head_seconds=self.http_header_timeout_seconds,
            per_server=self.http_connections,
            per_client=self.http_connections_per_client,
        )


class ExecSettings(Section):
    """``[tools.exec]``: the ``exec`` tool, shell commands in the workspace, in a bubblewrap
    sandbox where it works (docs/security.md); the owner and admins only, by default."""

    enabled: bool = True
    timeout_seconds: float = Field(default=60.0, gt=0, le=3_600)
    max_output_chars: int = Field(default=10_000, ge=100)
    extra_deny_patterns: tuple[str, ...] = ()
    sandbox: Literal["auto", "bwrap", "off"] = "auto"
    network: bool = False  # only inside the sandbox; without it commands share the host's
    max_processes: int = Field(default=256, ge=8)  # per command, threads included (sandbox)
    max_memory_mb: int = Field(default=2_048, ge=64)  # address space per process (sandbox)
    max_file_mb: int = Field(default=1_024, ge=1)  # largest file a command may write (sandbox)
    tmp_mb: int = Field(default=256, ge=1)  # size of the sandbox's private /tmp (in memory)


class WebToolSettings(Section):
    """``[tools.web]``: web_search and web_fetch (the HTTP server is the separate ``[web]``)."""

    enabled: bool = True
    # Opt-in internal hosts web_fetch may reach: names ("wiki.lan") or IPs/networks
    # ("10.0.0.5", "192.168.1.0/24"). Empty: public addresses only.
    allow_private_hosts: StrList = ()
    timeout_seconds: float = Field(default=20.0, gt=0, le=300)
    max_bytes: int = Field(default=2_000_000, ge=10_000, le=50_000_000)
    max_redirects: int = Field(default=5, ge=0, le=10)
    page_token_budget: int = Field(default=2_500, ge=250)  # longer pages are condensed
    chunk_tokens: int = Field(default=3_000, ge=500)
    max_chunks: int = Field(default=8, ge=1, le=64)  # summarizer calls per page, at most
    summarize_concurrency: int = Field(default=4, ge=1, le=32)
    search_timeout_seconds: float = Field(default=15.0, gt=0, le=120)
    search_max_results: int = Field(default=5, ge=1, le=10)
    # web_fetch renders pages in headless Chromium (docs/security.md, "Web tools").
    browser: Literal["auto", "always", "off"] = "auto"
    browser_path: str | None = None
    browser_timeout_seconds: float = Field(default=20.0, gt=0, le=300)
    browser_max_bytes: int = Field(default=20_000_000, ge=100_000, le=500_000_000)
    browser_memory_mb: int = Field(default=1_024, ge=512)


class BrowserToolSettings(Section):
    """``[tools.browser]``: the ``browser`` tool, acting on web pages (docs/tools.md). Its pages
    reach what ``[tools.web]`` allows (``allow_private_hosts``) with the same Chromium
    (``browser_path``, ``browser_memory_mb``); its cookies are kept in the profiles the owner
    makes (``switchboard browser create``)."""

    enabled: bool = True
    # Sites where an action that commits something (a form sent, a purchase, a download)
    # needs no approval: host names, each with its subdomains ("shop.example.com").
    allowed_sites: StrList = ()
    max_steps_per_turn: int = Field(default=30, ge=1, le=500)  # browser calls in one turn
    step_timeout_seconds: float = Field(default=20.0, gt=0, le=300)
    step_max_bytes: int = Field(default=20_000_000, ge=100_000, le=500_000_000)
    idle_minutes: float = Field(default=30.0, gt=0, le=1_440)  # then a session closes (saved)
    max_sessions: int = Field(default=4, ge=1, le=64)  # open at once; the oldest closes first
    snapshot_max_chars: int = Field(default=8_000, ge=1_000, le=100_000)  # a longer tree is cut

    @field_validator("allowed_sites", mode="after")
    @classmethod
    def _sites(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(site_name(entry) for entry in value)


def site_name(entry: str) -> str:
    """A site of ``allowed_sites`` as a bare host name: ``https://Shop.example.com/`` and
    ``*.shop.example.com`` are ``shop.example.com``."""
    text = entry.strip().lower()
    if "://" in text:
        text = text.split("://", 1)[1].split("/", 1)[0]
    host = text.rstrip("/").removeprefix("*.").strip(".")
    if not host or any(c in host for c in "/ :@?#*"):
        raise ValueError(f"{entry!r} is not a site: use a host name such as shop.example.com")
    return host


# What members, and everyone in groups, may not use unless the owner says otherwise
# (tools.policy): the one place these defaults are written (agent/policy.py uses them too).
MEMBER_DENY = ("exec", "write_file", "edit_file", "spawn", "calendar", "generate_image", "browser")
GROUP_DENY = (
    "exec",
    "write_file",
    "edit_file",
    "cron",
    "spawn",
    "memory_write",
    "memory_patch",
    "browser",
)


class ToolPolicySettings(Section):
    """``[tools.policy]``: who may use which tool (see docs/security.md)."""

    member_deny: StrList = MEMBER_DENY
    group_deny: StrList = GROUP_DENY
    admin_deny: StrList = ()
    # After reading outside content, side effects (and fetches of addresses the turn has not
    # seen) wait for an approval (agent/policy.py).
    taint_guard: bool = True


class ToolSettings(Section):
    """``[tools]``: what the agent's tools may do: the safe mode and approval requests here,
    each tool's own settings in the tables below (docs/tools.md)."""

    safe_mode: bool = False  # turns off exec and file writes (memory tools stay)
    # A side effect the policy refuses but the owner could allow (docs/security.md, Approvals).
    approvals: Literal["ask", "refuse"] = "refuse"
    approval_timeout_seconds: float = Field(default=900.0, ge=30, le=604_800)
    exec: ExecSettings = ExecSettings()
    policy: ToolPolicySettings = ToolPolicySettings()
    web: WebToolSettings = WebToolSettings()
    browser: BrowserToolSettings = BrowserToolSettings()
    documents: DocumentSettings = DocumentSettings()


class HeartbeatSettings(Section):
    """``[heartbeat]``: periodic check-ins driven by HEARTBEAT.md."""

    enabled: bool = True
    interval_seconds: int = Field(default=1_800, ge=60)
    quiet_hours: str = ""  # "22:00-07:00" in user.timezone; empty: none
    target: str | None = Field(
        default=None,
        description="\"channel:chat_id\", a chat of the owner's; unset: the owner's person's home, else "
        "their last direct chat (a platform's over the terminal's or web chat's)",
    )
    daily_token_budget: int = Field(default=100_000, ge=0)

    @field_validator("quiet_hours")
    @classmethod
    def _hours_range(cls, value: str) -> str:
        return hours_range(value)

    @field_validator("target")
    @classmethod
    def _chat(cls, value: str | None) -> str | None:
        """A chat of a channel there is (a check-in to "nonsense" would wait forever)."""
        if value is None or not value.strip():
            return None
        parse_target(value)
        return value.strip()


class SchedulerSettings(Section):
    """``[scheduler]``: scheduled jobs and background tasks."""

    catchup_jitter_seconds: float = Field(default=30.0, ge=0)
    max_subagents: int = Field(default=3, ge=1, le=32)
    subagent_timeout_seconds: float = Field(default=900.0, gt=0)
    max_jobs_per_user: int = Field(default=50, ge=1)
    # Members (not owner or admins) may schedule reminders and jobs for their own direct
    # chat, at most this many each (their jobs' model calls count against their allowance).
    max_jobs_per_member: int = Field(default=10, ge=0)


class StorageSettings(Section):
    """``[storage]``: the database, and how long records of finished work are kept (pruned
    once a day). Conversation history, memory and the user's files are never pruned."""

    # Unset: the SQLite file in the data directory. "postgresql://user:pass@host:5432/db":
    # that PostgreSQL database (the same URL on every node of a cluster; see docs/scaling.md).
    url: SecretStr | None = None
    # FULL survives power loss; NORMAL survives process crashes only.
    synchronous: Literal["full", "normal"] = "full"
    # A schema change at start: the SQLite file is copied to backups/ first, always. A
    # PostgreSQL database is backed up by its owner: "confirm" waits for their word
    # (`switchboard upgrade --i-have-a-backup`), "auto" migrates at start.
    migrate: Literal["confirm", "auto"] = "confirm"
    outbox_max_attempts: int = Field(default=8, ge=1)
    # At least a week: the inbound dedup window, and time for an interrupted turn to resume.
    retention_days: int = Field(default=30, ge=7, le=36_500)
    audit_retention_days: int = Field(default=180, ge=7, le=36_500)
    # At least the control center's 30 days of token usage.
    usage_retention_days: int = Field(default=90, ge=31, le=36_500)

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        scheme = value.get_secret_value().strip().split("://", 1)[0].lower()
        if scheme not in ("postgresql", "postgres"):
            raise ValueError("use a postgresql:// URL, or leave it unset for the SQLite file")
        return SecretStr(value.get_secret_value().strip())

    def database_url(self) -> str | None:
        """The PostgreSQL URL, or ``None`` for the SQLite file."""
        return None if self.url is None else self.url.get_secret_value()


class NodeSettings(Section):
    """``[node]``: this process as a node of a cluster (``storage.url`` on PostgreSQL)."""

    # Unset: host name and process id. Shown by `switchboard status`; unique per node.
    name: str | None = None


class LoggingSettings(Section):
    """``[logging]``: how log lines are written (console and ``data/logs/switchboard.log``)."""

    format: Literal["text", "json"] = "text"


# The settings root is these sections, then one per registered channel, then the rest: split
# in two around the channels only so that every section keeps its place (in the reference,
# docs/configuration.md, and in "`token` belongs in [telegram]").


class _Leading(BaseSettings):
    home: Path = DEFAULT_HOME
    workspace: Path | None = None
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    logging: LoggingSettings = LoggingSettings()

    llm: LLMSettings = LLMSettings()
    agent: AgentSettings = AgentSettings()
    limits: LimitSettings = LimitSettings()
    tools: ToolSettings = ToolSettings()
    storage: StorageSettings = StorageSettings()
    node: NodeSettings = NodeSettings()
    heartbeat: HeartbeatSettings = HeartbeatSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    user: UserSettings = UserSettings()
    people: dict[str, PersonSettings] = {}
    session: SessionSettings = SessionSettings()  # one conversation per chat, or per person
    mcp: McpSettings = McpSettings()
    skills: SkillSettings = SkillSettings()  # registries, and the secrets skills' scripts get
    voice: VoiceSettings = VoiceSettings()  # speech in and out, every channel
    memory: MemorySettings = MemorySettings()  # recall of past conversations
    calendar: CalendarSettings = CalendarSettings()  # one CalDAV account, for the owner
    images: ImagesSettings = ImagesSettings()  # pictures made on request


class _Trailing(BaseSettings):
    web: WebSettings = WebSettings()

    agents: dict[str, AgentProfile] = {}
    routes: tuple[RouteRule, ...] = ()
    agent_messages: AgentsSection = AgentsSection()

    # Other programs (docs/connect.md): signed webhooks, and the OpenAI-compatible and task API.
    hooks: dict[str, HookSettings] = {}
    api: ApiSettings = ApiSettings()


_OWN_SECTIONS = set(_Leading.model_fields) | set(_Trailing.model_fields)

if TYPE_CHECKING:  # the checked code reaches a channel's section through channel_sections()

    class _Channels(BaseSettings):
        pass

else:  # [telegram], [discord], ...: a field per plug-in (gateway/config/plugins.py)
    _Channels = channel_sections_model(BaseSettings, _OWN_SECTIONS)


class Settings(_Trailing, _Channels, _Leading):
    """The whole configuration. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    @model_validator(mode="after")
    def _known_agents(self) -> Settings:
        for key in self.agents:
            if key == DEFAULT_AGENT or not valid_agent_name(key):
                raise ValueError(
                    f"agents.{key}: agent names are lower-case letters, digits, - and _, "
                    f"and '{DEFAULT_AGENT}' is the default agent (configured at the top level)"
                )
        for key, profile in self.agents.items():
            if profile.fallbacks is None:
                continue  # llm.fallbacks, checked against llm's model
            llm = self.llm
            problem = repeated_model(
                profile.provider or llm.provider,
                profile.model or llm.model,
                profile.base_url if profile.base_url is not None else llm.base_url,
                profile.fallbacks,
            )
            if problem is not None:
                raise ValueError(f"agents.{key}.fallbacks: {problem} (the agent's own model)")
        known = {DEFAULT_AGENT, *self.agents}
        for index, route in enumerate(self.routes):
            if route.agent not in known:
                raise ValueError(
                    f"routes[{index}].agent: unknown agent {route.agent!r} (known: {', '.join(sorted(known))})"
                )
        for name, hook in self.hooks.items():
            if not valid_hook_name(name):
                raise ValueError(
                    f"hooks.{name}: hook names are up to 32 lower-case letters, digits, - and _ "
                    "(the name is the URL path /hooks/<name>)"
                )
            if hook.agent not in known:
                raise ValueError(
                    f"hooks.{name}.agent: unknown agent {hook.agent!r} (known: {', '.join(sorted(known))})"
                )
        for name, server in self.mcp.servers.items():
            unknown = sorted(set(server.agents) - known - {"*"})
            if unknown:
                raise ValueError(
                    f"mcp.servers.{name}.agents: unknown agent(s) {unknown} (known: {', '.join(sorted(known))})"
                )
        return self

    @model_validator(mode="after")
    def _people_keys(self) -> Settings:
        whose: dict[str, str] = {}  # address -> the [people] key that lists it
        for key, person in self.people.items():
            named = not valid_person_key(key)
            if named and not valid_person_name(key):
                raise ValueError(
                    f"people.{key}: a person is named '<channel>:<sender id>' "
                    '(people."telegram:123456") or by a name of lower-case letters, digits, '
                    "- and _ with their addresses in ids (people.ann)"
                )
            if named and not person.ids:
                raise ValueError(
                    f"people.{key}.ids: list the person's addresses, for example "
                    'ids = ["telegram:123456", "slack:U0123"]'
                )
            addresses = person.ids if named else (key, *person.ids)
            for address in addresses:
                if address in whose and whose[address] != key:
                    raise ValueError(
                        f"people.{key}.ids: {address} is already people.{whose[address]}'s: "
                        "an address belongs to one person"
                    )
                whose[address] = key
            if person.home is not None:
                channels = {address.split(":", 1)[0] for address in addresses}
                if person.home.split(":", 1)[0] not in channels:
                    raise ValueError(
                        f"people.{key}.home: {person.home} is on none of the person's "
                        f"channels ({', '.join(sorted(channels))})"
                    )
        return self

    @model_validator(mode="after")
    def _check_ins_go_to_the_owner(self) -> Settings:
        """``heartbeat.target`` never names a chat config says is someone else's: a check-in
        acts with the owner's rights and has the owner's memory in its prompt. A chat config
        knows nothing of is checked when a check-in is planned
        (gateway/runtime/schedule/heartbeat.py)."""
        target = self.heartbeat.target
        if target is None:
            return self
        chat = parse_target(target)
        whose = self._whose_chat(chat.channel, chat.chat_id)
        if whose is not None:
            raise ValueError(
                f"heartbeat.target: {target} is {whose}, not the owner's: a check-in acts "
                "with the owner's rights and has the owner's memory in its prompt; name a "
                "chat of the owner (their own address, like telegram:<owner id>) or leave it "
                "unset for the owner's home chat"
            )
        return self

    def _whose_chat(self, channel: str, chat_id: str) -> str | None:
        """Whose chat config says ``channel:chat_id`` is when it is not the owner's (a
        person's whose id it is, a group); None: the owner's, or config does not say."""
        sections = self.channel_sections()
        section = sections.get(channel)
        if section is None or section.lists(chat_id, section.owners):
            return None  # a local chat (the terminal, the web chat) is the owner's
        address = f"{channel}:{chat_id}"
        for key, person in self.people.items():
            addresses = configured_addresses(key, person)
            if address in addresses:
                if any(address_role(sections, a) is Role.OWNER for a in addresses):
                    return None
                name = f'"{key}"' if valid_person_key(key) else key
                return f"the chat of people.{name}"
        if section.lists(chat_id, section.admins):
            return f"an admin's direct chat ({channel}.admins)"
        if chat_id in section.allow_from:
            return f"a member's direct chat ({channel}.allow_from)"
        if chat_id in section.group_allow_from or chat_id in section.groups:
            return f"a group ({channel}.group_allow_from)"
        return None

    @property
    def timezone(self) -> str:
        """The gateway's default time zone (``user.timezone``; UTC when unset)."""
        return self.user.timezone or "UTC"

    @model_validator(mode="after")
    def _separate_credentials(self) -> Settings:
        """An API token opens only the API, the web token only the web chat and status
        page: one value used for both would let either open the other."""
        web = self.web.token.get_secret_value() if self.web.token else None
        for index, token in enumerate(self.api.tokens):
            if web and token.token.get_secret_value() == web:
                raise ValueError(
                    f"api.tokens[{index}] ({token.name}) is the web token: give the API its own"
                )
        return self

    @model_validator(mode="after")
    def _expand_paths(self) -> Settings:
        home = self.home.expanduser().resolve()
        object.__setattr__(self, "home", home)
        workspace = (self.workspace or home / "workspace").expanduser().resolve()
        object.__setattr__(self, "workspace", workspace)
        return self

    @property
    def workspace_dir(self) -> Path:
        assert self.workspace is not None  # set by _expand_paths
        return self.workspace

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"

    def agent_name(self, agent_id: str) -> str:
        """The name an agent goes by (its identity, the control center's transcripts): the
        main agent's ``agent.name``, another's ``agents.<id>.name``, else its id."""
        if agent_id == DEFAULT_AGENT:
            return self.agent.name
        profile = self.agents.get(agent_id)
        return (profile.name if profile is not None else None) or agent_id.capitalize()

    def channel_sections(self) -> dict[str, ChannelSection]:
        """The section of every registered chat channel, by channel name (its access
        settings, and what the platform does differently)."""
        return {name: getattr(self, name) for name in _Channels.model_fields}

    def speech(self) -> VoiceSettings:
        """``[voice]``, or a channel's older speech keys when only those are set (kept
        working: they now configure transcription for every channel)."""
        voice = self.voice
        for section in self.channel_sections().values():
            voice = section.speech_settings(voice)
        return voice

    def channel_context(self) -> ChannelContext:
        """What the channels know of the configuration besides their own sections."""
        return ChannelContext(
            data_dir=self.data_dir,
            workspace_dir=self.workspace_dir,
            agent_name=self.agent.name,
            web_server=self.web.enabled,
            zone=ZoneInfo(self.timezone),
            connection_limits=self.limits.connection_limits(),
        )

    def outgoing_mail(self) -> SendMailSettings | None:
        """The agent's ``send_email`` settings, from the channel section that configures
        sending mail (``[email]``); None when none does."""
        found = (section.outgoing_mail() for section in self.channel_sections().values())
        return next((mail for mail in found if mail is not None), None)

    @model_validator(mode="after")
    def _dotenv_api_key(self) -> Settings:
        """``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` written in the home's ``.env``."""
        if self.llm.resolved_api_key() is None:
            variable = "ANTHROPIC_API_KEY" if self.llm.provider == "anthropic" else "OPENAI_API_KEY"
            key = dotenv_api_key(self.home, variable)
            if key is not None:
                llm = self.llm.model_copy(update={"api_key": SecretStr(key)})
                object.__setattr__(self, "llm", llm)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return sources_for(settings_cls, init_settings, env_settings, file_secret_settings)


def load_settings(*, move: bool = True, **overrides: Any) -> Settings:
    """Read the configuration or raise :class:`ConfigError` naming the bad key and its source.

    Settings that moved (gateway/config/toml/moves.py) are moved in config.toml first, or the
    start refused; ``move=False`` refuses without changing the file (``switchboard doctor``).
    ``SWITCHBOARD_*`` variables that name no setting get a line in the log."""
    problems = plugin_problems(_OWN_SECTIONS)  # an installed channel that cannot work
    if problems:
        raise problems[0]
    home = home_from(overrides)
    config_file = home / "config.toml"
    if config_file.exists():
        read_toml(config_file)  # not UTF-8, or not TOML: refused here, naming the file
    dotenv = home / ".env"
    check_dotenv(dotenv)  # a byte that is not UTF-8, a line that does not parse: refused here
    if move:
        move_keys(home)
    else:
        refuse_moved(home)
    report_unknown_variables(home, Settings.model_fields)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise validation_error(exc, Settings, describe(home)) from exc
    except SettingsError as exc:  # an environment value the settings library cannot parse
        raise settings_error(exc) from exc
