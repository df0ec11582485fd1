"""A labelled set for recall: things people said in past turns, and later questions about them
in other words (synonyms, paraphrases, most sharing no word with what was said), among
small talk that answers none of them. tests/test_recall_quality.py measures recall@5 on it
and bench/recall.py reports it beside keyword-only search (docs/performance.md).

Each case is (what the person said in one turn, the question asked much later).
"""

from __future__ import annotations

from agent.recall.search import Recaller
from gateway.store import NewMessage, Store

CASES: tuple[tuple[str, str], ...] = (
    ("My bicycle is locked in the basement of Elm Street 12", "where did I leave bike"),
    ("I parked the car on level 3 of the airport garage", "where is my vehicle"),
    ("My sister's birthday is on the 4th of May", "when was my sibling born"),
    (
        "The wifi password at the cottage is taped under the fridge",
        "how do I get online at the cabin",
    ),
    ("We adopted a cat called Pixel last spring", "what's the name of our kitty"),
    ("My dentist appointment moved to Tuesday at 9", "when do I see the tooth doctor"),
    ("I'm allergic to penicillin", "which antibiotics must I avoid"),
    (
        "Our anniversary dinner is booked at Luigi's trattoria on Friday",
        "where is the restaurant reservation",
    ),
    ("My passport expires in March next year", "when does my travel document run out"),
    ("I lent my drill to Marco, the neighbour", "who borrowed my power tool"),
    ("The spare house key is hidden under the blue flowerpot", "where's the extra key to the home"),
    ("My daughter's school play is on the 12th at 6 pm", "when is the kid's theatre performance"),
    (
        "I take my blood pressure pills every morning with breakfast",
        "when should I have my medication",
    ),
    ("My favourite dish is mushroom risotto", "what food do I like most"),
    ("Our flight to Lisbon leaves at 7:40 from gate B12", "when does the plane to Portugal depart"),
    (
        "The plumber is coming on Thursday to fix the leaking sink",
        "when will someone repair the kitchen tap",
    ),
    ("I keep my tax documents in the grey folder in the study", "where are my papers for the IRS"),
    ("My mother's phone number changed to 0612 345 678", "how can I call mom now"),
    ("I started learning Japanese on Duolingo", "which language am I studying"),
    ("The car needs an oil change at 90,000 km", "when is the next engine service due"),
    ("My gym membership renews on the first of each month", "when does the fitness club charge me"),
    ("Tom owes me 40 euros for the concert tickets", "how much money is my friend in debt to me"),
    ("I'm vegetarian, no meat or fish please", "what's my diet"),
    ("My shoe size is 43", "what size are my feet"),
    ("The boiler was serviced in October", "when was the heating last checked"),
    ("I buried the time capsule by the old oak in the garden", "where did we hide the memory box"),
    ("My laptop's warranty ends in June", "until when is the computer guaranteed"),
    (
        "Grandma's recipe for apple pie uses cinnamon and a pinch of nutmeg",
        "which spices go in the dessert",
    ),
    ("The kids' pediatrician is Dr. Alvarez", "who is the children's doctor"),
    ("I left my umbrella at the office on Monday", "where did I forget my brolly"),
    ("Our landlord's name is Mr. Petersen", "who owns the flat we rent"),
    ("My bank card PIN reminder is in the safe", "where did I note the code for my debit card"),
    ("I sold the old sofa to a student for 50 euros", "what happened to the couch"),
    (
        "The garden hose is stored in the shed behind the lawnmower",
        "where do we keep the watering pipe",
    ),
    ("My running route is along the canal, 8 kilometres", "how far do I jog"),
    ("The concert tickets are for the 21st, row F", "which seats do we have for the gig"),
    (
        "Our neighbour waters the plants while we're on holiday",
        "who takes care of the greenery when we travel",
    ),
    ("I cancelled the magazine subscription last week", "did I stop the periodical"),
    ("The baby monitor batteries are AA", "what cells does the infant camera use"),
    ("My boss prefers reports on Friday afternoons", "when should I send my manager the summary"),
    ("I stored the winter tyres at the garage on Oak Road", "where are the snow wheels"),
    (
        "Our home insurance policy number is HX-4411",
        "what is the number of the house coverage contract",
    ),
    ("My brother moved to Toronto in August", "where does my sibling live now"),
    ("The water meter reading was 1234 cubic metres", "how much did the utility gauge show"),
    ("I'm training for the half marathon in April", "what race am I preparing for"),
    ("We painted the bedroom sage green", "what colour are the sleeping room walls"),
    ("My wedding ring is being resized at the jeweller", "where is my band"),
    ("The dog's vaccination is due in November", "when does the puppy need its shots"),
    ("I put the Christmas decorations in the attic", "where are the holiday ornaments"),
    ("The electrician said the fuse box is outdated", "what did the guy fixing the wiring say"),
    ("My coffee order is an oat flat white", "how do I take my espresso drink"),
    ("I gave the old books to the library charity sale", "what did I do with the novels"),
    ("We're hosting Thanksgiving for twelve people", "how many guests for the holiday feast"),
    ("My password manager is Bitwarden", "which app keeps my logins"),
    ("The bus to work leaves at 7:15 from the corner stop", "when does my commute transport go"),
    ("I hurt my left knee playing football", "which leg is injured"),
    ("Our cleaner comes every second Wednesday", "how often does the housekeeper visit"),
    ("The printer ink cartridge model is HP 305", "what refill does the printing machine need"),
    ("My yoga class moved to the community centre", "where is the stretching lesson now"),
    (
        "I keep the emergency cash in the red tin in the kitchen",
        "where is the money for emergencies",
    ),
)

