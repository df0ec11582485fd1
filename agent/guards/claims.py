"""Verified completion: an answer's claims of having done something, against what the turn did.

Assistants report success after a failed tool, or without calling it at all ("I've sent the
email", and nothing was sent). Before an answer ends a turn, these rules find its claims of a
finished action, in English, German, Spanish and French, each with the kind of action it
claims (:class:`Action`) and, where the claim names it, the thing acted on (an email, a
reminder). A claim is backed by a call of the turn that succeeded and could have done it
(:func:`backs`): a send by a tool that reaches people, a save by one that writes, a schedule
by one that creates future work; an email only by ``send_email``, a reminder only by
``cron``. A claim that names files or email addresses ("I deleted report.pdf", "sent to
bob@example.com") is backed only by such a call on one of them, as the ledger recorded what
each call acted on (:func:`backed`; a file by its name without folders, in any case), unless
none of those calls names any. A tool acting on another system (an MCP server's tool) or
running a program (``exec``) backs any claim: the rules cannot tell what it did.

What is no claim: a sentence that asks ("Shall I send it?"); a clause that negates, plans,
offers or conditions ("I couldn't send it", "I'll send it once you confirm", "if you want I
can book it"); one about another time or person ("the email you sent", "I sent it
yesterday"); a send to the person themselves ("I've sent you the list below": the answer is
the send); and what the answer quotes (code, ``>`` quotes, a draft from its ``Subject:``
line on). The rules prefer missing a claim to flagging a true one. For text in none of the
four languages (:func:`readable`), the review stage may ask the model to find the claims
(:data:`FIND_PROMPT`), and checks what it lists the same way.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent.tools.base import Effect


class Action(enum.StrEnum):
    SENT = "sent"
    SAVED = "saved"
    SCHEDULED = "scheduled"
    CREATED = "created"
    DELETED = "deleted"
    PAID = "paid"
    BOOKED = "booked"


# What a successful call of a tool with this effect can have done; REMOTE and EXEC anything.
EFFECTS: dict[Action, frozenset[Effect]] = {
    Action.SENT: frozenset({Effect.SEND}),
    Action.SAVED: frozenset({Effect.WRITE}),
    Action.SCHEDULED: frozenset({Effect.SCHEDULE}),
    Action.CREATED: frozenset({Effect.WRITE, Effect.SCHEDULE}),
    Action.DELETED: frozenset({Effect.WRITE, Effect.SCHEDULE}),
    Action.PAID: frozenset(),
    Action.BOOKED: frozenset(),
}
OPAQUE = frozenset({Effect.REMOTE, Effect.EXEC})  # what they did, only they know
STATIVE = frozenset({Action.SENT, Action.SAVED, Action.SCHEDULED})  # "the email is sent"
# Things only one built-in tool acts on.
THING_TOOLS = {"email": frozenset({"send_email"}), "reminder": frozenset({"cron"})}


@dataclass(frozen=True, slots=True)
class Names:
    """The files and email addresses a text names, as they compare: a file by its name
    without folders, an address whole, both in lower case."""

    files: frozenset[str] = frozenset()
    addresses: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.files or self.addresses)


NO_NAMES = Names()


@dataclass(frozen=True, slots=True)
class Claim:
    action: Action
    thing: str  # "email", "reminder", "file", ... or "" when the claim names none
    said: str  # the clause that claims it
    names: Names = NO_NAMES  # the files and addresses it names

    def describe(self) -> str:
        """The claim in words: "an email was sent", "something was saved", "report.pdf was
        deleted", "an email was sent to bob@example.com"."""
        files = sorted(self.names.files)
        if files:
            subject = f"{', '.join(files)} {'were' if len(files) > 1 else 'was'}"
        elif self.thing:
            subject = f"{'an' if self.thing[0] in 'aeiou' else 'a'} {self.thing} was"
        else:
            subject = "something was"
        addresses = sorted(self.names.addresses)
        to = f" to {', '.join(addresses)}" if addresses and self.action is Action.SENT else ""
        return f"{subject} {self.action.value}{to}"


