"""Tuned tables: reviewable JSON with provenance, shipped in ``tuning/`` and written by users
into the cache dir (a user's table wins over the shipped one). Torch-free.

File format (``<arch>.json``)::

    {"format": 1,
     "provenance": {"device": "NVIDIA H200", "arch": "sm_90", "sm_count": 132, "toolchain": "...",
                    "package_version": "0.1.0", "date": "..."},
     "entries": {"fused|K2|mcg|4096x4096|f16|M1": {"config": {...}, "launch": {"splits": 8, "blocks_per_sm": 2},
                 "us": 11.8, "weight_gb_s": 355.0, "runner_up": {"config": ..., "launch": ..., "us": 11.9},
                 "heuristic_us": 12.7}},
     "routes": {"route|K2|mcg|4096x14336|bf16|M512": {"route": "gemm",
                "us": {"gemm": 70.1, "dense": 98.3}, "rule": "gemm"}}}

Keys: op | K | codebook | ICxOC | activation dtype | M bucket (the arch is the file). ``entries``
hold the fused kernel's configurations (op "fused", M_BUCKETS); ``routes`` (optional) which path
ops.linear takes for a call of M rows (op "route", ROUTE_BUCKETS): the fused kernel, the coded GEMM
or the dense-weight path, each one's measured time, and what the built-in rule would have taken.
A launch's ``blocks_per_sm`` (optional; tune() records it) is the occupancy the entry was timed at,
which the call keeps (kernels.fused.FusedLaunch).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
import threading
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from .. import env
from ..kernels.fused import MAX_M as FUSED_MAX_M
from ..kernels.fused import FusedConfig, FusedLaunch
from ..trellis import rate_name

log = logging.getLogger(__name__)

FORMAT = 1
M_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# Which path serves a call of M rows is measured per bucket above the decode sizes (ops.linear:
# M <= ROUTE_MIN_M always takes the fused kernel). Finer than M_BUCKETS where the paths cross on
# the H200 (benchmarks/RESULTS.md sessions 33, 34: 64..128 fused vs dense, 256..512 within the
# coded GEMM's second token block, 768 / 1024 its third and fourth); above the last bucket the
# built-in rule decides (the dense-weight path: the coded GEMM decodes every weight once per
# 256-token block).
ROUTE_BUCKETS = (32, 64, 96, 128, 192, 256, 320, 384, 512, 768, 1024)
ROUTE_MIN_M = 16
ROUTES = ("fused", "gemm", "dense")
# A route other than the built-in rule's is recorded only where it is more than this much faster:
# repeated timings of one path differ by ~1-2 % (an interleaved A/B of unchanged cells, RESULTS.md
# session 35), and the rule is the path every untuned call takes.
ROUTE_MARGIN = 0.02


class TableError(ValueError):
    """A tuning table file is malformed (the message names the file and what is wrong)."""


def m_bucket(M: int) -> int:
    """The smallest bucket >= M (M above the last bucket maps to the last)."""
    for b in M_BUCKETS:
        if M <= b:
            return b
    return M_BUCKETS[-1]


def _key(op: str, K: float, codebook: str, IC: int, OC: int, dtype: str, bucket: int) -> str:
    return f"{op}|K{rate_name(K)}|{codebook}|{IC}x{OC}|{dtype}|M{bucket}"


def entry_key(op: str, K: float, codebook: str, IC: int, OC: int, dtype: str, M: int) -> str:
    return _key(op, K, codebook, IC, OC, dtype, m_bucket(M))


def check_route_buckets(buckets: Sequence[int], name: str = "route_buckets") -> list[int]:
    """``buckets`` sorted and checked against ROUTE_BUCKETS (ValueError naming ``name`` and the
    bad ones)."""
    bad = [b for b in buckets if b not in ROUTE_BUCKETS]
    if bad:
        raise ValueError(f"{name} {bad}: each must be one of {ROUTE_BUCKETS}")
    return sorted(set(buckets))


def route_bucket(M: int) -> Optional[int]:
    """The smallest route bucket >= M; None above the last (the rule decides there)."""
    return next((b for b in ROUTE_BUCKETS if M <= b), None)


def route_key(K: float, codebook: str, IC: int, OC: int, dtype: str, bucket: int) -> str:
    """The key of a route entry for a route bucket (route_bucket(M))."""
    return _key("route", K, codebook, IC, OC, dtype, bucket)


class EntryKey(NamedTuple):
    op: str
    K: float
    codebook: str
    IC: int
    OC: int
    dtype: str
    M: int          # the bucket


def parse_key(key: str) -> EntryKey:
    """The fields of an entry_key ('fused|K2p5|mcg|4096x4096|f16|M16')."""
    op, k, cb, shape, dtype, m = key.split("|")
    ic, oc = shape.split("x")
    return EntryKey(op, float(k[1:].replace("p", ".")), cb, int(ic), int(oc), dtype, int(m[1:]))


@dataclasses.dataclass(frozen=True)
class Entry:
    cfg: FusedConfig
    launch: FusedLaunch
    us: Optional[float] = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def runner_up(self) -> Optional["Entry"]:
        """The tuner's second-fastest configuration for this entry (its ``runner_up``), or None
        where none was recorded; a TableError where that record is malformed."""
        ru = self.extra.get("runner_up")
        return None if ru is None else _entry_from_json("runner_up", ru)

    def to_json(self) -> dict:
        d = {"config": _cfg_json(self.cfg), "launch": launch_json(self.launch)}
        if self.us is not None:
            d["us"] = round(self.us, 3)
        d.update(self.extra)
        return d


@dataclasses.dataclass(frozen=True)
class RouteEntry:
    """The path measured fastest for one route bucket, and what was measured (us per call by
    route; ``rule``: the route the built-in rule takes there)."""
    route: str
    us: Mapping[str, float] = dataclasses.field(default_factory=dict)
    rule: Optional[str] = None

    def to_json(self) -> dict:
        d: dict = {"route": self.route, "us": {k: round(v, 3) for k, v in sorted(self.us.items())}}
        if self.rule is not None:
            d["rule"] = self.rule
        return d


def pick_route(us: Mapping[str, float], rule: Optional[str], margin: float = ROUTE_MARGIN) -> str:
    """The route to record from measured times (us by route): the fastest, unless the rule's route
    was measured within ``margin`` of it."""
    best = min(us, key=us.get)
    if rule in us and us[rule] <= us[best] * (1 + margin):
        return rule
    return best


def _route_from_json(where: str, key: str, d: Any) -> RouteEntry:
    try:
        k = parse_key(key)
    except ValueError:
        raise TableError(f"{where}: not a route key (expected 'route|K<rate>|<codebook>|<IC>x<OC>|<dtype>|M<bucket>')") from None
    if k.op != "route" or k.M not in ROUTE_BUCKETS:
        raise TableError(f"{where}: a route key needs op 'route' and an M bucket of {ROUTE_BUCKETS}")
    if not isinstance(d, dict) or d.get("route") not in ROUTES:
        raise TableError(f"{where}: 'route' must be one of {ROUTES}")
    if d["route"] == "fused" and k.M > FUSED_MAX_M:
        raise TableError(f"{where}: the fused kernel takes M <= {FUSED_MAX_M}, not bucket {k.M}")
    us = d.get("us", {})
    if not isinstance(us, dict) or not all(r in ROUTES and isinstance(t, (int, float)) for r, t in us.items()):
        raise TableError(f"{where}: 'us' must map routes {ROUTES} to microseconds")
    rule = d.get("rule")
    if rule is not None and rule not in ROUTES:
        raise TableError(f"{where}: 'rule' must be one of {ROUTES}")
    return RouteEntry(d["route"], {r: float(t) for r, t in us.items()}, rule)


def _cfg_json(cfg: FusedConfig) -> dict:
    d = dataclasses.asdict(cfg)
    d.pop("diag", None)
    if d.get("reg_level") == -1:                 # ptxas' default: entries tuned without the axis read the same
        del d["reg_level"]
    return d


def launch_json(launch: FusedLaunch) -> dict:
    """A launch as a table stores it: blocks_per_sm only where an entry pins it (0: not recorded)."""
    d = dataclasses.asdict(launch)
    if not d.get("blocks_per_sm"):
        d.pop("blocks_per_sm", None)
    return d


def _entry_from_json(where: str, d: Any) -> Entry:
    if not isinstance(d, dict) or "config" not in d or "launch" not in d:
        raise TableError(f"{where}: an entry needs 'config' and 'launch'")
    try:
        cfg = FusedConfig(**d["config"])
        launch = FusedLaunch(**d["launch"])
    except (TypeError, ValueError) as e:
        raise TableError(f"{where}: bad config/launch: {e}") from None
    if cfg.diag:
        raise TableError(f"{where}: diagnostic configs (diag={cfg.diag}) cannot be tuned choices")
    extra = {k: v for k, v in d.items() if k not in ("config", "launch", "us")}
    us = d.get("us")
    return Entry(cfg, launch, float(us) if isinstance(us, (int, float)) else None, extra)


@dataclasses.dataclass
class TuningTable:
    provenance: dict = dataclasses.field(default_factory=dict)
    entries: dict = dataclasses.field(default_factory=dict)      # key -> Entry
    routes: dict = dataclasses.field(default_factory=dict)       # route key -> RouteEntry

    @classmethod
    def load(cls, path: str) -> "TuningTable":
        try:
            with open(path) as f:
                raw = json.load(f)
        except FileNotFoundError:
            raise
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise TableError(f"{path}: not readable JSON: {e}") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("entries"), dict):
            raise TableError(f"{path}: not a format-{FORMAT} tuning table (needs 'format' and 'entries')")
        prov = raw.get("provenance", {})
        if not isinstance(prov, dict):
            raise TableError(f"{path}: 'provenance' must be an object")
        routes = raw.get("routes", {})
        if not isinstance(routes, dict):
            raise TableError(f"{path}: 'routes' must be an object")
        return cls(prov, {k: _entry_from_json(f"{path}: entry {k!r}", v) for k, v in raw["entries"].items()},
                   {k: _route_from_json(f"{path}: route {k!r}", k, v) for k, v in routes.items()})

    def to_json(self) -> dict:
        d = {"format": FORMAT, "provenance": self.provenance,
             "entries": {k: self.entries[k].to_json() for k in sorted(self.entries)}}
        if self.routes:
            d["routes"] = {k: self.routes[k].to_json() for k in sorted(self.routes)}
        return d

    def save(self, path: str) -> None:
        """Atomic write (temp file in the same directory, then rename)."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_json(), f, indent=1)
        os.replace(tmp, path)

    def merged(self, other: "TuningTable") -> "TuningTable":
        """This table with ``other``'s entries on top (other wins). The provenance is other's
        (the newer measurement), with both kept under ``merged_from`` when both tables had one."""
        base = {k: v for k, v in self.provenance.items() if k != "merged_from"}
        top = {k: v for k, v in other.provenance.items() if k != "merged_from"}
        prov = dict(top or base)
        if base and top:
            prov["merged_from"] = [base, top]
        return TuningTable(prov, {**self.entries, **other.entries}, {**self.routes, **other.routes})


