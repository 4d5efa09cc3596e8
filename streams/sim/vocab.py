"""Vocabularies of the simulated conversations: five domains and the compactor's forms.

Each domain (:class:`~spanguard.streams.sim.texts.Domain`) lists its entity kinds with a
factory of surfaces, and its messages (:class:`~spanguard.streams.sim.texts.Beat`) in a
long, a short and a tiny form: a paraphrase moves a message one form down and
keeps its entities. The forms at the end are what a compactor writes: summaries,
lossy rewrites, the condensed small talk that poisons a span, a harness digest.

People speak in them as in real conversations (contract 1.2, "Referents"):
venues and people are named (``Warkworth House``) and later written in lower case
(``warkworth house``), shortened (``the Warkworth``) or referred to by a phrase
(``that hotel``); booking references are upper-case codes (``EZNVJAPG``), phone
numbers come in groups (``01223 356354``), tool results are JSON objects with
``reservation_id``, ``user_id``, ``flight_number``, ``price`` and ``stars``
fields, and cities are places used as locations (``a train to Cambridge``), which
hold nothing. Every other word is ordinary vocabulary or a code, so that a text
holds exactly what its template says (a test runs the extractor on every text).
The words names are made of are neither ordinary nor known proper nouns (a test
checks them against the extractor's lists), so a name is a name in any case and
after any preposition; the cities are known proper nouns, so they are places.
"""

from __future__ import annotations

import random

from spanguard.streams.sim.texts import Beat, Domain, Entity, Kind

CITIES = ("Cambridge", "London", "York", "Leeds", "Boston", "Chicago")
"""The cities the texts travel to and from: always after ``in``, ``from``, ``to``,
``near`` or before ``station`` (places used as locations, which hold nothing), and
all proper nouns the extractor's dictionaries know."""


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randint(10 ** (n - 1), 10**n - 1))


def _account(rng: random.Random) -> str:
    return f"{_digits(rng, 4)}-{rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ')}"


def _path(rng: random.Random) -> str:
    folder = rng.choice(["src/app", "src/api", "src/db", "src/core", "lib/auth", "tests"])
    name = rng.choice(["main", "models", "views", "auth", "cache", "routes", "utils", "jobs"])
    return f"{folder}/{'test_' if folder == 'tests' else ''}{name}.py"