@dataclass(frozen=True, slots=True)
class Act:
    """One side-effecting call of the turn, as its tool ledger recorded it."""

    tool: str
    effect: Effect | None  # None: a tool no longer known (an MCP server's, gone)
    succeeded: bool  # ran to its end without an error
    detail: str = ""  # the first line of its error, or "outcome unknown"
    target: str = ""  # what it acted on, as its arguments name it: "notes/todo.md"

    def summary(self) -> str:
        """The call in words: "write_file notes/todo.md succeeded"."""
        call = f"{self.tool} {self.target}" if self.target else self.tool
        if self.succeeded:
            return f"{call} succeeded"
        return f"{call} failed ({self.detail})" if self.detail else f"{call} failed"


def backs(act: Act, claim: Claim) -> bool:
    """Whether ``act`` could have done what ``claim`` says was done."""
    if not act.succeeded:
        return False
    effect = act.effect or Effect.REMOTE
    if effect in OPAQUE:
        return True
    tools = THING_TOOLS.get(claim.thing)
    if tools is not None and claim.action in (Action.SENT, Action.SCHEDULED):
        return act.tool in tools
    return effect in EFFECTS[claim.action]


def backed(claim: Claim, acts: Sequence[Act]) -> bool:
    """Whether a call of the turn backs ``claim``: one that could have done it (:func:`backs`)
    and, for the files (and the addresses) the claim names, one on one of them, unless none
    of the calls that could have done it names any. So "I deleted report.pdf" is not backed
    by a write to todo.md, nor "I emailed bob@example.com" by an email to Dana, while "I've
    saved it" or "I saved it to MEMORY.md" after ``memory_append`` still are."""
    able = [act for act in acts if backs(act, claim)]
    if not able or not claim.names or any((a.effect or Effect.REMOTE) in OPAQUE for a in able):
        return bool(able)
    touched = [names(act.target) for act in able]
    files = frozenset().union(*(t.files for t in touched))
    addresses = frozenset().union(*(t.addresses for t in touched))
    return not (
        (files and claim.names.files and files.isdisjoint(claim.names.files))
        or (addresses and claim.names.addresses and addresses.isdisjoint(claim.names.addresses))
    )


def unbacked(claims: Iterable[Claim], acts: Sequence[Act]) -> list[Claim]:
    """The claims no successful call of the turn backs (each action, thing and names once)."""
    seen: set[tuple[Action, str, Names]] = set()
    found = []
    for claim in claims:
        key = (claim.action, claim.thing, claim.names)
        if key in seen or backed(claim, acts):
            continue
        seen.add(key)
        found.append(claim)
    return found


def ledger_text(acts: Sequence[Act]) -> str:
    """What the turn's tool ledger shows, in one line."""
    if not acts:
        return "no tool with a side effect ran in this turn"
    return "this turn's tool ledger shows: " + "; ".join(a.summary() for a in acts)


def fix_text(claims: Sequence[Claim], acts: Sequence[Act]) -> str:
    """What the model is told when its answer claims what no call did."""
    said = ", ".join(f'"{c.said}"' for c in claims)
    return (
        f"Your reply claims something was done that no successful tool call in this turn "
        f"did ({said}); {ledger_text(acts)}. Do it now with your tools if the user asked "
        f"for it, or correct the reply: say plainly what was done and what was not."
    )


def note(claims: Sequence[Claim], acts: Sequence[Act]) -> str:
    """The gateway's note under an answer whose claim stayed unbacked."""
    what = "; ".join(c.describe() for c in claims)
    return f"Note: the answer says {what}, but {ledger_text(acts)}."


