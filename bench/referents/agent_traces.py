"""Generated traces that look like agent runs with tool calls (SGD has none).

An airline / hotel / shop customer-service agent, in the style of tool-using
agent benchmarks: a protected system prompt, user turns, assistant tool calls
(``tool_call_ids``) with JSON results (``tool_call_id``) holding identifiers
(``"reservation_id": "NO6JO3"``, ``"user_id": "mia_li_3668"``, ``"flight_number":
"HAT170"``, order ids, e-mails), phone numbers in several formats, names under
JSON name fields (``"hotel_name": "Hotel Marlow"``), prices and ratings. Later
user and assistant turns repeat those values, often in another case
(``no6jo3``, ``hotel marlow``) or another phone format; some repeat a price or
a rating, which must NOT be taken for an identifier. Everything is a function
of the seed.

Each turn carries its annotations (the values it states, with their class:
``id``, ``phone``, ``email``, ``name``, ``amount``, ``rating``, ``city``), so the same
recall and precision counting as for SGD applies
(:mod:`bench.referents.measure`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench.referents.model import Dialogue, Turn, Value, value_key

ID_CLASSES = ("id", "phone", "email", "name")
"""The classes the agent-run recall target covers."""

NOT_IDENTIFIERS = ("amount", "rating")
"""Classes whose values a pin must never be for (a pin on them is wrong)."""

_FIRST = ["mia", "omar", "yusuf", "ivan", "sofia", "chen", "lucas", "amara", "noah", "lena"]
_LAST = ["li", "hernandez", "garcia", "rossi", "kim", "patel", "nguyen", "silva", "ito", "moore"]
_CITIES = [("SFO", "Boston"), ("JFK", "Denver"), ("LAX", "Seattle"), ("ORD", "Austin")]
_HOTEL_WORDS = ["Marlow", "Wexford", "Halcyon", "Ashdown", "Verity", "Calloway", "Bramble"]
_HOTEL_FORMS = ["Hotel {w}", "The {w} Inn", "{w} House", "{w} Suites"]
_PRODUCTS = ["desk lamp", "water bottle", "backpack", "office chair", "headphones"]
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
_ALNUM = _LETTERS + "23456789"

_FILLER_USER = [
    "Thanks. Give me a second to check my calendar.",
    "Okay, that makes sense.",
    "Hmm, let me think about it for a moment.",
    "Sorry, my kid was asking me something. Where were we?",
    "Great, thank you for your patience.",
]
_FILLER_ASSISTANT = [
    "Of course, take your time. I am here when you are ready.",
    "No problem at all. Is there anything else I can look into meanwhile?",
    "Sure. Please note that changes may affect the fare rules of your ticket.",
    "Understood. Let me know how you would like to proceed.",
]


def _code(rng: random.Random, n: int = 6) -> str:
    while True:
        code = "".join(rng.choice(_ALNUM) for _ in range(n))
        if any(c.isdigit() for c in code) and any(c.isalpha() for c in code):
            return code


def _phone(rng: random.Random) -> tuple[str, str]:
    """A phone number written two ways (same digits): intro form, repeat form."""
    area, mid, last = rng.randint(201, 989), 555, rng.randint(100, 9999)
    forms = [
        f"+1 ({area}) {mid}-{last:04d}",
        f"+1 {area} {mid} {last:04d}",
        f"+1-{area}-{mid}-{last:04d}",
        f"+1.{area}.{mid}.{last:04d}",
    ]
    first, second = rng.sample(forms, 2)
    return first, second


def _case(rng: random.Random, surface: str) -> str:
    """``surface`` as a user types it: as is, lower-case or upper-case."""
    return rng.choice([surface, surface.lower(), surface.lower(), surface.upper()])


@dataclass
class _Builder:
    rng: random.Random
    turns: list[Turn] = field(default_factory=list)
    calls: int = 0

    def add(
        self,
        role: str,
        text: str,
        values: list[tuple[str, str, str]],
        *,
        tool_call_ids: tuple[str, ...] = (),
        tool_call_id: str | None = None,
        protected: bool = False,
    ) -> None:
        """A turn; ``values`` are (surface, class, slot) it states (each must be in the text)."""
        annotated = []
        seen: set[str] = set()
        for surface, cls, slot in values:
            key = value_key(surface)
            if key in seen:
                continue
            if surface.casefold() not in text.casefold():
                raise ValueError(f"{surface!r} is not in {text!r}")
            seen.add(key)
            annotated.append(Value(key, cls, slot, surface))
        self.turns.append(
            Turn(
                f"t{len(self.turns):03d}",
                role,
                text,
                tuple(annotated),
                tool_call_ids,
                tool_call_id,
                protected,
            )
        )

    def tool(
        self, name: str, args: dict[str, object], result: object, values: list[tuple[str, str, str]]
    ) -> None:
        """A tool call (assistant) and its JSON result (tool); ``values`` annotate both
        where they appear."""
        self.calls += 1
        call_id = f"call_{self.calls}"
        call_text = f"{name}({json.dumps(args)})"
        result_text = json.dumps(result)
        self.add(
            "assistant",
            call_text,
            [v for v in values if v[0].casefold() in call_text.casefold()],
            tool_call_ids=(call_id,),
        )
        self.add(
            "tool",
            result_text,
            [v for v in values if v[0].casefold() in result_text.casefold()],
            tool_call_id=call_id,
        )

    def filler(self) -> None:
        """A turn of small talk (user or assistant)."""
        if self.rng.random() < 0.5:
            self.add("user", self.rng.choice(_FILLER_USER), [])
        else:
            self.add("assistant", self.rng.choice(_FILLER_ASSISTANT), [])


def _session(rng: random.Random, number: int) -> Dialogue:
    b = _Builder(rng)
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    user_id = f"{first}_{last}_{rng.randint(1000, 9999)}"
    email = f"{first}.{last}{rng.randint(10, 99)}@example.com"
    phone, phone_again = _phone(rng)
    reservations = [_code(rng) for _ in range(rng.randint(1, 3))]
    b.add(
        "system",
        "You are a customer service agent for an airline, its hotel partners and its shop. "
        "Use the tools to look up users, reservations and orders; never guess a value.",
        [],
        protected=True,
    )
    b.add(
        "user",
        f"Hi! I need help with a booking. My user id is {user_id}.",
        [(user_id, "id", "user_id")],
    )
    profile = {
        "user_id": user_id,
        "name": {"first_name": first.title(), "last_name": last.title()},
        "email": email,
        "phone": phone,
        "membership": rng.choice(["regular", "silver", "gold"]),
        "reservations": reservations,
    }
    b.tool(
        "get_user_details",
        {"user_id": user_id},
        profile,
        [(user_id, "id", "user_id"), (email, "email", "email"), (phone, "phone", "phone")]
        + [(r, "id", "reservation_id") for r in reservations],
    )
    listed = " and ".join(reservations)
    b.add(
        "assistant",
        f"Thank you, {first.title()}. I can see the reservations {listed} on your profile.",
        [(r, "id", "reservation_id") for r in reservations],
    )
    tasks = [_flight_task, _hotel_task, _order_task, _contact_task]
    rng.shuffle(tasks)
    repeats: list[tuple[str, str, str]] = []
    for task in tasks[: rng.randint(2, 4)]:
        for _ in range(rng.randint(0, 2)):
            b.filler()
        repeats.extend(task(b, reservations, phone_again, email))
    for _ in range(rng.randint(1, 3)):
        b.filler()
    # A recap that repeats some earlier values in the user's own casing.
    chosen = rng.sample(repeats, min(len(repeats), 3)) if repeats else []
    if chosen:
        typed = [(_case(rng, s) if c == "id" else s, c, slot) for s, c, slot in chosen]
        b.add(
            "user",
            "Before we finish, can you confirm everything for "
            + ", ".join(t[0] for t in typed)
            + "?",
            typed,
        )
        b.add(
            "assistant",
            "Yes, all of that is confirmed: " + "; ".join(t[0] for t in chosen) + ".",
            chosen,
        )
    return Dialogue(f"agent-{number:04d}", tuple(b.turns), ("agent",))


def _flight_task(
    b: _Builder, reservations: list[str], phone: str, email: str
) -> list[tuple[str, str, str]]:
    rng = b.rng
    res = rng.choice(reservations)
    origin, city = rng.choice(_CITIES)
    flight = f"{rng.choice(['HAT', 'UA', 'DL', 'AA'])}{rng.randint(100, 999)}"
    price = rng.randint(180, 1900)
    typed_res = _case(rng, res)
    b.add(
        "user",
        f"I want to change the flight on reservation {typed_res}.",
        [(res, "id", "reservation_id")],
    )
    b.tool(
        "get_reservation_details",
        {"reservation_id": res},
        {
            "reservation_id": res,
            "origin": origin,
            "destination": city,
            "flights": [{"flight_number": flight, "date": "2024-05-17", "price": price}],
            "cabin": rng.choice(["economy", "business"]),
        },
        [
            (res, "id", "reservation_id"),
            (flight, "id", "flight_number"),
            (str(price), "amount", "price"),
            (city, "city", "destination"),
        ],
    )
    later = f"{flight[:-3]}{rng.randint(100, 999)}"
    later_price = price + rng.randint(20, 300)
    seats = rng.randint(2, 9)
    b.add(
        "assistant",
        f"Reservation {res} is on flight {flight} to {city} on May 17 and cost {price} dollars. "
        "What time would you prefer?",
        [
            (res, "id", "reservation_id"),
            (flight, "id", "flight_number"),
            (str(price), "amount", "price"),
            (city, "city", "destination"),
        ],
    )
    b.add("user", "Something in the evening, if possible.", [])
    b.tool(
        "search_direct_flight",
        {"origin": origin, "destination": city, "date": "2024-05-17"},
        [
            {
                "flight_number": later,
                "departure": "18:05",
                "price": later_price,
                "available_seats": seats,
            }
        ],
        [
            (later, "id", "flight_number"),
            (str(later_price), "amount", "price"),
            (city, "city", "destination"),
        ],
    )
    b.add(
        "assistant",
        f"There is {later} leaving at 18:05, at {later_price} dollars, with {seats} seats left.",
        [(later, "id", "flight_number"), (str(later_price), "amount", "price")],
    )
    b.filler()
    typed_later = _case(rng, later)
    b.add(
        "user",
        f"Is {later_price} the final price? If so, please move me to {typed_later}.",
        [(later, "id", "flight_number"), (str(later_price), "amount", "price")],
    )
    return [
        (res, "id", "reservation_id"),
        (later, "id", "flight_number"),
        (flight, "id", "flight_number"),
    ]


def _hotel_task(
    b: _Builder, reservations: list[str], phone: str, email: str
) -> list[tuple[str, str, str]]:
    rng = b.rng
    words = rng.sample(_HOTEL_WORDS, 2)
    hotels = [rng.choice(_HOTEL_FORMS).format(w=w) for w in words]
    phones = [_phone(rng) for _ in hotels]
    ratings = [rng.randint(2, 5) for _ in hotels]
    prices = [rng.randint(90, 400) for _ in hotels]
    _, city = rng.choice(_CITIES)
    b.add("user", f"I also need a hotel in {city} for two nights.", [(city, "city", "city")])
    results = [
        {"hotel_name": h, "rating": r, "price_per_night": p, "phone": ph[0]}
        for h, r, p, ph in zip(hotels, ratings, prices, phones, strict=True)
    ]
    values: list[tuple[str, str, str]] = []
    for h, r, p, ph in zip(hotels, ratings, prices, phones, strict=True):
        values += [
            (h, "name", "hotel_name"),
            (str(p), "amount", "price"),
            (ph[0], "phone", "phone"),
        ]
        values.append((str(r), "rating", "rating"))
    b.tool("search_hotels", {"city": city, "nights": 2}, results, [*values, (city, "city", "city")])
    b.add(
        "assistant",
        f"I found {hotels[0]} ({ratings[0]} stars, {prices[0]} a night) and "
        f"{hotels[1]} ({ratings[1]} stars, {prices[1]} a night).",
        [(hotels[0], "name", "hotel_name"), (hotels[1], "name", "hotel_name")]
        + [(str(p), "amount", "price") for p in prices],
    )
    pick = rng.randrange(2)
    b.filler()
    b.add(
        "user",
        f"{_case(rng, hotels[pick])} sounds good. Is {ratings[pick]} stars the best they have, "
        f"and is {prices[pick]} per night with taxes?",
        [(hotels[pick], "name", "hotel_name"), (str(prices[pick]), "amount", "price")],
    )
    b.add("assistant", "The rating is what the partner reports; taxes are included.", [])
    b.filler()
    b.add(
        "user",
        f"I will call them at {phones[pick][1]} to ask about parking.",
        [(phones[pick][1], "phone", "phone")],
    )
    return [(hotels[pick], "name", "hotel_name"), (phones[pick][1], "phone", "phone")]


def _order_task(
    b: _Builder, reservations: list[str], phone: str, email: str
) -> list[tuple[str, str, str]]:
    rng = b.rng
    order = f"#W{rng.randint(1000000, 9999999)}"
    item = rng.choice(_PRODUCTS)
    item_id = str(rng.randint(1000000000, 9999999999))
    price = rng.randint(15, 400)
    b.add("user", f"Also, where is my order {order}? It was a {item}.", [(order, "id", "order_id")])
    tracking = _code(rng, 10)
    b.tool(
        "get_order_details",
        {"order_id": order},
        {
            "order_id": order,
            "status": "shipped",
            "items": [{"name": item, "item_id": item_id, "price": price}],
            "tracking_id": tracking,
            "rating": rng.randint(1, 5),
        },
        [
            (order, "id", "order_id"),
            (item_id, "id", "item_id"),
            (tracking, "id", "tracking_id"),
            (str(price), "amount", "price"),
        ],
    )
    b.add(
        "assistant",
        f"Order {order} has shipped; the tracking number is {tracking}.",
        [(order, "id", "order_id"), (tracking, "id", "tracking_id")],
    )
    b.filler()
    typed = _case(rng, tracking)
    b.add(
        "user",
        f"The carrier site does not know {typed}. I paid {price} for it.",
        [(tracking, "id", "tracking_id"), (str(price), "amount", "price")],
    )
    return [(order, "id", "order_id"), (tracking, "id", "tracking_id")]


def _contact_task(
    b: _Builder, reservations: list[str], phone: str, email: str
) -> list[tuple[str, str, str]]:
    b.add(
        "user",
        f"Please send any updates by text to {phone}, or e-mail {email.upper()}.",
        [(phone, "phone", "phone"), (email, "email", "email")],
    )
    b.add(
        "assistant",
        f"Noted: updates go to {phone} and {email}.",
        [(phone, "phone", "phone"), (email, "email", "email")],
    )
    return [(phone, "phone", "phone"), (email, "email", "email")]


def generate(sessions: int, seed: int = 0) -> Iterator[Dialogue]:
    """``sessions`` agent runs, a deterministic function of ``seed``."""
    for number in range(sessions):
        yield _session(random.Random(f"{seed}-{number}"), number)
