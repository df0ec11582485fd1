"""Several agents on one gateway: ``[agents.<name>]`` profiles and ``[[routes]]``.

The top-level settings describe the default agent, ``main``. Every other agent has its own
workspace (bootstrap files, memory, skills), may use another model, persona and tool set,
and never shares sessions, memory or history with another agent. Routes are tried in order;
the first that matches picks the agent, and ``main`` takes the rest.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from gateway.config.channels import StrList
from gateway.config.llm import FallbackModel, model_base_url

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class AgentProfile(BaseModel):
    """One more agent. Unset fields inherit from the top-level (``main``) settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None  # the persona's name in its identity block
    description: str = ""  # one line other agents see (default: the persona's first line)
    persona: str = ""  # extra lines for its identity (tone, role)
    workspace: Path | None = None  # default: $SWITCHBOARD_HOME/agents/<key>/workspace
    provider: Literal["openai", "anthropic"] | None = None  # default: llm.provider
    model: str | None = None  # default: llm.model
    base_url: str | None = None  # default: llm.base_url
    api_key: SecretStr | None = None  # default: llm.api_key
    fallbacks: tuple[FallbackModel, ...] | None = None  # default: llm.fallbacks; [] for none
    safe_mode: bool | None = None  # default: tools.safe_mode
    deny_tools: tuple[str, ...] = ()  # tools this agent never offers
    may_message: tuple[str, ...] = ()  # agents it may message with send_to_agent ("*": all)
    daily_usd: float = Field(default=0.0, ge=0)
    monthly_usd: float = Field(default=0.0, ge=0)

    @field_validator("base_url")
    @classmethod
    def _url_with_scheme(cls, value: str | None, info: ValidationInfo) -> str | None:
        return model_base_url(value, info.data.get("provider"))


class RouteRule(BaseModel):
    """Send matching messages to ``agent``. Every given field must match."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str  # required: the agent that takes matching messages
    channel: str | None = None
    chat: str | None = None
    thread: str | None = None
    sender: str | None = None
    mentioned: bool | None = None

    @field_validator("chat", "thread", "sender", mode="before")
    @classmethod
    def _as_text(cls, value: object) -> object:
        return None if value is None else str(value)


def valid_agent_name(name: str) -> bool:
    return bool(_NAME.match(name))


class AgentsSection(BaseModel):
    """``[agent_messages]``: messages between agents (``send_to_agent``): how many a
    conversation may pass on, and what the default agent (``main``) may send and shows
    the others; each other agent's own are its ``[agents.<name>]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_hops: int = Field(default=6, ge=1, le=50)  # agent-to-agent messages per conversation
    main_may_message: StrList = ()  # agents the default agent may message ("*": all)
    main_description: str = ""  # one line other agents see about the default agent