# -- finding claims ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lexicon:
    """One language's words for the rules."""

    verbs: dict[str, Action]  # completed forms: "sent", "gesendet", "enviado", "envoyé"
    personal: frozenset[str]  # of them, forms that say "I" by themselves ("envié")
    # of them, forms that claim a side effect only with the thing named: "I've written a
    # haiku" is the answer itself, "I've written the file" is not
    vague: frozenset[str]
    # who does it: subject pronouns (and auxiliaries that name the person: "he", "habe");
    # the assistant's own are ``first``; with ``subject_first`` the clause's first one is
    # its subject ("Ich habe sie gespeichert"), else the last one before the verb ("I see
    # you've sent it")
    pronouns: re.Pattern[str]
    first: frozenset[str]
    subject_first: bool
    passive: re.Pattern[str]  # a completed passive, before the verb
    blockers: re.Pattern[str]  # negation, future, condition, offer, another time
    to_person: re.Pattern[str]  # the person as the recipient, right after the verb
    lead: frozenset[str]  # words that may stand before the verb of a bare "Email sent."
    follow: frozenset[str]  # words that may follow the verb of a bare claim ("Sent to Bob")
    common: frozenset[str]  # frequent words: is the text in this language at all?
    # a state right before the verb ("the email is sent"): a claim only with its thing named
    # ("it is sent every Monday" is a habit, not a claim)
    stative: re.Pattern[str] = re.compile(r"(?!)")
    # verbs that claim only with one thing named: "the reminder is set", not "all set"
    only_with: dict[str, str] = field(default_factory=dict)


def _forms(stems: dict[str, Action], endings: Sequence[str] = ("",)) -> dict[str, Action]:
    return {stem + ending: action for stem, action in stems.items() for ending in endings}


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


A = Action
ENGLISH = Lexicon(
    verbs={
        **dict.fromkeys(("sent", "emailed", "mailed", "forwarded", "texted"), A.SENT),
        **dict.fromkeys(("saved", "stored", "recorded", "written"), A.SAVED),
        **dict.fromkeys(("scheduled", "rescheduled", "set"), A.SCHEDULED),
        **dict.fromkeys(("created", "added"), A.CREATED),
        **dict.fromkeys(("deleted", "removed", "cancelled", "canceled", "erased"), A.DELETED),
        **dict.fromkeys(("paid", "transferred"), A.PAID),
        **dict.fromkeys(("booked", "reserved"), A.BOOKED),
    },
    personal=frozenset(),
    vague=_words("recorded written created added removed erased transferred"),
    pronouns=re.compile(r"\b(i|we|you|he|she|they|someone|somebody)\b"),
    first=_words("i we"),
    subject_first=False,
    passive=re.compile(r"(\b(has|have)|'s|'ve) been\b|\b(is|are) now\b|\bsuccessfully\b"),
    stative=re.compile(r"\b(is|are)\s+$"),
    only_with={"set": "reminder"},
    blockers=re.compile(
        r"\b(not|never|no|nothing|unable|fail(ed|s|ure)?|will|would|should|could|can|shall|"
        r"may|might|must|if|once|when|whenever|unless|until|before|after|going to|about to|"
        r"want me|like me|need to|needs to|let me|ready to|yesterday|earlier|previously|ago|"
        r"already|tomorrow|later|last (time|week|month|night|year))\b|n't\b|'ll\b|'d\b"
    ),
    to_person=re.compile(r"^\s*(you|to you|it to you|them to you)\b"),
    lead=_words(
        "the your a an all done ok okay also successfully just now ✅ email e-mail mail "
        "message reminder file note notes event payment booking reservation"
    ),
    follow=_words("to for at in on as under into your the it them all and successfully ✅ a an"),
    common=_words(
        "the and to of is you i it that for your have has been with this a are was be on in "
        "my me we not at as but or what how can do if will so there here an by from"
    ),
)