# What else was said meanwhile: close in topic to some cases, answering none of them.
SMALL_TALK: tuple[str, ...] = (
    "Good morning! How are you today?",
    "Can you tell me a joke about cats?",
    "What's the weather like in Paris usually in spring?",
    "Translate 'thank you' into Spanish",
    "Remind me how to boil an egg",
    "What is the capital of Australia?",
    "Write a short poem about the sea",
    "How many kilometres is a mile?",
    "I watched a great movie yesterday",
    "Do you know any good podcasts about history?",
    "What's a synonym for happy?",
    "I'm tired, long day at work",
    "Explain photosynthesis simply",
    "Suggest a name for a goldfish",
    "What time zone is Tokyo in?",
    "Tell me something interesting about octopuses",
    "How do I convert Celsius to Fahrenheit?",
    "Recommend a board game for four players",
    "What does 'serendipity' mean?",
    "I need ideas for a rainy Sunday",
    "How long should I steep green tea?",
    "What is the tallest mountain in Europe?",
    "Can you summarise the plot of Hamlet?",
    "I'm thinking about learning to play guitar",
    "What's the difference between a crocodile and an alligator?",
    "Give me a quick stretching routine",
    "How do plants drink water?",
    "What's a good gift for a coworker?",
    "Why is the sky blue?",
    "Help me write a thank-you note",
    "What year did the Berlin Wall fall?",
    "I love the smell of fresh bread",
    "Which planet has the most moons?",
    "How do I remove a coffee stain from a shirt?",
    "What's the best way to fall asleep faster?",
    "List three fun facts about bees",
    "Is it going to be a busy week, do you think?",
    "I finished reading a mystery novel",
    "How many bones does an adult have?",
    "Suggest a quick vegetarian lunch",
    "My neighbour has a very loud parrot",
    "The traffic was terrible this morning",
    "What is a haiku?",
    "Can you explain compound interest?",
    "I saw a rainbow on the way home",
    "What's the origin of the word 'salary'?",
    "I might repaint the fence someday",
    "Tell me about the history of chess",
    "What should I cook for friends tonight?",
    "How far is the moon from the earth?",
)

ANSWER = "Okay, got it."


async def load(
    store: Store, *, session: str = "t:ann", scope: str = "main|person:t:ann"
) -> dict[str, int]:
    """Each case and each piece of small talk as a turn of its own (the person's words and a
    short answer), cases and small talk taking turns; the message id of each case's words,
    by question."""
    expected: dict[str, int] = {}
    talk = iter(SMALL_TALK)
    for number, (said, question) in enumerate(CASES):
        for words in (said, next(talk, None)):
            if words is None:
                continue
            turn = f"turn-{number}-{len(expected)}-{hash(words) & 0xFFFF}"
            await store.journal.start_turn(turn, session, "chat", [])
            ids = await store.history.add_checkpoints(
                session,
                turn,
                [
                    NewMessage("user", {"role": "user", "content": words}),
                    NewMessage("assistant", {"role": "assistant", "content": ANSWER}),
                ],
            )
            await store.commit_turn(turn_id=turn, session_key=session, replies=[], scope=scope)
            if words == said:
                expected[question] = ids[0]
    return expected


async def recall_at(
    recaller: Recaller, expected: dict[str, int], sessions: list[str], k: int = 5
) -> float:
    """The share of questions whose expected message is among the first ``k`` hits."""
    found = 0
    for question, message_id in expected.items():
        searched = await recaller.search(question, sessions=sessions, limit=k)
        found += any(f.said is not None and f.said.message_id == message_id for f in searched.found)
    return found / len(expected)
