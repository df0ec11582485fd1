"""Agent: one turn, from the user's messages to the replies to send.

It loads the session's history, writes the new user messages as the turn's first
checkpoint, builds the prompt, runs the guarded tool loop and decides what the user sees.
It never raises for a provider failure, a timeout or a bug in a tool: the user gets a clear
notice instead. Cancellation (shutdown) propagates, leaving the checkpoints for the next start to
resume. After the turn, summarization and reflection run in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Literal

from agent.approval import AwaitingApproval
from agent.compaction import Compaction, Compactor, SaveFacts
from agent.context import ContextBuilder, user_message, with_guidance
from agent.guards.cleanup import failed_attempts
from agent.guards.prompts import guidance, guidance_block
from agent.guards.trace import TurnTrace
from agent.llm.errors import LLMError
from agent.llm.metered import Charge, MeteredModel, OverAllowance, TurnUsage
from agent.llm.types import ChatMessage, SystemPrompt, ToolSpec
from agent.memory import append_note, read_note, scope_for
from agent.policy import ToolPolicy
from agent.prompt_report import Cached, PromptReport, prompt_report
from agent.reflection import current_exchange, reflect, worth_reflecting
from agent.request import TurnOutcome, TurnRequest
from agent.skills import routed_block
from agent.task_types import task_type
from agent.tools.base import Audit, Sender, ToolContext, TurnState
from agent.tools.bounds import Bounds
from agent.tools.executor import ToolExecutor
from agent.tools.find_tools import FindTools
from agent.tools.registry import ToolSource
from agent.turn.inputs import Steer, TurnInputs, TurnLimits
from agent.turn.loop import RunResult, StopReason, TurnLoop
from agent.turn.outcome import (
    INTERNAL_ERROR_NOTICE,
    TIMEOUT_NOTICE,
    decide,
    kept_answer,
    notice,
    outbound,
    provider_notice,
    stop_mark,
    stop_notice,
)
from agent.turn.scope import (
    authorising_texts,
    file_view,
    loaded_skills,
    outside_at_start,
    resumed_state,
    seen_at_start,
)
from agent.window import ContextWindow, FittedPrompt, TurnFit
from agent.workspace import Workspace
from gateway.core.messages import ChatRef, OutboundKind
from gateway.core.principal import Principal
from gateway.core.services import Services
from gateway.core.system.storage import StorageAlarm, until_stored
from gateway.core.turns import TurnKind
from gateway.store import History, MemoryEntries, NewMessage, Origin, Pins, SessionState

log = logging.getLogger(__name__)

FOLLOW_UP = "[Follow-up: the person wrote this while you were working; take it into account]"

Clock = Callable[[], datetime]


INLINE_TRACE_EVENTS = 8  # a trace this short is written on the event loop (see run_turn)


@dataclass(frozen=True, slots=True)
class AgentConfig:
    turn_timeout: float = 600.0
    history_limit: int = 200
    default_reply: str = "I have nothing to add to that."
    vision: bool = True
    reflection: bool = True
    session_reset: Literal["never", "daily", "idle"] = "never"
    idle_reset_minutes: int = 240
    agent_id: str = "main"  # which agent of the gateway this loop is
    zone: tzinfo = UTC  # the gateway's (user.timezone): its people's day unless theirs is set


async def _no_audit(kind: str, **detail: object) -> None:
    return None


class Agent:
    def __init__(
        self,
        *,
        model: MeteredModel,
        executor: ToolExecutor,
        limits: TurnLimits,
        policy: ToolPolicy,
        history: History,
        context: ContextBuilder,
        workspace: Workspace,
        send: Sender,
        clock: Clock,
        config: AgentConfig | None = None,
        compactor: Compactor | None = None,
        channels: Sequence[str] = (),
        audit: Audit = _no_audit,
        pins: Pins | None = None,
        trace_dir: Path | None = None,
        redact: Callable[[str], str] = lambda text: text,
        tool_source: ToolSource | None = None,
        services: Services | None = None,
        storage_alarm: StorageAlarm | None = None,
        choices: Mapping[str, MeteredModel] | None = None,
        memory_entries: MemoryEntries | None = None,
    ) -> None:
        self.model = model
        # the models a chat may switch to with /model, by name (the agent's own among them)
        self.choices: Mapping[str, MeteredModel] = choices or {model.model: model}
        self.executor = executor
        self.limits = limits
        self.tool_source = tool_source  # MCP servers: their tools, registered before a turn
        self.policy = policy
        self.history = history
        self.context = context
        self.workspace = workspace
        self.config = config or AgentConfig()
        self.window = ContextWindow(
            history=history,
            context=context,
            compactor=compactor,
            history_limit=self.config.history_limit,
        )
        self._send = send
        self._clock = clock
        self._channels = tuple(channels)
        self._audit = audit
        self._trace_dir = trace_dir
        self._redact = redact
        self._background: set[asyncio.Task[None]] = set()
        self.services = services or Services()  # scheduling, background tasks, other agents
        self.storage_alarm = storage_alarm  # told while checkpoints wait for space
        self.pins = pins
        self.memory_entries = memory_entries  # where memory entries came from

    async def run_turn(self, request: TurnRequest) -> TurnOutcome:
        trace = TurnTrace(request.turn_id, session_key=request.session_key, kind=request.kind)
        # kept here: a turn that fails still used what it used
        meter = TurnUsage(allowance=request.allowance)
        try:
            async with asyncio.timeout(self.config.turn_timeout):
                outcome = await self._run(request, trace, meter)
        except AwaitingApproval as waiting:  # parked by the runtime; resumes at that call
            outcome = TurnOutcome(awaiting=waiting.ask)
        except OverAllowance as over:  # the next call would pass a money cap: not made
            log.info("turn %s: a model call not made: %s", request.turn_id, over)
            trace.decision("limits", "SPEND_CAP", str(over))
            if not meter.entries():  # nothing was asked: the message does not stay to cost
                await self._forget(request)  # every later turn as much (they may resend it)
            outcome = notice(request, over.notice)
        except TimeoutError:
            log.warning("turn %s timed out after %ss", request.turn_id, self.config.turn_timeout)
            trace.decision("limits", "TURN_TIMEOUT", f"{self.config.turn_timeout}s wall time")
            outcome = notice(request, TIMEOUT_NOTICE)
        except LLMError as exc:
            log.warning(
                "turn %s: %s [%s: %s]", request.turn_id, exc.explain(), type(exc).__name__, exc
            )
            for failover in exc.failovers:
                trace.add("fallback", **asdict(failover))
            trace.add("llm_error", error=type(exc).__name__, status=exc.status_code)
            outcome = notice(request, provider_notice(exc, owner=request.principal.is_owner))
        except Exception as exc:
            log.exception("turn %s failed", request.turn_id)
            trace.add("internal_error", error=type(exc).__name__)
            outcome = notice(request, INTERNAL_ERROR_NOTICE)
        outcome = replace(outcome, usage=meter.entries())
        if self._trace_dir is not None:
            await self._write_trace(trace, self._trace_dir)
        return outcome

    async def _write_trace(self, trace: TurnTrace, directory: Path) -> None:
        if len(trace.events) <= INLINE_TRACE_EVENTS:
            # A short trace (a turn without tools: ~300 bytes) is written right here: about
            # 60 us, against 250 us of CPU to hand it to a worker thread and back
            trace.write(directory, self._redact)
        else:
            await asyncio.to_thread(trace.write, directory, self._redact)

    async def settle(self) -> None:
        """Wait until the background work of finished turns (summaries, reflection) is done."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await self.window.settle()

    async def stop(self) -> None:
        """Cancel background work (summaries, reflection); it is safe to lose."""
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.window.stop()

    # -- the turn ------------------------------------------------------------------------

    async def _run(self, request: TurnRequest, trace: TurnTrace, meter: TurnUsage) -> TurnOutcome:
        kind = task_type(request.task_type)
        if self.tool_source is not None:
            await self.tool_source.prepare(self.executor.registry, request.principal)
        routed = await self.context.skills.route(self._texts(request))  # skills, by `when:`
        bounds = self.context.skills.bounds([r.skill.name for r in routed])
        tools, deferred = self._offered(request, bounds)
        # Both reads at once (on PostgreSQL they share one transaction; SQLite reads inline)
        (state, conversation, checkpoints), pinned = await asyncio.gather(
            self._conversation(request, trace), self._pinned(request, (*tools, *deferred.values()))
        )
        now = self._now(request)
        new: list[ChatMessage] = []  # this turn's messages; one with a document taints it
        if not checkpoints:
            helpers = guidance(self._texts(request), [t.name for t in tools])
            if helpers:
                trace.add("prompt_helpers", helpers=[h.name for h in helpers])
            for skill in routed:
                trace.add(
                    "skill", skill=skill.skill.name, trigger=skill.trigger, matched=skill.matched
                )
            new = self._user_messages(request, now.tzinfo)
            extra = "\n".join(b for b in (guidance_block(helpers), routed_block(routed)) if b)
            new[-1] = with_guidance(new[-1], extra)  # kept with it: the cache holds
            await self._checkpoint(request, new)  # the turn's first checkpoint
            conversation.extend(new)
        system = self.context.system_prompt(
            request,
            tools,
            now=now,
            summary=state.summary,
            guidance=kind.prompt,
            pinned=pinned,
            quotes=state.summary_quotes,
        )
        given = [*checkpoints, *new]
        turn_state = resumed_state(
            given,
            chat=request.chat,
            outside=outside_at_start(request),
            seen=seen_at_start(request, given),
            tool_of=self.executor.registry.get,
        )
        # A resumed turn keeps the bounds of every skill it had loaded before.
        loaded = [*(r.skill.name for r in routed), *loaded_skills(checkpoints)]
        turn_state.bounds = self.context.skills.bounds(loaded)
        turn_state.meter = meter
        turn_state.deferred = deferred
        charge = Charge(request.session_key, request.turn_id, request.principal.person, meter)
        files = file_view(self.workspace, request, conversation, turn_state)

        save = self._facts_saver(request.principal, request.chat, request.turn_id)

        async def rebuild(limit: int) -> FittedPrompt:
            return await self.window.refit(
                request, tools, now, kind.prompt, pinned, charge=charge, limit=limit, save=save
            )

        model = self.choices.get(state.model or "", self.model)  # this chat's (/model)
        if request.control is not None:
            request.control.model = model.model
        limit = self.window.limit(model.max_tokens)
        inputs = TurnInputs(
            system=system,
            conversation=conversation,
            tools=tools,
            state=turn_state,
            trace=trace,
            charge=charge,
            context_for=lambda call: self._tool_context(request, call.id, turn_state, files),
            checkpoint=lambda messages: self._checkpoint(request, messages),
            unattended=request.kind.unattended,
            check_in=request.kind is TurnKind.HEARTBEAT,
            explain_failures=request.principal.is_admin,
            on_text=request.on_text,
            on_tool=request.on_tool,
            fit=None if limit is None else TurnFit(self.window, model.max_tokens, rebuild),
            control=request.control,
            steer=self._steer(request) if request.steer and request.control else None,
        )
        result = await TurnLoop(model, self.executor, self.limits, inputs).run()
        if result.stop_reason is StopReason.STOPPED:
            return await self._stopped(request, turn_state, cut=result.cut)
        if result.had_errors:
            await self._clean_up_errors(request, trace)
        self._after_turn(
            request=request,
            conversation=conversation,
            system=system,
            tools=tools,
            result=result,
            state=turn_state,
            charge=charge,
        )
        return decide(request, result, turn_state, trace, default_reply=self.config.default_reply)

    @staticmethod
    def _texts(request: TurnRequest) -> list[str]:
        """What the turn is asked, as skills' triggers read it."""
        return [m.text for m in request.messages] or [request.prompt or ""]

    def _offered(
        self, request: TurnRequest, bounds: Bounds
    ) -> tuple[tuple[ToolSpec, ...], dict[str, ToolSpec]]:
        """The tools this turn's model is shown (within what its loaded skills declared), and
        those held back behind ``find_tools``."""
        kind = task_type(request.task_type)
        registry = self.executor.registry
        tools = registry.specs(
            self.policy.offer(
                registry, request.principal, kind=request.kind, task=kind, bounds=bounds
            )
        )
        deferred: dict[str, ToolSpec] = {}
        finder = registry.get(FindTools.name)
        if isinstance(finder, FindTools):  # rarely used and surplus MCP tools wait behind it
            tools, deferred = finder.split(tools, registry)
        return tools, deferred

    async def prompt_report(
        self, session_key: str, principal: Principal, chat: ChatRef, cached: Cached | None
    ) -> PromptReport:
        """``/context``: what the chat's next prompt is made of (``cached``: its last turn's
        prompt as the provider reported it)."""
        request = TurnRequest(
            turn_id="context", session_key=session_key, chat=chat, principal=principal
        )
        routed = await self.context.skills.route(self._texts(request))
        tools, _ = self._offered(
            request, self.context.skills.bounds([r.skill.name for r in routed])
        )
        state, stored = await self.history.load(session_key, limit=self.config.history_limit)
        now = self._now(request)
        system = self.context.system_prompt(
            request,
            tools,
            now=now,
            summary=state.summary,
            guidance=task_type(request.task_type).prompt,
            pinned=await self._pinned(request, tools),
            quotes=state.summary_quotes,
        )
        compactor = self.window.compactor
        return prompt_report(
            system,
            memory=self.context.memory.context(now.date(), scope_for(principal, chat)),
            summary=(state.summary or "") + (state.summary_quotes or ""),
            tools=tools,
            history=[ChatMessage.from_body(m.body) for m in stored],
            window=None if compactor is None else compactor.window,
            cached=cached,
        )

    async def _conversation(
        self, request: TurnRequest, trace: TurnTrace
    ) -> tuple[SessionState, list[ChatMessage], list[ChatMessage]]:
        """The session's history (reset first if due) plus this turn's checkpoints, if
        resumed; and the checkpoints on their own."""
        limit = request.history_limit or self.config.history_limit
        state, stored = await self.history.load(request.session_key, limit=limit)
        if not request.resumed and self._should_reset(state, request):
            generation = await self.history.new_generation(request.session_key)
            trace.decision(
                "session", "RESET", f"{self.config.session_reset} reset to generation {generation}"
            )
            state, stored = await self.history.load(request.session_key, limit=limit)
        conversation = [ChatMessage.from_body(m.body) for m in stored]
        stored = await self.history.checkpoints(request.turn_id) if request.resumed else []
        checkpoints = [ChatMessage.from_body(c.body) for c in stored]
        conversation.extend(checkpoints)
        return state, conversation, checkpoints

    def _should_reset(self, state: SessionState, request: TurnRequest) -> bool:
        if state.last_active is None or self.config.session_reset == "never":
            return False
        now = self._now(request)
        # Both in the person's time zone: "a new day" is their day, not the server's.
        last = datetime.fromtimestamp(state.last_active, tz=now.tzinfo)
        if self.config.session_reset == "daily":
            return last.date() != now.date()
        return now - last > timedelta(minutes=self.config.idle_reset_minutes)

    def _after_turn(
        self,
        *,
        request: TurnRequest,
        conversation: Sequence[ChatMessage],
        system: SystemPrompt,
        tools: tuple[ToolSpec, ...],
        result: RunResult,
        state: TurnState,
        charge: Charge,
    ) -> None:
        # Work after the turn is charged to the same person, recorded on its own.
        save = self._facts_saver(request.principal, request.chat, request.turn_id)
        self.window.after_turn(request.session_key, system, tools, conversation, charge, save=save)
        # A turn held to a skill's bounds writes no memory afterwards unless the skill may.
        remembers = state.bounds.tool_refusal("memory_write") is None
        if (
            self.config.reflection
            and request.kind is TurnKind.CHAT
            and not result.failed
            and remembers
        ):
            recent = current_exchange(conversation)
            if worth_reflecting(recent, tainted=state.read_untrusted):
                self._spawn(self._reflect(request, recent, charge.detached()))

    async def _reflect(
        self, request: TurnRequest, exchange: Sequence[ChatMessage], charge: Charge
    ) -> None:
        try:
            scope = scope_for(request.principal, request.chat)
            memory = self.context.memory.long_term(scope)
            reflection_state = TurnState()
            view = file_view(self.workspace, request, exchange, reflection_state)
            reflection_id = f"{request.turn_id}:reflect"
            made = await reflect(
                model=self.model,
                executor=self.executor,
                transcript=exchange,
                memory=memory,
                context_for=lambda call_id: replace(
                    self._tool_context(request, call_id, reflection_state, view),
                    turn_id=reflection_id,
                ),
                charge=charge,
            )
            log.debug("reflection after %s made %d memory change(s)", request.turn_id, made)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("reflection after %s failed: %s", request.turn_id, exc)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _pinned(self, request: TurnRequest, tools: tuple[ToolSpec, ...]) -> str:
        """Current goals and note titles, regenerated from state for every turn."""
        if self.pins is None or not any(t.name in ("goals", "notes") for t in tools):
            return ""
        scope = scope_for(request.principal, request.chat).directory or "owner"
        return await self.pins.pinned(self.config.agent_id, scope)

    async def _forget(self, request: TurnRequest) -> None:
        """Take the turn's messages out of the conversation (a turn refused before its first
        model call)."""
        await self.history.drop([c.id for c in await self.history.checkpoints(request.turn_id)])

    async def _clean_up_errors(self, request: TurnRequest, trace: TurnTrace) -> None:
        drop = failed_attempts(await self.history.checkpoints(request.turn_id))
        if drop:
            await self.history.drop(drop)
            trace.decision(
                "cleanup", "DROPPED_FAILED_ATTEMPT", f"{len(drop)} messages left history"
            )

    # -- helpers --------------------------------------------------------------------------

    def _steer(self, request: TurnRequest) -> Steer:
        """Takes the messages the person sent while the turn ran: each joins the turn (its
        journal row and its checkpoint in one transaction, so a crash neither loses it nor
        answers it twice) and reaches the next model call, marked as a follow-up."""
        control = request.control
        assert control is not None and control.followups is not None
        take = control.followups

        async def steer() -> list[ChatMessage]:
            taken = take()
            if not taken:
                return []
            messages = []
            for _, message in taken:
                said = user_message(
                    message,
                    vision=self.config.vision,
                    workspace=self.workspace.root,
                    zone=self._now(request).tzinfo,
                )
                messages.append(replace(said, content=f"{FOLLOW_UP}\n{said.content}"))
            rows = [NewMessage(m.role, m.to_body()) for m in messages]
            ids = [record_id for record_id, _ in taken]
            await until_stored(
                lambda: self.history.add_checkpoints(
                    request.session_key, request.turn_id, rows, claim=ids
                ),
                self.storage_alarm,
            )
            return messages

        return steer

    async def compact_now(
        self, session_key: str, principal: Principal, chat: ChatRef
    ) -> Compaction | None:
        """``/compact``: summarize the older part of the conversation now; ``None`` when
        there is nothing worth summarizing (or no summarizer)."""
        compactor = self.window.compactor
        if compactor is None:
            return None
        charge = Charge(session_key, None, principal.person)  # recorded on its own
        save = self._facts_saver(principal, chat, None)
        return await compactor.compact(session_key, 0, force=True, charge=charge, save=save)

    def _facts_saver(self, principal: Principal, chat: ChatRef, turn_id: str | None) -> SaveFacts:
        """Saves the lasting facts a summary found, before it replaces their messages: to
        the conversation's own memory scope (today's note; a direct chat's never reach a
        group), each with where it came from. Facts the notes hold already are skipped."""
        scope = scope_for(principal, chat)
        root = self.workspace.root

        async def save(facts: Sequence[str], outside: bool) -> None:
            now = self._clock().astimezone(self.config.zone)
            known = "\n".join(
                read_note(root / path) for path in (scope.long_term, scope.daily(now.date()))
            )
            new = [fact for fact in facts if fact not in known]
            if not new:
                return
            relative, lines = await asyncio.to_thread(
                append_note, root, scope, new, to="today", now=now
            )
            if self.memory_entries is not None:
                origin = Origin(
                    principal.person, chat.channel, chat.chat_id, turn_id, now.timestamp(), outside
                )
                await self.memory_entries.record(self.config.agent_id, relative, lines, origin)

        return save

    async def stopped(self, request: TurnRequest) -> TurnOutcome:
        """The outcome of a turn stopped before it could go on (parked for an approval, or
        cut by a crash after the stop was asked for)."""
        return await self._stopped(request, TurnState())

    async def _stopped(
        self, request: TurnRequest, state: TurnState, *, cut: str = ""
    ) -> TurnOutcome:
        """The person stopped the turn: one message says so, and what it had already done
        (from the idempotency ledger). What was said and done stays in history: ``cut``, what
        the answer had said when it was cut, too. History keeps a plain mark, not the notice,
        so the model, reading it later, does not take "Stopped." for an answer to give. The
        chat keeps those words too, where they were shown (:class:`OutboundKind.STOPPED`,
        before the notice)."""
        control = request.control
        effects = await self.executor.side_effects(request.turn_id)
        done = [e.described() for e in effects if e.state == "done"]
        unknown = [e.described() for e in effects if e.state != "done"]
        text = stop_notice(done, unknown, dropped=control.dropped if control else 0)
        said = f"{cut.rstrip()}\n\n" if cut.strip() else ""
        final = ChatMessage("assistant", f"{said}{stop_mark(done, unknown)}")
        await self._checkpoint(request, [final])
        outcome = notice(request, text)
        if said and outcome.replies:  # the words shown stay (where they were), then the notice
            kept = outbound(request, kept_answer(cut), OutboundKind.STOPPED)
            outcome = replace(outcome, replies=(kept, *outcome.replies))
        return replace(outcome, failed=False, usage=state.meter.entries())

    def _now(self, request: TurnRequest) -> datetime:
        """The time in the zone of the person the turn is for (their clock in the prompt)."""
        return self._clock().astimezone(request.zone or self.config.zone)

    def _user_messages(self, request: TurnRequest, zone: tzinfo | None) -> list[ChatMessage]:
        if request.messages:
            return [
                user_message(m, vision=self.config.vision, workspace=self.workspace.root, zone=zone)
                for m in request.messages
            ]
        return [ChatMessage(role="user", content=request.prompt or "")]

    async def _checkpoint(self, request: TurnRequest, messages: Sequence[ChatMessage]) -> None:
        rows = [NewMessage(m.role, m.to_body()) for m in messages]
        await until_stored(  # a full disk pauses the turn; what it did so far is kept
            lambda: self.history.add_checkpoints(request.session_key, request.turn_id, rows),
            self.storage_alarm,
        )

    def _tool_context(
        self, request: TurnRequest, call_id: str, state: TurnState, workspace: Workspace
    ) -> ToolContext:
        bounds = state.bounds
        if bounds.narrowed:  # from the moment the turn loaded a skill that bounds it
            workspace = workspace.confined(bounds.paths(), reads=bounds.folders(), by=bounds.who())
        return ToolContext(
            turn_id=request.turn_id,
            call_id=call_id,
            session_key=request.session_key,
            chat=request.chat,
            principal=request.principal,
            workspace=workspace,
            send=self._send,
            state=state,
            inbound=request.last_message,
            user_texts=authorising_texts(request),
            audit=self._audit,
            channels=self._channels,
            services=self.services,
            unattended=request.kind.unattended,
            turn_kind=request.kind,
            agent=self.config.agent_id,
        )