GERMAN = Lexicon(
    verbs={
        **dict.fromkeys(
            ("gesendet", "geschickt", "verschickt", "versendet", "versandt", "weitergeleitet"),
            A.SENT,
        ),
        **dict.fromkeys(("gespeichert", "abgespeichert", "hinterlegt", "eingetragen"), A.SAVED),
        **dict.fromkeys(("geplant", "eingeplant", "eingerichtet", "gestellt"), A.SCHEDULED),
        **dict.fromkeys(("erstellt", "angelegt", "hinzugefügt"), A.CREATED),
        **dict.fromkeys(("gelöscht", "entfernt", "storniert", "abgesagt"), A.DELETED),
        **dict.fromkeys(("bezahlt", "überwiesen", "beglichen"), A.PAID),
        **dict.fromkeys(("gebucht", "reserviert"), A.BOOKED),
    },
    personal=frozenset(),
    vague=_words("eingetragen erstellt angelegt hinzugefügt entfernt gestellt"),
    pronouns=re.compile(r"^(hab|habe)\b|\b(ich|wir|du|sie|er|ihr|man|jemand)\b"),
    first=_words("hab habe ich wir"),
    subject_first=True,
    passive=re.compile(
        r"\b(wurde|wurden)\b|\b(ist|sind) (jetzt|nun|erfolgreich)\b|\berfolgreich\b"
    ),
    blockers=re.compile(
        r"\b(nicht|kein\w*|nie|niemals|werde|werden|wird|würde\w*|soll\w*|könnte\w*|kann|"
        r"kannst|können|möchte\w*|willst|wenn|falls|sobald|bevor|nachdem|gestern|vorhin|"
        r"früher|bereits|schon|leider|fehlgeschlagen|konnte)\b"
    ),
    to_person=re.compile(r"^\s*(dir|ihnen|euch)\b"),
    lead=_words(
        "die der das deine dein ihre ihr alles erledigt ok auch erfolgreich jetzt ✅ "
        "e-mail mail nachricht erinnerung datei notiz termin zahlung buchung reservierung"
    ),
    follow=_words("an für um am im in als und ✅"),
    common=_words(
        "der die das und ich ist nicht du mit ein eine zu den habe für es auf sie wurde dem "
        "im in von auch wie wir ihr mir dir mein dein sich bei noch nur oder aber wenn hier"
    ),
)

SPANISH = Lexicon(
    verbs={
        **_forms(
            {
                "enviad": A.SENT,
                "mandad": A.SENT,
                "reenviad": A.SENT,
                "guardad": A.SAVED,
                "registrad": A.SAVED,
                "programad": A.SCHEDULED,
                "agendad": A.SCHEDULED,
                "cread": A.CREATED,
                "añadid": A.CREATED,
                "eliminad": A.DELETED,
                "borrad": A.DELETED,
                "cancelad": A.DELETED,
                "pagad": A.PAID,
                "transferid": A.PAID,
                "reservad": A.BOOKED,
            },
            ("o", "a", "os", "as"),
        ),
        **dict.fromkeys(("envié", "mandé", "reenvié"), A.SENT),
        **dict.fromkeys(("guardé",), A.SAVED),
        **dict.fromkeys(("programé", "agendé"), A.SCHEDULED),
        **dict.fromkeys(("creé", "añadí"), A.CREATED),
        **dict.fromkeys(("eliminé", "borré", "cancelé"), A.DELETED),
        **dict.fromkeys(("pagué", "transferí"), A.PAID),
        **dict.fromkeys(("reservé",), A.BOOKED),
    },
    personal=_words(
        "envié mandé reenvié guardé programé agendé creé añadí eliminé borré cancelé "
        "pagué transferí reservé"
    ),
    vague=frozenset(
        _forms(
            dict.fromkeys(("registrad", "cread", "añadid", "eliminad", "borrad"), A.CREATED),
            ("o", "a", "os", "as"),
        )
    )
    | _words("creé añadí eliminé borré"),
    pronouns=re.compile(r"\b(he|hemos|yo|nosotros|has|ha|han|tú|usted|él|ella|ellos|ellas)\b"),
    first=_words("he hemos yo nosotros"),
    subject_first=False,
    passive=re.compile(r"\b(ha sido|han sido|se ha|se han|quedó|quedaron|correctamente)\b"),
    blockers=re.compile(
        r"\b(no|nunca|jamás|voy|vamos|va|iré|podría\w*|puedo|puedes|puede|quieres|quiere|si|"
        r"cuando|antes|después|ayer|había|todavía|aún|lamentablemente|error|falló)\b"
    ),
    to_person=re.compile(r"^\s*(te|le|les|os|a ti|a usted)\b"),
    lead=_words(
        "el la los las tu su listo hecho ok también correctamente ya ✅ correo email "
        "mensaje recordatorio archivo nota pago reserva evento"
    ),
    follow=_words("a para en el la los las tu su y correctamente ✅"),
    common=_words(
        "el la los las de que y en es un una por para con tu he lo se del al no mi te su "
        "como más pero ya está muy también hay esto eso aquí"
    ),
)

