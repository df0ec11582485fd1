"""The store's tables on SQLite, versioned with ``PRAGMA user_version``.

A new version appends to :data:`MIGRATIONS`; existing entries never change. The same
version number must be added for PostgreSQL, in
:data:`gateway.store.engine.schema_pg.PG_MIGRATIONS` (a test checks both lists have the same
length and the same tables and columns): see docs/architecture.md, "Schema migrations".
"""

from __future__ import annotations

import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # v1: the core journal
    """
    CREATE TABLE inbound (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        platform_id TEXT NOT NULL,
        session_key TEXT NOT NULL,
        payload TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',      -- pending | processing | done
        turn_id TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE (channel, platform_id)
    );
    CREATE INDEX inbound_open ON inbound (state) WHERE state IN ('pending', 'processing');
    CREATE INDEX inbound_turn ON inbound (turn_id);

    CREATE TABLE turns (
        id TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        kind TEXT NOT NULL,                          -- chat | heartbeat | cron | system
        state TEXT NOT NULL,                         -- running | answered | done | failed
        attempts INTEGER NOT NULL DEFAULT 1,
        reply TEXT,                                  -- JSON: outbound messages decided at the end
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX turns_open ON turns (state) WHERE state IN ('running', 'answered');

    CREATE TABLE sessions (
        session_key TEXT PRIMARY KEY,
        generation INTEGER NOT NULL DEFAULT 0,
        summary TEXT,
        summary_upto INTEGER NOT NULL DEFAULT 0,
        last_active REAL
    );

    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        session_key TEXT NOT NULL,
        generation INTEGER NOT NULL,
        turn_id TEXT,
        status TEXT NOT NULL,                        -- draft | final | dropped
        role TEXT NOT NULL,
        body TEXT NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_session ON messages (session_key, generation, status, id);
    CREATE INDEX messages_turn ON messages (turn_id);

    CREATE TABLE outbox (
        id INTEGER PRIMARY KEY,
        idem_key TEXT NOT NULL UNIQUE,
        channel TEXT NOT NULL,
        chat_key TEXT NOT NULL,
        payload TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',       -- pending | sent | failed
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_error TEXT,
        turn_id TEXT,
        receipt TEXT,
        created_at REAL NOT NULL,
        sent_at REAL
    );
    CREATE INDEX outbox_due ON outbox (channel, next_attempt_at) WHERE state = 'pending';

    CREATE TABLE tool_ledger (
        key TEXT PRIMARY KEY,                        -- turn id + ':' + tool call id
        tool TEXT NOT NULL,
        state TEXT NOT NULL,                         -- started | done
        result TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );

    CREATE TABLE kv (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    """,
    # v2: access control
    """
    CREATE TABLE pairing (
        code TEXT PRIMARY KEY,
        channel TEXT NOT NULL,
        sender_id TEXT NOT NULL,
        sender_name TEXT NOT NULL DEFAULT '',
        chat_id TEXT NOT NULL,
        state TEXT NOT NULL,                         -- pending | approved | denied | revoked
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        decided_at REAL
    );
    CREATE INDEX pairing_sender ON pairing (channel, sender_id, state);

    CREATE TABLE audit (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        kind TEXT NOT NULL,                          -- refused | pairing | policy | approval ...
        channel TEXT,
        sender_id TEXT,
        detail TEXT NOT NULL
    );
    CREATE INDEX audit_at ON audit (at);
    """,
    # v3: full-text search over conversations, and token usage per turn
    """
    CREATE VIRTUAL TABLE messages_fts USING fts5(
        content, session_key UNINDEXED, message_id UNINDEXED, tokenize = 'unicode61'
    );

    CREATE TABLE usage (
        turn_id TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        channel TEXT NOT NULL,
        at REAL NOT NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cache_read_tokens INTEGER NOT NULL,
        cache_write_tokens INTEGER NOT NULL
    );
    CREATE INDEX usage_at ON usage (at);
    """,
    # v4: scheduled jobs and background tasks
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        spec TEXT NOT NULL,                          -- JSON ScheduleSpec
        prompt TEXT,                                 -- a task for the agent, or
        message TEXT,                                -- a fixed text sent without a model call
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        thread_id TEXT,
        owner TEXT NOT NULL,                         -- JSON principal of the creator
        task_type TEXT NOT NULL DEFAULT 'general',
        state TEXT NOT NULL DEFAULT 'active',        -- active | done | removed
        next_run REAL,
        last_run REAL,
        runs INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE INDEX jobs_due ON jobs (next_run) WHERE state = 'active';

    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        prompt TEXT NOT NULL,
        task_type TEXT NOT NULL,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        thread_id TEXT,
        owner TEXT NOT NULL,
        state TEXT NOT NULL,                         -- running | done | failed | interrupted
        result TEXT,
        created_at REAL NOT NULL,
        finished_at REAL
    );
    """,
    # v5: several agents: their jobs and tasks, pinned goals and notes, agent conversations
    """
    ALTER TABLE jobs ADD COLUMN agent TEXT NOT NULL DEFAULT 'main';
    ALTER TABLE tasks ADD COLUMN agent TEXT NOT NULL DEFAULT 'main';

    CREATE TABLE goals (
        id INTEGER PRIMARY KEY,
        agent TEXT NOT NULL,
        scope TEXT NOT NULL,                         -- whose goals (see agent.memory scopes)
        text TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        completed_at REAL
    );
    CREATE INDEX goals_scope ON goals (agent, scope, done);

    CREATE TABLE notes (
        agent TEXT NOT NULL,
        scope TEXT NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (agent, scope, title)
    );

    CREATE TABLE agent_conversations (
        id TEXT PRIMARY KEY,
        origin_channel TEXT NOT NULL,
        origin_chat TEXT NOT NULL,
        origin_thread TEXT,
        origin_agent TEXT NOT NULL,
        principal TEXT NOT NULL,                     -- JSON: the person who started it
        hops INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    """,
    # v6: whose words authorise a job's or an agent exchange's side effects, and whether the
    # turn that started it had read outside content; one-shot jobs are 'firing' until done
    """
    ALTER TABLE jobs ADD COLUMN authorised_by TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE jobs ADD COLUMN tainted INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE agent_conversations ADD COLUMN authorised_by TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE agent_conversations ADD COLUMN tainted INTEGER NOT NULL DEFAULT 0;
    """,
    # v7: whose turn used the tokens ("channel:sender id"), for per-person budgets
    """
    ALTER TABLE usage ADD COLUMN principal TEXT;
    CREATE INDEX usage_principal ON usage (principal, at);
    """,
    # v8: every model call is recorded with its purpose (a turn's rows per purpose and model,
    # reflection and background summaries per call), so usage is no longer one row per turn
    """
    ALTER TABLE usage RENAME TO usage_v7;
    CREATE TABLE usage (
        id TEXT PRIMARY KEY,                         -- turn:purpose:model, or one call's own id
        turn_id TEXT,
        session_key TEXT NOT NULL,
        channel TEXT NOT NULL,
        purpose TEXT NOT NULL DEFAULT 'turn',        -- turn | review | page | summary | reflection
        principal TEXT,                              -- "channel:sender id" it is charged to
        at REAL NOT NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cache_read_tokens INTEGER NOT NULL,
        cache_write_tokens INTEGER NOT NULL
    );
    INSERT INTO usage (id, turn_id, session_key, channel, purpose, principal, at, model,
                       input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
        SELECT turn_id || ':turn:' || model, turn_id, session_key, channel, 'turn', principal,
               at, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens
        FROM usage_v7;
    DROP TABLE usage_v7;
    CREATE INDEX usage_at ON usage (at);
    CREATE INDEX usage_principal ON usage (principal, at);
    CREATE INDEX usage_turn ON usage (turn_id);
    """,
    # v9: approval requests: a side effect waiting for the owner's yes (gateway.store.approvals)
    """
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,                         -- the code shown to approvers
        call_key TEXT NOT NULL UNIQUE,               -- turn id + ':' + tool call id
        turn_id TEXT NOT NULL,
        session_key TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,                     -- JSON, redacted: what approvers are shown
        fingerprint TEXT NOT NULL,                   -- sha256 of the exact arguments
        reason TEXT NOT NULL,                        -- why the policy refused it
        requester TEXT NOT NULL,                     -- JSON: the principal who asked
        approvers TEXT NOT NULL,                     -- JSON list of "channel:sender id"
        state TEXT NOT NULL,                         -- pending | approved | denied | expired | refused
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        decided_at REAL,
        decided_by TEXT
    );
    CREATE INDEX approvals_state ON approvals (state, expires_at);
    CREATE INDEX approvals_turn ON approvals (turn_id);
    """,
    # v10: answers streamed by editing: the platform messages a turn's draft occupies in a
    # chat, so the outbox finishes them with the final text (also after a crash) instead of
    # sending the answer a second time (gateway.store.drafts)
    """
    CREATE TABLE stream_drafts (
        channel TEXT NOT NULL,
        chat_key TEXT NOT NULL,                      -- the chat's session key
        turn_id TEXT NOT NULL,
        position INTEGER NOT NULL,                   -- 0: the first message of the draft
        message_id TEXT NOT NULL,                    -- the platform's id of that message
        created_at REAL NOT NULL,
        PRIMARY KEY (channel, chat_key, turn_id, position)
    );
    """,
    # v11: how many of a row's tokens were counted
    # by us (tiktoken) because the server reported none (llama.cpp's streams)
    """
    ALTER TABLE usage ADD COLUMN estimated_tokens INTEGER NOT NULL DEFAULT 0;
    """,
    # v12: what a platform with a service window needs (WhatsApp: when a
    # person last wrote, refused or not) and the delivery reports it sends for our messages
    # (gateway.store.deliveries)
    """
    CREATE TABLE chat_contacts (
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        last_inbound_at REAL NOT NULL,
        PRIMARY KEY (channel, chat_id)
    );
    CREATE TABLE delivery_status (
        channel TEXT NOT NULL,
        message_id TEXT NOT NULL,                    -- the platform's id of the sent message
        chat_id TEXT NOT NULL,
        status TEXT NOT NULL,                        -- sent | delivered | read | failed
        error TEXT,
        updated_at REAL NOT NULL,
        PRIMARY KEY (channel, message_id)
    );
    """,
    # v13 (issue 31; renumbered at merge): a turn someone asked to stop is closed, never
    # resumed, even after a crash (gateway.runtime.dispatch.controls); a chat's own model (/model)
    """
    ALTER TABLE turns ADD COLUMN stop_requested_at REAL;
    ALTER TABLE sessions ADD COLUMN model TEXT;
    """,
    # v14 (issue 29; renumbered at merge): exactly once across a crash mid-send
    # (gateway.runtime.outbound.worker): an outbox row is 'sending' from just before the platform call until its result is recorded, with the
    # attempts whose outcome is unknown; a draft's row is written before its post (no id yet)
    """
    ALTER TABLE outbox ADD COLUMN open_sends TEXT;   -- JSON: [{at, mark, draft}], unrecorded
    DROP INDEX outbox_due;
    CREATE INDEX outbox_due ON outbox (channel, next_attempt_at)
        WHERE state IN ('pending', 'sending');
    CREATE TABLE stream_drafts_v14 (
        channel TEXT NOT NULL,
        chat_key TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        message_id TEXT,                             -- NULL: being posted, id not known yet
        mark TEXT,                                   -- what the channel noted before posting
        created_at REAL NOT NULL,
        PRIMARY KEY (channel, chat_key, turn_id, position)
    );
    INSERT INTO stream_drafts_v14 (channel, chat_key, turn_id, position, message_id, created_at)
        SELECT channel, chat_key, turn_id, position, message_id, created_at FROM stream_drafts;
    DROP TABLE stream_drafts;
    ALTER TABLE stream_drafts_v14 RENAME TO stream_drafts;
    """,
    # v15 (issue 33): background tasks resume after a restart (their turn id),
    # may also be delivered to a chat (API tasks), keep whose words authorise them, and
    # record every change of state, progress note and answer (gateway.store.tasks)
    """
    ALTER TABLE tasks ADD COLUMN turn_id TEXT;
    ALTER TABLE tasks ADD COLUMN deliver_to TEXT;            -- JSON chat, or NULL
    ALTER TABLE tasks ADD COLUMN authorised_by TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE tasks ADD COLUMN tainted INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN updated_at REAL;
    CREATE INDEX tasks_state ON tasks (state);
    CREATE TABLE task_events (
        task_id TEXT NOT NULL,
        seq INTEGER NOT NULL,                        -- 1, 2, ... per task
        at REAL NOT NULL,
        kind TEXT NOT NULL,                          -- state | note | answer
        text TEXT NOT NULL,
        key TEXT,                                    -- a note's outbox key: recorded once
        PRIMARY KEY (task_id, seq),
        UNIQUE (task_id, key)
    );
    """,
    # v16 (issue 32): seconds of speech transcribed per person per day, the [voice]
    # allowance of members (gateway.store.metering.voice)
    """
    CREATE TABLE voice_minutes (
        person TEXT NOT NULL,                        -- channel:sender id
        day TEXT NOT NULL,                           -- YYYY-MM-DD (UTC)
        seconds REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (person, day)
    );
    """,
    # v17 (issue 32 parts 3-5): group messages the bot was not addressed in, kept as
    # context for the next message that addresses it (gateway.runtime.intake.group_context);
    # each person's own time zone; the chats the bot knows by name, and the chats each
    # person has sent to (a first send elsewhere is confirmed)
    """
    CREATE TABLE group_context (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        chat_key TEXT NOT NULL,                      -- the session key of the group (thread)
        platform_id TEXT NOT NULL,
        author TEXT NOT NULL,
        text TEXT NOT NULL,
        at REAL NOT NULL,
        UNIQUE (channel, platform_id)
    );
    CREATE INDEX group_context_chat ON group_context (chat_key, id);
    CREATE TABLE people (
        person TEXT PRIMARY KEY,                     -- channel:sender id
        timezone TEXT,
        updated_at REAL NOT NULL
    );
    CREATE TABLE known_chats (
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,                          -- dm | group | channel
        updated_at REAL NOT NULL,
        PRIMARY KEY (channel, chat_id)
    );
    CREATE TABLE person_chats (
        person TEXT NOT NULL,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        first_at REAL NOT NULL,
        PRIMARY KEY (person, channel, chat_id)
    );
    """,
    # v18 (issue 37): a WhatsApp delivery report names the outbox
    # message and part it belongs to (the tag sent as biz_opaque_callback_data), so a send
    # whose answer was lost is found by its report instead of being sent again
    """
    ALTER TABLE delivery_status ADD COLUMN tag TEXT;
    CREATE INDEX delivery_status_tag ON delivery_status (channel, tag);
    """,
    # v19 (issue 28): what an approved command could read and write, shown to approvers
    """
    ALTER TABLE approvals ADD COLUMN reach TEXT NOT NULL DEFAULT '';
    """,
    # v20 (issue 34): fencing in a cluster. A session's claim carries
    # an epoch bumped at every claim; a node's writes for the session check it
    # (gateway.store.cluster.fencing). Kept on SQLite too, so both engines have the same tables.
    # Background tasks record the node that runs them.
    """
    CREATE TABLE session_claims (
        session_key TEXT PRIMARY KEY,
        epoch INTEGER NOT NULL,
        node TEXT NOT NULL,
        claimed_at REAL NOT NULL
    );
    ALTER TABLE tasks ADD COLUMN node TEXT;  -- the node that runs it (a cluster)
    """,
    # v21 (issue 34): a streamed draft posted under an earlier claim of its session is
    # retired when another node claims it: never finished into the answer, deleted
    # (gateway.store.drafts)
    """
    ALTER TABLE stream_drafts ADD COLUMN retired INTEGER NOT NULL DEFAULT 0;
    """,
    # v22 (issue 34): a session's waiting messages found by its key, not among every open
    # message (in a burst of hundreds of chats, each claim scanned them all)
    """
    CREATE INDEX inbound_pending ON inbound (session_key, id) WHERE state = 'pending';
    """,
    # v23 (issue 44): each webhook body is claimed by the delivery that brought it first,
    # so a replay under a new delivery id is no second turn (gateway.store.webhook_bodies)
    """
    CREATE TABLE webhook_bodies (
        hook TEXT NOT NULL,
        digest TEXT NOT NULL,
        delivery TEXT NOT NULL,
        expires_at REAL,                             -- NULL: kept for the journal's window
        created_at REAL NOT NULL,
        PRIMARY KEY (hook, digest)
    );
    """,
    # v24 (issue 47): past conversations found again by meaning, per person. A session
    # records whose conversation it is (agent/memory.py:recall_scope) and a group who
    # spoke in it; each message a commit makes searchable waits in recall_queue until
    # its vector is stored (gateway.store.recall); memory entries record where they came
    # from (gateway.store.memory_entries); a summary keeps the person's own words beside it
    """
    ALTER TABLE sessions ADD COLUMN scope TEXT;
    ALTER TABLE sessions ADD COLUMN summary_quotes TEXT;
    CREATE INDEX sessions_scope ON sessions (scope);
    CREATE TABLE scope_members (
        scope TEXT NOT NULL,
        person TEXT NOT NULL,                        -- channel:sender id
        first_at REAL NOT NULL,
        PRIMARY KEY (person, scope)
    );
    CREATE TABLE recall_queue (
        message_id INTEGER PRIMARY KEY
    );
    CREATE TABLE recall_vectors (
        seq INTEGER PRIMARY KEY,                     -- the order they were stored in
        message_id INTEGER NOT NULL UNIQUE,
        session_key TEXT NOT NULL,
        created_at REAL NOT NULL,
        model TEXT NOT NULL,
        vector BLOB NOT NULL                         -- float32, unit length
    );
    CREATE TABLE memory_entries (
        agent TEXT NOT NULL,
        path TEXT NOT NULL,                          -- the memory file, in the workspace
        digest TEXT NOT NULL,                        -- of the entry's text
        person TEXT NOT NULL,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        turn_id TEXT,
        at REAL NOT NULL,
        outside INTEGER NOT NULL,                    -- the turn had read outside content
        PRIMARY KEY (agent, path, digest)
    );
    """,
    # v25 (issue 51):
    # what each model call cost (NULL: its model has no price) and the agent it served, for
    # the money caps (gateway.runtime.people.spend); the 50/80/100 % notices each sent once
    # (gateway.store.metering.spend); whether a person wants the usage footer under answers
    """
    ALTER TABLE usage ADD COLUMN cost_usd REAL;
    ALTER TABLE usage ADD COLUMN agent TEXT NOT NULL DEFAULT 'main';
    UPDATE usage SET agent = substr(session_key, 1, instr(session_key, '/') - 1)
        WHERE instr(session_key, '/') > 1
        AND instr(substr(session_key, 1, instr(session_key, '/') - 1), ':') = 0;
    CREATE TABLE spend_notices (
        cap TEXT NOT NULL,                           -- limits.gateway_daily_usd, ...
        period TEXT NOT NULL,                        -- the day or month it counts
        level INTEGER NOT NULL,                      -- percent: 50, 80, 100
        at REAL NOT NULL,
        PRIMARY KEY (cap, period, level)
    );
    ALTER TABLE people ADD COLUMN usage_footer INTEGER NOT NULL DEFAULT 0;
    """,
    # v26 (issue 46): a person's name as they last wrote, so the control center shows
    # people and their conversations by name, not by platform id
    """
    ALTER TABLE people ADD COLUMN name TEXT;
    """,
    # v27 (issue 50): one person on many channels: addresses people linked themselves
    # (/link; config ids are not stored), and the short-lived codes that link them
    """
    CREATE TABLE person_links (
        address TEXT PRIMARY KEY,                    -- "<channel>:<sender id>"
        person TEXT NOT NULL,                        -- the person's key: an address
        linked_at REAL NOT NULL,
        linked_by TEXT NOT NULL                      -- who made or confirmed the link
    );
    CREATE INDEX person_links_person ON person_links (person);
    CREATE TABLE link_codes (
        code TEXT PRIMARY KEY,
        address TEXT NOT NULL,                       -- who asked for it with /link
        state TEXT NOT NULL,                         -- open, waiting (for the owner), used
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_by TEXT,                                -- the address that sent it
        used_at REAL
    );
    """,
    # v28: the conversation of the chat that asked for a link code, carried over by the link
    # (one conversation across a person's chats); it goes with the code
    """
    ALTER TABLE link_codes ADD COLUMN asked_in TEXT;
    """,
    # v29: a reply to one of the bot's messages carries that message's text, found by the
    # chat it was sent to (gateway.runtime.intake.understanding), after restarts and on
    # every node
    """
    CREATE INDEX outbox_chat ON outbox (chat_key, id);
    """,
    # v30: what each side-effecting call acted on (a path, a recipient, a job id; redacted
    # and cut), so an answer claiming it deleted one file is not backed by a write to
    # another (agent.guards.claims)
    """
    ALTER TABLE tool_ledger ADD COLUMN target TEXT NOT NULL DEFAULT '';
    """,
    # v31: a money cap's notice that found the owner without a home chat is kept (the
    # notice's cap, spending and period, as JSON) and sent once they have one
    # (gateway.runtime.people.spend_notices)
    """
    ALTER TABLE spend_notices ADD COLUMN waiting TEXT;
    """,
    # v32: the API's requests without an idempotency key of the last 15 minutes, by session
    # and body digest, so an SDK's retry after a restart is the request it repeats, not a
    # second turn (gateway.store.api_requests)
    """
    CREATE TABLE api_requests (
        session_key TEXT NOT NULL,
        body TEXT NOT NULL,                          -- sha256 of the request's body, as sent
        message_id TEXT NOT NULL,                    -- the platform id it was journaled as
        expires_at REAL NOT NULL,
        PRIMARY KEY (session_key, body)
    );
    CREATE INDEX api_requests_expiry ON api_requests (expires_at);
    """,
)


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to the newest version, one transaction per step."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        conn.executescript(f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
