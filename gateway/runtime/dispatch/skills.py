"""``/skills`` in the chat: what is installed and what each skill may do; for the owner, the
assistant's proposals and the skills that changed since they were approved, and the
decisions on them.

    /skills                      the list (proposals and changed skills too, for the owner)
    /skills show NAME            a proposal's text, or a skill's files and permissions
    /skills approve NAME         a proposal becomes a skill; a changed skill is used again
    /skills edit NAME            (the new SKILL.md on the following lines) rewrite a proposal
    /skills drop NAME            forget a proposal

Answered by the gateway itself, never by the model: no text a turn read can approve anything.
"""

from __future__ import annotations

from agent.skills.library import SkillLibrary
from agent.skills.proposals import ProposalError, Proposals
from agent.skills.review import ReviewError, approve, review_installed
from gateway.core.messages import InboundMessage
from gateway.core.principal import Principal

USAGE = "Usage: /skills [show NAME | approve NAME | edit NAME (new text below) | drop NAME]"


def answer(msg: InboundMessage, principal: Principal, library: SkillLibrary) -> str:
    head, _, rest = msg.text.partition("\n")
    words = head.split()[1:]
    action = words[0].lower() if words else "list"
    if action == "list":
        return listing(library, owner=principal.is_owner)
    if len(words) != 2:
        return USAGE
    name = words[1]
    if action == "show" and principal.is_admin:
        return _show(library, name)
    if action in ("approve", "edit", "drop") and not principal.is_owner:
        return "Only the owner decides which skills are used."
    proposals = Proposals(library)
    try:
        if action == "approve":
            return _approve(library, proposals, name)
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


def listing(library: SkillLibrary, *, owner: bool) -> str:
    skills = library.skills()
    lines = ["Skills:" if skills else "No skills installed."]
    for skill in skills:
        may = skill.permissions.summary() if skill.bounded else "what the person may (hand-written)"
        lines.append(f"- {skill.folder.name}: {skill.description or '(no description)'}")
        lines.append(f"  may use: {may}")
    if not owner:
        return "\n".join(lines)
    left_out = library.problems()
    if left_out:
        lines.append("Left out:")
        lines += [f"- {p.path.parent.name}: {p.reason}" for p in left_out]
    waiting = Proposals(library).pending()
    if waiting:
        lines.append("Proposed by the assistant, waiting for you (/skills show NAME first):")
        lines += [f"- {p.name} (for {p.by}, {p.at})" for p in waiting]
    return "\n".join(lines)


def _show(library: SkillLibrary, name: str) -> str:
    proposals = Proposals(library)
    proposal = proposals.get(name)
    try:
        if proposal is not None:
            review = proposals.review(name)
            return "\n".join(
                [
                    f"Proposal {name} (for {proposal.by}, {proposal.at}):",
                    *review.lines(),
                    "",
                    proposals.text(proposal),
                    f"/skills approve {name}, /skills edit {name} (new text below) "
                    f"or /skills drop {name}",
                ]
            )
        return "\n".join(review_installed(library, name).lines())
    except (ProposalError, ReviewError) as exc:
        return f"{exc}."


def _approve(library: SkillLibrary, proposals: Proposals, name: str) -> str:
    if proposals.get(name) is not None:
        proposals.approve(name)
        skill = next((s for s in library.skills() if s.folder.name == name), None)
        may = skill.permissions.summary() if skill is not None else "?"
        return f"Approved: {name} is a skill now (may use: {may})."
    review = review_installed(library, name)
    if library.lock.get(name) is not None and not review.changes:
        return f"{name} is unchanged since it was approved; nothing to do."
    approve(library, review)
    return "\n".join([f"Approved {name} as its files are now:", *review.lines()])