FRENCH = Lexicon(
    verbs=_forms(
        {
            "envoyé": A.SENT,
            "transféré": A.SENT,
            "expédié": A.SENT,
            "enregistré": A.SAVED,
            "sauvegardé": A.SAVED,
            "programmé": A.SCHEDULED,
            "planifié": A.SCHEDULED,
            "créé": A.CREATED,
            "ajouté": A.CREATED,
            "supprimé": A.DELETED,
            "effacé": A.DELETED,
            "annulé": A.DELETED,
            "payé": A.PAID,
            "réglé": A.PAID,
            "réservé": A.BOOKED,
        },
        ("", "e", "s", "es"),
    ),
    personal=frozenset(),
    vague=frozenset(
        _forms(
            dict.fromkeys(("enregistré", "créé", "ajouté", "effacé"), A.CREATED),
            ("", "e", "s", "es"),
        )
    ),
    pronouns=re.compile(r"\b(j|je|nous|tu|vous|il|elle|ils|elles|on)\b"),
    first=_words("j je nous"),
    subject_first=True,
    passive=re.compile(r"\b(a été|ont été|bien|avec succès)\b"),
    blockers=re.compile(
        r"\b(ne|n|pas|jamais|vais|allons|va|pourrai\w*|peux|veux|voulez|si|quand|avant|"
        r"après|hier|déjà|malheureusement|échoué|impossible)\b"
    ),
    to_person=re.compile(r"^\s*(vous|te|t|à vous|à toi)\b"),
    lead=_words(
        "le la les l votre ton ta fait terminé ok aussi bien ✅ e-mail email mail "
        "courriel message rappel fichier note paiement réservation"
    ),
    follow=_words("à pour le la les dans en et avec ✅"),
    common=_words(
        "le la les de et est un une je vous pour que pas j des il en du au ce qui ne sur "
        "avec mais ou mon ton votre nous sont cette ici aussi très"
    ),
)

LEXICONS = (ENGLISH, GERMAN, SPANISH, FRENCH)

THINGS = {
    "email": (
        "email e-mail mail emails e-mails mails emailed mailed correo correos courriel courriels"
    ),
    "reminder": (
        "reminder reminders erinnerung erinnerungen recordatorio recordatorios rappel rappels "
        "alarm wecker alarma timer"
    ),
    "message": "message messages nachricht nachrichten mensaje mensajes",
    "file": "file files datei dateien archivo archivos fichier fichiers",
    "note": "note notes notiz notizen nota notas",
    "event": "event termin evento événement appointment meeting",
    "payment": "payment zahlung pago paiement invoice rechnung factura facture",
    "memory": "memory speicher gedächtnis memoria mémoire",
    "calendar": "calendar kalender calendario calendrier",
    "job": "job jobs task tasks aufgabe aufgaben tarea tareas tâche tâches",
    "booking": "booking reservation buchung reservierung reserva réservation table tisch mesa",
}
_THING_OF = {word: thing for thing, words in THINGS.items() for word in words.split()}

# What makes a word a file's name: one of these endings ("report.pdf", "notes/todo.md"). A
# known list, so that "example.com", "e.g." or "9.30" name no file.
FILE_ENDINGS = _words(
    """md markdown txt text rst tex pdf doc docx odt rtf epub csv tsv xls xlsx ods ppt pptx odp
    json jsonl yaml yml toml ini cfg conf xml sql db sqlite log html htm css js ts py sh ipynb
    ics vcf eml png jpg jpeg gif webp svg heic mp3 wav ogg m4a mp4 mov zip tar gz tgz 7z"""
)
_URL = re.compile(r"\b\w+://\S+")
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_AROUND = "\"'`“”‘’()[]<>*,;:!?."  # marks around a name: "(report.pdf)", "todo.md."


