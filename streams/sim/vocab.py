"""Vocabularies of the simulated conversations: three domains and the compactor's forms.

Each domain (:class:`~streams.sim.texts.Domain`) lists its entity kinds with a
factory of surfaces, and its messages (:class:`~streams.sim.texts.Beat`) in a
long, a short and a tiny form: a paraphrase moves a message one form down and
keeps its entities. The forms at the end are what a compactor writes: summaries,
lossy rewrites, the condensed small talk that poisons a span, a harness digest.
"""

from __future__ import annotations

import random

from streams.sim.texts import Beat, Domain


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
                "Customer named <e0>, flagged last week.",
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
                "lookup_order: <e0> shipped Monday, two charges of 49.00 EUR on card ending 4421.",
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
                "customer_lookup: profile linked to <e0>, created in 2019.",
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
                "ci_log: <e0> red, <e1> line 88 AssertionError.",
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
                "I will start with <a0:that> and bisect from there.",
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
                "Repro on <a0:that>.",
            ),
            ("build",),
        ),
        Beat("assistant", ("Running the tests again now.", "Rerunning tests.", "Rerun.")),
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
                "I want a quiet hotel near the old town for three nights.",
                "Wants a quiet hotel, three nights.",
                "Quiet hotel, three nights.",
            ),
        ),
    ),
    user=(
        Beat(
            "user",
            (
                "Which neighbourhood is best for walking?",
                "Asked about walkable areas.",
                "Walkable area?",
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
        Beat("tool", ("weather: mild, light rain on Sunday.", "Mild, rain on Sunday.", "Mild.")),
        Beat(
            "tool",
            ("booking_lookup: <e0> confirmed, two guests.", "<e0> confirmed.", "<e0> ok."),
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
            ("The old town is best on foot.", "Old town is walkable.", "Walkable."),
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

DOMAINS: tuple[Domain, ...] = (SUPPORT, CODE, TRAVEL)
DOMAIN_WEIGHTS = (0.4, 0.35, 0.25)

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
