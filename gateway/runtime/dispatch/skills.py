"""``/skills`` in the chat: what is installed and what each skill may do; for the owner, the
assistant's proposals and the skills that changed since they were approved, and the
decisions on them.

    /skills                      the list (proposals and changed skills too, for the owner)
    /skills show NAME            a proposal's text, or a skill's files and permissions (and,
                                 for a changed one, what changed and the code to approve it)
    /skills approve NAME         a proposal becomes a skill; for a changed skill: what changed
                                 and a code, and nothing approved yet
    /skills approve NAME CODE    the changed skill is used again, as the code's change showed it
    /skills edit NAME            (the new SKILL.md on the following lines) rewrite a proposal
    /skills drop NAME            forget a proposal

Answered by the gateway itself, never by the model: no text a turn read can approve anything.
A changed skill is approved only with the code shown beside its change (a diff of each text
file against the copy kept when it was approved): the owner approves what they read, and a
change made after they read it gives another code.
"""

from __future__ import annotations

from agent.skills.library import SkillLibrary
from agent.skills.proposals import Proposal, ProposalError, Proposals
from agent.skills.review import Review, ReviewError, approve, review_installed
from gateway.core.messages import InboundMessage
from gateway.core.principal import Principal
from gateway.core.text.verbatim import fenced, visible

USAGE = "Usage: /skills [show NAME | approve NAME | edit NAME (new text below) | drop NAME]"
# Lines of a changed skill's diff: in the list (each skill), and where it is approved.
LISTED_LINES = 12
SHOWN_LINES, SHOWN_PER_FILE = 300, 120


def answer(msg: InboundMessage, principal: Principal, library: SkillLibrary) -> str:
    head, _, rest = msg.text.partition("\n")
    words = head.split()[1:]
    action = words[0].lower() if words else "list"
    if action == "list":
        return listing(library, principal)
    if len(words) != 2 and not (action == "approve" and len(words) == 3):
        return USAGE
    name = words[1]
    if action == "show" and principal.is_admin:
        return _show(library, name, principal)
    if action in ("approve", "edit", "drop") and not principal.is_owner:
        return "Only the owner decides which skills are used."
    proposals = Proposals(library)
    try:
        if action == "approve":
            return _approve(library, proposals, name, words[2] if len(words) == 3 else "")
        if action == "edit":
            if not rest.strip():
                return "Write the new SKILL.md on the lines after /skills edit NAME."
            proposals.edit(name, rest.strip() + "\n")
            return f"Rewrote the proposal {name}; /skills approve {name} when it is right."
        if action == "drop":
            proposals.drop(name)
            return f"Dropped the proposal {name}."
    except (ProposalError, ReviewError) as exc:
        return f"{exc}."
    return USAGE


def listing(library: SkillLibrary, principal: Principal) -> str:
    skills = library.skills()
    lines = ["Skills:" if skills else "No skills installed."]
    for skill in skills:
        may = skill.permissions.summary() if skill.bounded else "what the person may (hand-written)"
        lines.append(f"- {skill.folder.name}: {skill.description or '(no description)'}")
        lines.append(f"  may use: {may}")
    if not principal.is_owner:
        return "\n".join(lines)
    left_out = library.problems()
    if left_out:
        lines.append("Left out:")
    for problem in left_out:
        name = problem.path.parent.name
        lines.append(f"- {name}: {problem.reason}")
        review = _changed(library, name)
        if review is not None:
            lines += _change(review, listed=True)
    waiting = Proposals(library).pending()
    if waiting:
        lines.append("Proposed by the assistant, waiting for you (/skills show NAME first):")
        lines += [f"- {p.name} ({_for_whom(p, principal)})" for p in waiting]
    return "\n".join(lines)


def _for_whom(proposal: Proposal, reader: Principal) -> str:
    """``for you, 2026-12-07 23:44 UTC``: whose turn proposed it, as ``reader`` reads it."""
    whom = proposal.for_whom(reader=reader.person, reader_is_owner=reader.is_owner)
    return f"for {visible(whom)}, {proposal.when()}"


def _changed(library: SkillLibrary, name: str) -> Review | None:
    """The installed skill ``name`` if its files changed since they were approved."""
    try:
        review = review_installed(library, name)
    except ReviewError:
        return None
    return review if review.changes and not review.hand_written else None


def _change(review: Review, *, listed: bool = False) -> list[str]:
    """What changed, in a block no file's text can format or close; then how to approve it
    (the code stands for exactly these files), or where to read the rest."""
    per_file, total = (LISTED_LINES, LISTED_LINES) if listed else (SHOWN_PER_FILE, SHOWN_LINES)
    diff, complete = review.change_lines(per_file=per_file, total=total)
    block = [fenced(visible("\n".join(diff)))] if diff else []
    if complete:
        return [
            *block,
            f"To use it again as it is now: /skills approve {review.name} {review.code}",
        ]
    if listed:
        return [*block, f"All of the change: /skills show {review.name}"]
    return [
        *block,
        f"Not all of the change fits here: read it with `switchboard skills show "
        f"{review.name}` on the gateway's machine. To use it again as it is now: "
        f"/skills approve {review.name} {review.code}",
    ]


def _show(library: SkillLibrary, name: str, principal: Principal) -> str:
    proposals = Proposals(library)
    proposal = proposals.get(name)
    try:
        if proposal is not None:
            review = proposals.review(name)
            return "\n".join(
                [
                    f"Proposed by the assistant ({_for_whom(proposal, principal)}):",
                    *review.lines(),
                    "",
                    proposals.text(proposal),
                    f"/skills approve {name}, /skills edit {name} (new text below) "
                    f"or /skills drop {name}",
                ]
            )
        review = review_installed(library, name)
        if not review.changes or review.hand_written or not principal.is_owner:
            return "\n".join(review.lines())
        return "\n".join([*review.lines(), *_change(review)])
    except (ProposalError, ReviewError) as exc:
        return f"{exc}."


def _approve(library: SkillLibrary, proposals: Proposals, name: str, given: str) -> str:
    """A proposal at once (``/skills show`` is there to read it first); a changed skill only
    with the code shown beside its change, so what is approved is what the owner read."""
    if proposals.get(name) is not None:
        proposals.approve(name)
        skill = next((s for s in library.skills() if s.folder.name == name), None)
        may = skill.permissions.summary() if skill is not None else "?"
        return f"Approved: {name} is a skill now (may use: {may})."
    review = review_installed(library, name)
    if library.lock.get(name) is not None and not review.changes:
        return f"{name} is unchanged since it was approved; nothing to do."
    if not review.hand_written and given.upper() != review.code:
        head = (
            f"That code is not for {name} as it is now: its files changed after the code "
            f"was shown (or it is mistyped). Read the change as it is now:"
            if given
            else f"{name} changed since you approved it. Read the change first:"
        )
        return "\n".join([head, *review.lines(), *_change(review)])
    approve(library, review)
    return "\n".join([f"Approved {name} as its files are now:", *review.lines()])