def names(text: str) -> Names:
    """The files and email addresses ``text`` names (a claim's clause, a call's target)."""
    text = text.lower()
    if "://" in text:
        text = _URL.sub(" ", text)  # a page's address names no file of the turn
    addresses = frozenset(_ADDRESS.findall(text)) if "@" in text else frozenset()
    files = frozenset(
        name for word in text.split() if "." in word and (name := _file(word)) is not None
    )
    return Names(files, addresses) if files or addresses else NO_NAMES


def _file(word: str) -> str | None:
    """The name (without folders) of the file ``word`` names, if it names one."""
    if "@" in word:
        return None
    name = word.strip(_AROUND).rpartition("/")[2].rpartition("\\")[2]
    stem, _, ending = name.rpartition(".")
    return name if stem and ending in FILE_ENDINGS else None


_QUOTED = re.compile(
    r"```.*?```|`[^`\n]*`|^\s*>.*$|“[^”]*”|\"[^\"\n]{12,}\"", re.DOTALL | re.MULTILINE
)
_DRAFT = re.compile(r"^\s*\**(subject|betreff|asunto|objet)\**\s*:", re.IGNORECASE | re.MULTILINE)
# a dot inside a word ("report.pdf", "bob@example.com") ends no sentence
_SENTENCE = re.compile(r"[^.!?\n]+(?:\.(?=\w)[^.!?\n]*)*[.!?]*")
_CLAUSE = re.compile(r"[,;:()]|\s[-–—]\s|\s(?:and|but|und|aber|y|pero|et|mais)\s")
_WORD = re.compile(r"[\w-]+|✅", re.UNICODE)
MAX_LEAD = 3  # words before the verb of a bare claim ("Your email sent." has two)
# Common words of other languages written in Latin letters (Italian, Portuguese, Dutch,
# Swedish, Danish, Norwegian, Polish, Czech, Turkish, Indonesian), none a common word of the
# four: where they outnumber the four's, the rules cannot read the text.
OTHER_COMMON = _words(
    """il di che è non sono ho gli della delle nel alla questo anche più ma ti mi ci
    não uma com você está foi são às ao pelo isso eu mas já
    het een ik niet van zijn voor maar ook dit wat heb hebt naar
    och att inte jag det som är på för med av till vi ett
    og ikke jeg være fra
    się nie jest że jak ale tak już czy mnie
    jsem že ale jak
    bir ve bu ne için ile çok ama
    yang ini itu dengan untuk tidak saya"""
) - frozenset().union(*(lexicon.common for lexicon in LEXICONS))
FOREIGN_WORDS = 2  # at least this many of them make a text foreign


def claims(text: str) -> list[Claim]:
    """The claims of completed actions in ``text`` the rules can read."""
    found = []
    for sentence in _SENTENCE.findall(_unquoted(text)):
        if sentence.rstrip().endswith("?"):
            continue
        carried = False  # the clause before claimed: "I saved it and emailed Bob"
        parts = [p for p in _CLAUSE.split(sentence.strip()) if p]
        for clause in parts:
            claim = _claim(clause.strip(" \t*-•–—✔️").lower().replace("’", "'"), carried)
            carried = claim is not None
            if claim is not None:
                found.append(claim)
    return found


def readable(text: str) -> bool:
    """Whether the rules can read the text: unless it is written mostly outside the Latin
    alphabets, or the common words of another language (Italian, Portuguese, Dutch, ...)
    outnumber those of the four, it counts as read (a list, numbers or code have no
    language to ask the model about)."""
    body = _unquoted(text)
    letters = [c for c in body if c.isalpha()]
    if letters and sum(c > "ɏ" for c in letters) * 2 > len(letters):
        return False  # mostly outside the Latin alphabets
    words = [w.lower() for w in _WORD.findall(body)]
    ours = max(sum(w in lexicon.common for w in words) for lexicon in LEXICONS)
    theirs = sum(w in OTHER_COMMON for w in words)
    return theirs < FOREIGN_WORDS or theirs <= ours