def _booking(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return (
        rng.choice(letters)
        + rng.choice(letters)
        + str(rng.randint(2, 9))
        + rng.choice(letters)
        + _digits(rng, 2)
    )


SUPPORT = Domain(
    name="support",
    referent_dense=True,
    kinds={
        "order": ("id", lambda r: _digits(r, 5)),
        "account": ("id", _account),
        "ticket": ("id", lambda r: f"INC-{_digits(r, 4)}"),
    },
    opening=(
        Beat(
            "user",
            (
                "Hi, I was charged twice for <e0> last week and would like my money back.",
                "Charged twice for <e0>; wants money back.",
                "<e0>: charged twice.",
            ),
            ("+order",),
        ),
    ),
    user=(
        Beat(
            "user",
            (
                "It is <e0>, the one flagged last week by your fraud team.",
                "Customer gave <e0>, flagged last week.",
                "<e0> flagged.",
            ),
            ("+account",),
        ),
        Beat(
            "user",
            (
                "Did <a0:that> clear KYC yet? I need it settled before Friday.",
                "Asked whether <a0:that> cleared KYC.",
                "KYC for <a0:that>?",
            ),
            ("account",),
        ),
        Beat(
            "user",
            (
                "Any news on <k0>? It has been open for a while.",
                "Asked for news on <k0>.",
                "News on <k0>?",
            ),
            ("ticket",),
        ),
        Beat(
            "user",
            (
                "Please make sure <a0:the> is refunded in full, not just one charge.",
                "Wants <a0:the> refunded in full.",
                "Refund <a0:the> in full.",
            ),
            ("order",),
        ),
        Beat(
            "user",
            (
                "There is also <e0> from March with the same problem.",
                "Also <e0>, same problem.",
                "Also <e0>.",
            ),
            ("+order",),
        ),
        Beat(
            "user",
            (
                "How long does the review usually take?",
                "Asked how long the review takes.",
                "Review time?",
            ),
        ),
        Beat("user", ("Okay, thanks for checking.", "Thanked the agent.", "Thanks.")),
        Beat(
            "user",
            (
                "My partner also pays with <e0>, is that a problem?",
                "Partner also uses <e0>.",
                "Shared: <e0>.",
            ),
            ("account",),
        ),
        Beat(
            "user",
            (
                "Is <e0> the only one affected?",
                "Asked if only <e0> is affected.",
                "Only <e0>?",
            ),
            ("order",),
        ),
    ),
    tool=(
        Beat(
            "tool",
            (
                "order_status: <e0> shipped Monday, two charges of 49.00 EUR on card ending 4421.",
                "<e0> shipped, two charges of 49.00 EUR.",
                "<e0>: two charges.",
            ),
            ("order",),
        ),
        Beat(
            "tool",
            (
                "kyc_status: <e0> pending review; opened <e1> for the refund request.",
                "<e0> pending review, <e1> opened.",
                "<e0> pending; <e1>.",
            ),
            ("account", "+ticket"),
        ),
        Beat(
            "tool",
            (
                "ticket_status: <e0> assigned to payments, priority high.",
                "<e0> with payments, high priority.",
                "<e0>: payments.",
            ),
            ("ticket",),
        ),
        Beat(
            "tool",
            (
                "customer_profile: profile linked to <e0>, created in 2019.",
                "Profile linked to <e0>.",
                "<e0> linked.",
            ),
            ("+account",),
        ),
        Beat(
            "tool",
            (
                "refund_status: <e0> refund queued, 49.00 EUR.",
                "<e0> refund queued.",
                "<e0> queued.",
            ),
            ("order",),
        ),
    ),
    assistant=(
        Beat(
            "assistant",
            (
                "I can see two charges on <a0:that> and will look into it now.",
                "Two charges confirmed on <a0:that>.",
                "Charges on <a0:that>.",
            ),
            ("order",),
        ),
        Beat(
            "assistant",
            (
                "Your profile is under a routine review; <a0:the> should clear soon.",
                "Said <a0:the> should clear soon.",
                "<a0:the> clearing soon.",
            ),
            ("account",),
        ),
        Beat(
            "assistant",
            (
                "The refund is filed under <k0>; updates will follow by mail.",
                "Refund filed under <k0>.",
                "Filed under <k0>.",
            ),
            ("ticket",),
        ),
        Beat(
            "assistant",
            (
                "I have escalated <a0:the> to the payments desk.",
                "Escalated <a0:the>.",
                "<a0:the> escalated.",
            ),
            ("ticket",),
        ),
        Beat("assistant", ("Usually two business days.", "Two business days.", "Two days.")),
        Beat("assistant", ("Let me check that for you.", "Checking now.", "Checking.")),
        Beat(
            "assistant",
            ("Thanks for your patience while I look into this.", "Thanked for patience.", "Noted."),
        ),
    ),
)

CODE = Domain(
    name="code",
    referent_dense=True,
    kinds={
        "file": ("path", _path),
        "build": ("id", lambda r: str(r.randint(20000, 29999))),
        "issue": ("id", lambda r: f"BUG-{_digits(r, 4)}"),
    },
    opening=(
        Beat(
            "user",
            (
                "The integration test in <e0> fails since <e1>.",
                "Test in <e0> failing since <e1>.",
                "<e0> red since <e1>.",
            ),
            ("+file", "+build"),
        ),
    ),
    user=(
        Beat(
            "user",
            (
                "This may be related to <e0> from the tracker.",
                "Maybe related to <e0>.",
                "Related: <e0>.",
            ),
            ("+issue",),
        ),
        Beat(
            "user",
            (
                "Does <a0:the same> still fail on main?",
                "Asked if <a0:the same> fails on main.",
                "<a0:the same> on main?",
            ),
            ("build",),
        ),
        Beat(
            "user",
            (
                "Yesterday I changed something in <k0>, could that matter?",
                "Changed something in <k0> yesterday.",
                "Edited in <k0>.",
            ),
            ("file",),
        ),
        Beat(
            "user",
            (
                "Is <a0:that> already assigned to someone?",
                "Asked who owns <a0:that>.",
                "<a0:that> owner?",
            ),
            ("issue",),
        ),
        Beat(
            "user",
            ("Please keep the fix small, we release today.", "Wants a small fix.", "Small fix."),
        ),
        Beat(
            "user",
            (
                "The stack trace also points at <e0>.",
                "Trace points at <e0>.",
                "Trace: <e0>.",
            ),
            ("+file",),
        ),
        Beat(
            "user",
            ("Can you diff <e0> against main?", "Diff <e0> against main.", "Diff <e0>."),
            ("file",),
        ),
        Beat("user", ("Thanks, that was quick.", "Thanked the agent.", "Thanks.")),
    ),
    tool=(
        Beat(
            "tool",
            (
                "ci_log: <e0> red, <e1> line 88 failed an assertion.",
                "<e0> red at <e1>.",
                "<e0> red, <e1>.",
            ),
            ("build", "file"),
        ),
        Beat(
            "tool",
            (
                "git_blame: last change in <k0> by dana two days ago.",
                "Last change in <k0> by dana.",
                "Blame in <k0>.",
            ),
            ("file",),
        ),
        Beat(
            "tool",
            ("tracker: <e0> open, reported by two users.", "<e0> open, two reports.", "<e0> open."),
            ("issue",),
        ),
        Beat(
            "tool",
            ("ci_trigger: started <e0> on main.", "Started <e0>.", "<e0> started."),
            ("+build",),
        ),
    ),
    assistant=(
        Beat(
            "assistant",
            (
                "I will start with <a0:that> and narrow it down from there.",
                "Starting with <a0:that>.",
                "First <a0:that>.",
            ),
            ("file",),
        ),
        Beat(
            "assistant",
            (
                "<a0:that> describes the same stack trace.",
                "<a0:that> matches the trace.",
                "<a0:that> matches.",
            ),
            ("issue",),
        ),
        Beat(
            "assistant",
            (
                "I can reproduce it locally on <a0:that>.",
                "Reproduced on <a0:that>.",
                "Seen on <a0:that>.",
            ),
            ("build",),
        ),
        Beat("assistant", ("Running the tests again now.", "Running tests again.", "Tests again.")),
        Beat("assistant", ("The fix looks straightforward.", "Fix is simple.", "Simple fix.")),
    ),
)

TRAVEL = Domain(
    name="travel",
    referent_dense=False,
    kinds={"booking": ("id", _booking)},
    opening=(
        Beat(
            "user",
            (
                "I want a quiet hotel near the old town in York for three nights.",
                "Wants a quiet hotel in York, three nights.",
                "A quiet hotel in York, three nights.",
            ),
        ),
    ),
    user=(
        Beat(
            "user",
            (
                "Which neighbourhood is best for walking?",
                "Asked about areas to walk in.",
                "Area to walk?",
            ),
        ),
        Beat(
            "user",
            (
                "I already hold <e0> for Friday, can we keep it?",
                "Holds <e0> for Friday.",
                "<e0> held.",
            ),
            ("+booking",),
        ),
        Beat("user", ("Is breakfast usually included?", "Asked about breakfast.", "Breakfast?")),
        Beat(
            "user",
            (
                "We are driving up from London, is there parking?",
                "Driving from London, asked about parking.",
                "Parking? Coming from London.",
            ),
        ),
        Beat(
            "user",
            (
                "Could we take a day trip to Leeds on Sunday?",
                "Asked about a day trip to Leeds.",
                "Trip to Leeds?",
            ),
        ),
        Beat(
            "user",
            (
                "Can you move <a0:that> to Saturday?",
                "Wants <a0:that> moved to Saturday.",
                "Move <a0:that>.",
            ),
            ("booking",),
        ),
        Beat("user", ("Great, that sounds good.", "Agreed.", "Okay.")),
    ),
    tool=(
        Beat(
            "tool",
            (
                "search_hotels: 12 results, median price 140 EUR.",
                "12 results, median 140 EUR.",
                "12 results.",
            ),
        ),
        Beat(
            "tool",
            (
                "weather: mild in York, light rain on Sunday.",
                "Mild in York, rain on Sunday.",
                "Mild in York.",
            ),
        ),
        Beat(
            "tool",
            ("booking_status: <e0> confirmed, two guests.", "<e0> confirmed.", "<e0> ok."),
            ("booking",),
        ),
    ),
    assistant=(
        Beat(
            "assistant",
            (
                "Here are three options near the river.",
                "Three options by the river.",
                "Three options.",
            ),
        ),
        Beat(
            "assistant",
            ("The old town is best on foot.", "Old town is best on foot.", "On foot."),
        ),
        Beat(
            "assistant",
            (
                "Breakfast is included in most of them.",
                "Breakfast mostly included.",
                "Breakfast included.",
            ),
        ),
        Beat(
            "assistant",
            ("I found <a0:that> in the system.", "Found <a0:that>.", "<a0:that> found."),
            ("booking",),
        ),
    ),
)

# --- names, codes and phones (contract 1.2) -----------------------------------------
# Distinctive words: neither ordinary vocabulary nor proper nouns a dictionary knows
# (tests/sim checks both against the extractor's lists), so that a name made of one is
# a name in lower case too, and even after "at" or "to".
HOTEL_WORDS = [
    "Warkworth",
    "Allenbell",
    "Ashbury",
    "Kinloch",
    "Brackendale",
    "Fennimore",
    "Carrowmore",
    "Abbotsley",
    "Wendover",
    "Tanglewood",
    "Pemberton",
    "Lensfield",
    "Arbury",
    "Avebury",
    "Gonville",
    "Aylesbray",
    "Thornbury",
    "Wrexley",
    "Pennick",
    "Quenby",
    "Ravelston",
    "Elmsworth",
    "Fairleigh",
    "Glenrock",
    "Ashdown",
    "Birchfield",
]
HOTEL_HEADS = (("House", "house"), ("Lodge", "lodge"), ("Hotel", "hotel"), ("Guest House", "house"))
RESTAURANT_WORDS = [
    "Meghna",
    "Pipasha",
    "Panahar",
    "Rajmahal",
    "Kymmoy",
    "Zizzi",
    "Cotto",
    "Tamarind",
    "Sakura",
    "Mezze",
    "Efes",
    "Galleria",
    "Yippee",
    "Bonbon",
    "Nandos",
    "Limehouse",
    "Harlowe",
    "Dunmore",
    "Carbery",
    "Brambling",
]
RESTAURANT_HEADS = (
    ("Kitchen", "kitchen"),
    ("Restaurant", "restaurant"),
    ("Bistro", "bistro"),
    ("Brasserie", "brasserie"),
)
GIVEN_NAMES = [
    "Aarav",
    "Priya",
    "Okafor",
    "Lindqvist",
    "Ferreira",
    "Kowalski",
    "Nakamura",
    "Quenby",
]
FAMILY_NAMES = [
    "Okafor",
    "Lindqvist",
    "Ferreira",
    "Kowalski",
    "Nakamura",
    "Pennick",
    "Wrexley",
    "Harlowe",
]
_CODE_LETTERS = "BCDFGHJKLMNPQRSTVWXZ"  # no vowels: a code is never an ordinary word


def _venue(noun: str, words: list[str], heads: tuple[tuple[str, str], ...]) -> Kind:
    def make(rng: random.Random) -> Entity:
        word = rng.choice(words)
        head, type_ = rng.choice(heads)
        return Entity(noun, f"{word} {head}", type_, "name", word)

    return make


def _person(rng: random.Random) -> Entity:
    given = rng.choice(GIVEN_NAMES)
    family = rng.choice([f for f in FAMILY_NAMES if f != given])
    return Entity("passenger", f"{given} {family}", "name", "name")


def _phone(rng: random.Random) -> Entity:
    return Entity("phone", f"01223 {rng.randint(200000, 799999)}", "phone", "phone")


def _reference(rng: random.Random) -> str:
    """A booking reference, as booking systems write them: eight upper-case letters."""
    return "".join(rng.choice(_CODE_LETTERS) for _ in range(8))


def _train(rng: random.Random) -> str:
    return f"TR{_digits(rng, 4)}"


def _reservation(rng: random.Random) -> str:
    """A reservation code as airlines write them: two letters, a digit, two letters, a
    digit (``NO6JO3``; a code that starts with a digit may read as quantities, like
    ``2P689M``: "2p" and "689m")."""
    letters = "ABDEGJKLMNPRSTUVWXZ"
    digits = "23456789"
    return "".join(rng.choice(pool) for pool in (letters, letters, digits) * 2)


def _user(rng: random.Random) -> str:
    given = rng.choice(GIVEN_NAMES).lower()
    family = rng.choice(FAMILY_NAMES).lower()
    return f"{given}_{family}_{_digits(rng, 4)}"


def _flight(rng: random.Random) -> str:
    return rng.choice(["HAT", "LSX", "QPB", "KXR"]) + _digits(rng, 3)


BOOKING = Domain(
    name="booking",
    referent_dense=True,
    kinds={
        "hotel": _venue("hotel", HOTEL_WORDS, HOTEL_HEADS),
        "restaurant": _venue("restaurant", RESTAURANT_WORDS, RESTAURANT_HEADS),
        "phone": _phone,
        "reference": ("id", _reference),
        "train": ("id", _train),
    },
    opening=(
        Beat(
            "user",
            (
                "I need somewhere to stay in Cambridge for three nights, with free parking.",
                "Wants a place in Cambridge, three nights, parking.",
                "In Cambridge, three nights.",
            ),
        ),
        Beat(
            "user",
            (
                "I heard good things about <k0>, do they have rooms from Friday?",
                "Asked if <k0> has rooms from Friday.",
                "Rooms at <k0>?",
            ),
            ("+hotel",),
        ),
    ),
    user=(
        Beat(
            "user",
            (
                "What is the phone number of <k0>?",
                "Asked for a phone number for <k0>.",
                "Phone for <k0>?",
            ),
            ("hotel",),
        ),
        Beat(
            "user",
            (
                "Is the <s0> still free on Friday?",
                "Asked if the <s0> is free on Friday.",
                "The <s0>, Friday?",
            ),
            ("hotel",),
        ),
        Beat(
            "user",
            (
                "Does <a0:that> have free parking?",
                "Asked about parking at <a0:that>.",
                "Parking at <a0:that>?",
            ),
            ("hotel",),
        ),
        Beat(
            "user",
            (
                "Can you book a table at <k0> for tonight?",
                "Wants a table at <k0> tonight.",
                "Table at <k0>.",
            ),
            ("+restaurant",),
        ),
        Beat(
            "user",
            (
                "Is <a0:that> expensive? I would rather keep it cheap.",
                "Asked if <a0:that> is expensive.",
                "<a0:that>, expensive?",
            ),
            ("restaurant",),
        ),
        Beat(
            "user",
            (
                "Great, please book the <s0> for two people at 19:30.",
                "Wants the <s0> for two at 19:30.",
                "The <s0>, two, 19:30.",
            ),
            ("restaurant",),
        ),
        Beat(
            "user",
            (
                "I also need a train to Cambridge leaving from London on Friday.",
                "Also needs a train from London to Cambridge.",
                "Train to Cambridge.",
            ),
        ),
        Beat(
            "user",
            (
                "Does <k0> stop near Cambridge station?",
                "Asked if <k0> stops at Cambridge station.",
                "Does <k0> stop there?",
            ),
            ("train",),
        ),
        Beat(
            "user",
            (
                "Please read <a0:the> back to me.",
                "Wants <a0:the> read back.",
                "Repeat <a0:the>, please.",
            ),
            ("reference",),
        ),
        Beat(
            "user",
            (
                "Thanks, that is all I need for now.",
                "Thanked the agent.",
                "Thanks.",
            ),
        ),
    ),
    tool=(
        Beat(
            "tool",
            (
                'find_hotel: {<j0:hotel_name>, "area": "north", <j1:phone>, '
                '"price": 120, "stars": 4}',
                'find_hotel: {<j0:hotel_name>, <j1:phone>, "price": 120}',
                "find_hotel: {<j0:hotel_name>, <j1:phone>}",
            ),
            ("+hotel", "+phone"),
        ),
        Beat(
            "tool",
            (
                'book_hotel: {<j0:hotel_name>, "nights": 3, "people": 2, <j1:reference>}',
                "book_hotel: {<j0:hotel_name>, <j1:reference>}",
                "book_hotel: {<j1:reference>, <j0:hotel_name>}",
            ),
            ("hotel", "+reference"),
        ),
        Beat(
            "tool",
            (
                'find_restaurant: {<j0:restaurant_name>, "food": "indian", <j1:phone>, '
                '"price": 35, "rating": 4}',
                "find_restaurant: {<j0:restaurant_name>, <j1:phone>}",
                "find_restaurant: {<j1:phone>, <j0:restaurant_name>}",
            ),
            ("+restaurant", "+phone"),
        ),
        Beat(
            "tool",
            (
                'book_table: {<j0:restaurant_name>, "time": "19:30", "people": 2, <j1:reference>}',
                "book_table: {<j0:restaurant_name>, <j1:reference>}",
                "book_table: {<j1:reference>, <j0:restaurant_name>}",
            ),
            ("restaurant", "+reference"),
        ),
        Beat(
            "tool",
            (
                'get_hotel_info: {<j0:hotel_name>, "parking": "free", "internet": "yes", '
                '"stars": 4}',
                'get_hotel_info: {<j0:hotel_name>, "parking": "free"}',
                "get_hotel_info: {<j0:hotel_name>}",
            ),
            ("hotel",),
        ),
        Beat(
            "tool",
            (
                'get_restaurant_info: {<j0:restaurant_name>, "food": "indian", "open_at": "18:00"}',
                'get_restaurant_info: {<j0:restaurant_name>, "open_at": "18:00"}',
                "get_restaurant_info: {<j0:restaurant_name>}",
            ),
            ("restaurant",),
        ),
        Beat(
            "tool",
            (
                'train_status: {<j0:train_id>, "status": "on time", "platform": 3}',
                'train_status: {<j0:train_id>, "status": "on time"}',
                "train_status: {<j0:train_id>}",
            ),
            ("train",),
        ),
        Beat(
            "tool",
            (
                'find_train: {<j0:train_id>, "leave_at": "10:30", "arrive_by": "11:18", '
                '"price": 2360}',
                'find_train: {<j0:train_id>, "leave_at": "10:30"}',
                "find_train: {<j0:train_id>}",
            ),
            ("+train",),
        ),
    ),
    assistant=(
        Beat(
            "assistant",
            (
                "I'd suggest <e0>, it is quiet and has free parking.",
                "I suggested <e0>, quiet, parking.",
                "I suggested <e0>.",
            ),
            ("+hotel",),
        ),
        Beat(
            "assistant",
            (
                "You can reach <e0> on <k1>.",
                "<e0> is on <k1>.",
                "<e0>, phone <k1>.",
            ),
            ("hotel", "phone"),
        ),
        Beat(
            "assistant",
            (
                "I have booked <e0> for three nights, <t1:reference number:>.",
                "I booked <e0>, <t1:reference number:>.",
                "<e0> booked, <t1:reference>.",
            ),
            ("hotel", "reference"),
        ),
        Beat(
            "assistant",
            (
                "<a0:the> opens at 18:00 and takes bookings until late.",
                "<a0:the> opens at 18:00.",
                "<a0:the>: 18:00.",
            ),
            ("restaurant",),
        ),
        Beat(
            "assistant",
            (
                "<e0> leaves from London at 10:30 and arrives in Cambridge by 11:18.",
                "<e0>: from London 10:30, in Cambridge 11:18.",
                "<e0> at 10:30.",
            ),
            ("train",),
        ),
        Beat(
            "assistant",
            (
                "Is there anything else I can help you with?",
                "Offered more help.",
                "Anything else?",
            ),
        ),
        Beat(
            "assistant",
            ("You are welcome, enjoy your stay.", "Wished a good stay.", "Enjoy."),
        ),
    ),
)

AIRLINE = Domain(
    name="airline",
    referent_dense=True,
    kinds={
        "user": ("id", _user),
        "reservation": ("id", _reservation),
        "flight": ("id", _flight),
        "passenger": _person,
    },
    opening=(
        Beat(
            "user",
            (
                "Hi, I want to change a booking, my user id is <k0>.",
                "Wants to change a booking; user id is <k0>.",
                "Change booking; id is <k0>.",
            ),
            ("+user",),
        ),
    ),
    user=(
        Beat(
            "user",
            (
                "The one I mean is <e0>, booked last month.",
                "Means <e0>, booked last month.",
                "It is <e0>.",
            ),
            ("+reservation",),
        ),
        Beat(
            "user",
            (
                "Can I move <a0:that> to business class?",
                "Wants <a0:that> moved to business.",
                "<a0:that> to business?",
            ),
            ("reservation",),
        ),
        Beat(
            "user",
            (
                "Is <e0> still on time?",
                "Asked if <e0> is on time.",
                "<e0> on time?",
            ),
            ("flight",),
        ),
        Beat(
            "user",
            (
                "Is <a0:the> full already, or are there seats?",
                "Asked whether <a0:the> is full.",
                "<a0:the> full?",
            ),
            ("flight",),
        ),
        Beat(
            "user",
            (
                "Please add <e0> as a second passenger.",
                "The user wants <e0> added as a passenger.",
                "Please add <e0>.",
            ),
            ("passenger",),
        ),
        Beat(
            "user",
            (
                "I would rather fly to Boston on Friday than to Chicago.",
                "Prefers flying to Boston on Friday.",
                "To Boston, Friday.",
            ),
        ),
        Beat(
            "user",
            (
                "How much would a change cost me?",
                "Asked what a change costs.",
                "Cost of a change?",
            ),
        ),
    ),
    tool=(
        Beat(
            "tool",
            (
                'get_user_details: {<j0:user_id>, <j1:name>, "membership": "gold", '
                '"saved_cards": 2}',
                'get_user_details: {<j0:user_id>, <j1:name>, "membership": "gold"}',
                "get_user_details: {<j0:user_id>, <j1:name>}",
            ),
            ("user", "+passenger"),
        ),
        Beat(
            "tool",
            (
                "get_reservation_details: {<j0:reservation_id>, <j1:flight_number>, "
                '"cabin": "economy", "price": 1268, "passengers": 1}',
                'get_reservation_details: {<j0:reservation_id>, <j1:flight_number>, "price": 1268}',
                "get_reservation_details: {<j0:reservation_id>, <j1:flight_number>}",
            ),
            ("reservation", "flight"),
        ),
        Beat(
            "tool",
            (
                'get_user_details: {<j0:user_id>, "membership": "gold", "saved_cards": 2}',
                'get_user_details: {<j0:user_id>, "membership": "gold"}',
                "get_user_details: {<j0:user_id>}",
            ),
            ("user",),
        ),
        Beat(
            "tool",
            (
                'get_flight_status: {<j0:flight_number>, "status": "on time", "gate": 12}',
                'get_flight_status: {<j0:flight_number>, "status": "on time"}',
                "get_flight_status: {<j0:flight_number>}",
            ),
            ("flight",),
        ),
        Beat(
            "tool",
            (
                'search_direct_flight: {<j0:flight_number>, "origin": "JFK", '
                '"destination": "SEA", "price": 412, "available_seats": 9}',
                'search_direct_flight: {<j0:flight_number>, "price": 412}',
                "search_direct_flight: {<j0:flight_number>}",
            ),
            ("+flight",),
        ),
        Beat(
            "tool",
            (
                "book_reservation: {<j0:reservation_id>, <j1:flight_number>, "
                '"status": "confirmed", "price": 1268}',
                "book_reservation: {<j0:reservation_id>, <j1:flight_number>}",
                "book_reservation: {<j1:flight_number>, <j0:reservation_id>}",
            ),
            ("+reservation", "flight"),
        ),
    ),
    assistant=(
        Beat(
            "assistant",
            (
                "I have found <e0>; it has one passenger in economy.",
                "I found <e0>, one passenger.",
                "I found <e0>.",
            ),
            ("reservation",),
        ),
        Beat(
            "assistant",
            (
                "<a0:that> departs at 10:30 and is not full.",
                "<a0:that> departs at 10:30.",
                "<a0:that>: 10:30.",
            ),
            ("flight",),
        ),
        Beat(
            "assistant",
            (
                "I will add <e0> to the booking as a passenger.",
                "I am adding <e0> as a passenger.",
                "I added <e0>.",
            ),
            ("passenger",),
        ),
        Beat(
            "assistant",
            (
                "A change costs 75 dollars plus the difference in fare.",
                "A change costs 75 dollars plus fare.",
                "75 dollars plus fare.",
            ),
        ),
        Beat(
            "assistant",
            (
                "Let me pull up the details for you.",
                "Pulling up the details.",
                "Checking.",
            ),
        ),
    ),
)

DOMAINS: tuple[Domain, ...] = (SUPPORT, CODE, TRAVEL, BOOKING, AIRLINE)
DOMAIN_WEIGHTS = (0.25, 0.2, 0.2, 0.2, 0.15)

SUMMARY_FORMS = ("Summary of earlier turns: {items}.", "Earlier: {items}.", "{items}.")
SUMMARY_EMPTY = (
    "Summary of earlier turns: small talk and acknowledgements.",
    "Earlier: small talk.",
    "Small talk.",
)
LOSSY_FORMS = {
    "user": "Customer shared some details earlier.",
    "tool": "Tool output trimmed.",
    "assistant": "Agent replied earlier.",
    "call": "Tool call trimmed.",
    "summary": "Summary trimmed.",
    "digest": "Digest trimmed.",
}
POISON_FORMS = ("Small talk, condensed.", "Condensed small talk.")
DIGEST_FORMS = ("Digest of an earlier reply, kept for the audit log.", "Digest of a reply.")

SYSTEM_PROMPTS = {
    "support": "You are a helpful support agent. Answer briefly, check the records before "
    "you promise anything and never share card numbers.",
    "code": "You are a coding assistant. Run the tests before you claim a fix works and "
    "explain each change in plain words.",
    "travel": "You are a travel assistant. Confirm dates and times before you book anything "
    "and keep answers short.",
    "booking": "You are a booking assistant for restaurants and hotels. Confirm every detail "
    "before you book and keep answers short.",
    "airline": "You are an airline agent. Follow the airline policy, confirm every change "
    "with the user before you make it and never invent a fare.",
}
"""Contract 1.2: each session's protected system prompt (it holds no referent)."""
CONDENSED_PROMPT = "Agent instructions, shortened."
"""A compactor that rewrites the system prompt writes this instead (a fault)."""
LOST_KEYS_FORMS = (
    "Earlier turns, condensed: the details were dropped.",
    "Some earlier steps were covered; details were left out.",
)
"""A summary that keeps none of its sources' identifiers (``SUMMARY_LOST_KEYS``)."""