def shipped_table_path(arch: str) -> str:
    from ..render import package_data_dir
    return os.path.join(package_data_dir("tuning"), f"{arch}.json")


def user_table_path(arch: str, cache_dir: Optional[str] = None) -> str:
    return os.path.join(cache_dir or env.cache_dir(), "tuning", f"{arch}.json")


def read_table(path: str) -> Optional[TuningTable]:
    """The table at ``path``; None where there is none, or where it is unreadable (a warning naming
    the file: a corrupt table is never fatal)."""
    try:
        return TuningTable.load(path)
    except FileNotFoundError:
        return None
    except TableError as e:
        log.warning("ignoring tuning table: %s", e)
        return None


class Tables:
    """Lookup over the shipped and the user table of each arch (loaded once, user wins).
    A miss logs once per key; a corrupt file logs a warning and is ignored, never fatal."""

    def __init__(self, cache_dir: Optional[str] = None):
        self.cache_dir = cache_dir
        self._by_arch: dict[str, TuningTable] = {}
        self._missed: set[str] = set()
        self._lock = threading.Lock()

    def table(self, arch: str) -> TuningTable:
        with self._lock:
            t = self._by_arch.get(arch)
            if t is None:
                shipped = read_table(shipped_table_path(arch)) or TuningTable()
                user = read_table(user_table_path(arch, self.cache_dir))
                t = shipped.merged(user) if user else shipped
                self._by_arch[arch] = t
            return t

    def lookup(self, arch: str, key: str) -> Optional[Entry]:
        e = self.table(arch).entries.get(key)
        if e is None and key not in self._missed:
            self._missed.add(key)
            log.info("no tuned entry for %s on %s: using the heuristic (escha_jit.tune(model) measures it)", key, arch)
        return e

    def route(self, arch: str, key: str) -> Optional[RouteEntry]:
        """The route entry of ``key`` (route_key), or None (the rule decides; not logged: most
        shapes have none)."""
        return self.table(arch).routes.get(key)

    def invalidate(self) -> None:
        with self._lock:
            self._by_arch.clear()
            self._missed.clear()


_tables: Optional[Tables] = None


def tables() -> Tables:
    """The process-wide tables of the current cache dir."""
    global _tables
    if _tables is None or _tables.cache_dir != env.cache_dir():
        _tables = Tables(env.cache_dir())
    return _tables