def _unquoted(text: str) -> str:
    draft = _DRAFT.search(text)
    if draft is not None:
        text = text[: draft.start()]
    return _QUOTED.sub(_name_only, text)


def _name_only(quoted: re.Match[str]) -> str:
    """What stays of a quote: a file's name or an address alone ("I deleted `notes.md`")
    without its marks, else nothing."""
    inner = quoted.group(0).strip('`“”" ')
    return inner if " " not in inner and names(inner) else " "


def _claim(clause: str, carried: bool) -> Claim | None:
    words = _WORD.findall(clause)
    for lexicon in LEXICONS:
        for index, word in enumerate(words):
            action = lexicon.verbs.get(word)
            if action is None:
                continue
            claim = _claimed(lexicon, clause, words, index, action, carried=carried)
            if claim is not None:
                return claim
    return None


def _claimed(
    lexicon: Lexicon,
    clause: str,
    words: list[str],
    index: int,
    action: Action,
    *,
    carried: bool,
) -> Claim | None:
    if lexicon.blockers.search(clause):
        return None
    start = clause.find(words[index])
    before, after = clause[:start], clause[start + len(words[index]) :]
    following = words[index + 1] if index + 1 < len(words) else None
    bare = (
        index <= MAX_LEAD
        and all(w in lexicon.lead for w in words[:index])
        # "Sent to Bob", "Deleted notes.md"
        and (following is None or following in lexicon.follow or _names_file(after))
    )
    # a state claims what the assistant itself does (an email sent, a file saved, a reminder
    # set), not one of the world ("the invoice is paid" is a fact it may only report)
    stative = action in STATIVE and lexicon.stative.search(before) is not None
    claimed = (
        words[index] in lexicon.personal
        or _by_assistant(lexicon, before)
        or lexicon.passive.search(before) is not None
        or stative
        or bare
        or (index == 0 and carried)
    )
    if not claimed:
        return None
    thing = next((_THING_OF[w] for w in words if w in _THING_OF), "")
    if not thing and (words[index] in lexicon.vague or stative):
        return None
    if lexicon.only_with.get(words[index], thing) != thing:
        return None
    if action is Action.SENT and thing != "email" and lexicon.to_person.search(after):
        return None  # "I've sent you the list below": the answer itself is the send
    return Claim(action, thing, clause, names(clause))


def _names_file(text: str) -> bool:
    """Whether ``text`` begins with a file's name ("notes.md is gone")."""
    words = text.split(maxsplit=1)
    return bool(words) and _file(words[0]) is not None


def _by_assistant(lexicon: Lexicon, before: str) -> bool:
    """Whether the subject of the verb, as the words before it say, is the assistant."""
    found = [m.group(0) for m in lexicon.pronouns.finditer(before)]
    if not found:
        return False
    return (found[0] if lexicon.subject_first else found[-1]) in lexicon.first


FIND_PROMPT = (
    "Read this reply of an assistant to its user. List every action the reply says the "
    "assistant has ALREADY completed, one per line, as `CLAIM: <kind> | <thing> | <words>`: "
    "kind is one of sent, saved, scheduled, created, deleted, paid, booked; thing is email, "
    "reminder or other; words are the reply's own words that say it. Leave out actions it "
    "only offers, plans or asks about, says failed, or says were done before this "
    "conversation. If there are none, answer exactly NONE.\n\nReply:\n{reply}"
)
_LISTED = re.compile(r"^\s*CLAIM:\s*(\w+)\s*\|\s*(\w+)\s*\|\s*(.*)$", re.IGNORECASE | re.MULTILINE)


def listed(answer: str) -> list[Claim]:
    """The claims the model listed in its answer to :data:`FIND_PROMPT`."""
    found = []
    for kind, thing, words in _LISTED.findall(answer):
        try:
            action = Action(kind.lower())
        except ValueError:
            continue
        name = thing.lower() if thing.lower() in THING_TOOLS else ""
        said = words.strip()[:200]
        found.append(Claim(action, name, said, names(said)))
    return found
