"""The demo history's calendar: its series, time zones, and every dated event.

Holidays (local dates, with the demand factor on interactive and standard traffic;
batch takes the square root), product launches, outages (recorded exactly, because
forecaster tests rely on them) and random big-client episodes. Dates are chosen, not
measured; the episode sizes are shaped by ServeGen m-large's day-over-day level changes
(sd 0.32 in log, largest 0.87).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

UTC_OFFSET_HOURS = {"us-east": -5, "us-west": -8, "eu-west": 1, "ap-northeast": 9}  # fixed, no DST
MODELS = ("llama-3.1-8b", "llama-3.1-70b")
CLASSES = ("interactive", "standard", "batch", "long-context")
FIRST_CLASSES = CLASSES[:3]
"""The classes of the first demo history; ``long-context`` (document and RAG prompts) came after,
and its series follow theirs so that theirs keep their random streams."""

EPISODE_DAYS_BETWEEN = 60.0
EPISODE_HOURS = (24, 240)
EPISODE_LOG_SIZE = (0.10, 0.40)


@dataclass(frozen=True)
class Holiday:
    date_local: str
    regions: tuple[str, ...]
    factor: float
    name: str


@dataclass(frozen=True)
class Launch:
    name: str
    start: str
    regions: tuple[str, ...]
    models: tuple[str, ...]
    classes: tuple[str, ...]
    step: float
    ramp_hours: float
    spike: float = 1.0
    half_life_hours: float = 1.0


@dataclass(frozen=True)
class Outage:
    kind: str  # zero_requests | missing_rows | partial
    start: str
    end: str  # exclusive
    series: tuple[tuple[str, str, str], ...]
    factor: float
    description: str


@dataclass(frozen=True)
class Episode:
    region: str
    model: str
    traffic_class: str
    start: str
    end: str
    factor: float


US, EU, JP = ("us-east", "us-west"), ("eu-west",), ("ap-northeast",)
HOLIDAYS = (
    Holiday("2025-11-27", US, 0.60, "Thanksgiving"),
    Holiday("2025-11-28", US, 0.80, "day after Thanksgiving"),
    Holiday("2025-12-24", US, 0.80, "Christmas Eve"),
    Holiday("2025-12-24", EU, 0.75, "Christmas Eve"),
    Holiday("2025-12-25", US + EU, 0.55, "Christmas Day"),
    Holiday("2025-12-26", EU, 0.65, "St Stephen's / Boxing Day"),
    Holiday("2025-12-31", US + EU, 0.85, "New Year's Eve"),
    Holiday("2025-12-31", JP, 0.75, "Omisoka"),
    Holiday("2026-01-01", US + EU + JP, 0.55, "New Year's Day"),
    Holiday("2026-01-02", JP, 0.65, "New Year holiday"),
    Holiday("2026-01-03", JP, 0.75, "New Year holiday"),
    Holiday("2026-04-03", EU, 0.80, "Good Friday"),
    Holiday("2026-04-06", EU, 0.80, "Easter Monday"),
    Holiday("2026-04-29", JP, 0.85, "Showa Day (Golden Week)"),
    Holiday("2026-05-01", EU, 0.85, "Labour Day"),
    Holiday("2026-05-04", JP, 0.70, "Greenery Day (Golden Week)"),
    Holiday("2026-05-05", JP, 0.70, "Children's Day (Golden Week)"),
    Holiday("2026-05-06", JP, 0.75, "Constitution Day, substitute (Golden Week)"),
    Holiday("2026-05-25", US, 0.85, "Memorial Day"),
    Holiday("2026-07-03", US, 0.80, "Independence Day (observed)"),
    Holiday("2026-08-13", JP, 0.85, "Obon"),
    Holiday("2026-08-14", JP, 0.85, "Obon"),
    Holiday("2026-09-07", US, 0.85, "Labor Day"),
)
LAUNCHES = (
    Launch("llama-3.1-8b assistant feature, all regions", "2026-02-10T14:00:00Z", US + EU + JP,
           ("llama-3.1-8b",), ("interactive",), step=1.30, ramp_hours=72.0),
    Launch("eu-west code assistant on llama-3.1-70b (spike that decays)", "2026-05-12T07:00:00Z", EU,
           ("llama-3.1-70b",), ("standard",), step=1.15, ramp_hours=0.0, spike=2.0, half_life_hours=96.0),
    Launch("ap-northeast batch customer onboarded", "2026-08-03T00:00:00Z", JP,
           ("llama-3.1-8b",), ("batch",), step=1.80, ramp_hours=24.0),
)  # fmt: skip
OUTAGES = (
    Outage("zero_requests", "2026-03-17T13:00:00Z", "2026-03-17T19:00:00Z",
           tuple(("us-east", "llama-3.1-8b", c) for c in CLASSES), 0.0,
           "us-east llama-3.1-8b serving outage: rows present, zero requests, 08:00-14:00 local"),
    Outage("missing_rows", "2026-01-20T02:00:00Z", "2026-01-20T08:00:00Z",
           tuple(("ap-northeast", m, c) for m in MODELS for c in CLASSES), 0.0,
           "ap-northeast log-collection gap: rows absent for every series, 11:00-17:00 local"),
    Outage("partial", "2026-09-15T18:00:00Z", "2026-09-15T23:00:00Z",
           (("us-west", "llama-3.1-70b", "interactive"), ("us-west", "llama-3.1-70b", "standard")), 0.35,
           "us-west llama-3.1-70b capacity incident: 35% of normal requests served and logged"),
)  # fmt: skip


def series_keys() -> list[tuple[str, str, str]]:
    """The 32 series in their fixed order (which also fixes the RNG stream order)."""
    first = [(r, m, c) for r in UTC_OFFSET_HOURS for m in MODELS for c in FIRST_CLASSES]
    return first + [(r, m, c) for r in UTC_OFFSET_HOURS for m in MODELS for c in CLASSES if c not in FIRST_CLASSES]


def parse_utc(text: str) -> np.datetime64:
    """'2026-01-20T02:00:00Z' -> numpy hour."""
    return np.datetime64(text.rstrip("Z"), "h")


def iso(hours: np.ndarray) -> np.ndarray:
    """numpy hours -> '2026-01-20T02:00:00Z' strings."""
    return np.char.add(np.datetime_as_string(hours, unit="s"), "Z")


def draw_episodes(hours: np.ndarray, key: tuple[str, str, str], rng: np.random.Generator) -> list[Episode]:
    """Big-client episodes: Poisson count (one per 60 days on average), uniform start,
    1-10 days long, factor exp(+-U(0.1, 0.4)). A shift that ends: a client arrives or
    leaves for a while, as the multi-day dips and jumps in ServeGen m-large."""
    count = int(rng.poisson(len(hours) / 24.0 / EPISODE_DAYS_BETWEEN))
    starts = rng.integers(0, len(hours), size=count)
    lengths = rng.integers(EPISODE_HOURS[0], EPISODE_HOURS[1] + 1, size=count)
    signs = rng.choice(np.array([-1.0, 1.0]), size=count)
    sizes = rng.uniform(*EPISODE_LOG_SIZE, size=count)
    episodes = []
    for s, n, sign, size in zip(starts, lengths, signs, sizes, strict=True):
        end = hours[0] + np.timedelta64(int(min(s + n, len(hours))), "h")
        start_ts, end_ts = iso(np.array([hours[s], end]))
        episodes.append(Episode(*key, str(start_ts), str(end_ts), round(float(np.exp(sign * size)), 4)))
    return sorted(episodes, key=lambda e: e.start)


def outage_hours(outage: Outage) -> np.ndarray:
    return np.arange(parse_utc(outage.start), parse_utc(outage.end), np.timedelta64(1, "h"))


def outage_mask(hours: np.ndarray, key: tuple[str, str, str], kind: str) -> tuple[np.ndarray, float]:
    """Hours of ``hours`` hit by outages of ``kind`` on series ``key``, and their factor."""
    mask = np.zeros(hours.shape, dtype=bool)
    factor = 1.0
    for outage in OUTAGES:
        if outage.kind == kind and key in outage.series:
            mask |= (hours >= parse_utc(outage.start)) & (hours < parse_utc(outage.end))
            factor = outage.factor
    return mask, factor


def events_record(episodes: tuple[Episode, ...]) -> dict:
    """Holidays, launches, outages (with every affected hour) and the drawn episodes, as JSON."""
    outages = []
    for o in OUTAGES:
        row = asdict(o) | {"hours": [str(h) for h in iso(outage_hours(o))]}
        row["series"] = [dict(zip(("region", "model", "traffic_class"), s, strict=True)) for s in o.series]
        outages.append(row)
    return {
        "holidays": [asdict(h) for h in HOLIDAYS],
        "launches": [asdict(launch) for launch in LAUNCHES],
        "outages": outages,
        "episodes": [asdict(e) for e in episodes],
    }
