"""Typed results of the mnemos HTTP API (``shared/api.md``, ``/openapi.json``).

Every result is a frozen-free dataclass built from the server's JSON with
:meth:`Model.from_dict`:

* fields the client knows are attributes with their types (times become
  :class:`datetime.datetime`, nested objects become their dataclass);
* fields the client does not know yet (a newer server) are kept in ``extra``;
* ``to_dict()`` gives back the JSON object exactly as the server sent it, and
  ``result["field"]`` reads a field by its wire name (mem0-style dict access).

Inputs that are plain JSON objects (chat messages, batch items) are ``TypedDict``s.
"""

from __future__ import annotations

import dataclasses
import re
import types as _pytypes
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import (
    Any,
    Dict,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

_UNION_TYPES: Tuple[Any, ...] = (Union,)
if hasattr(_pytypes, "UnionType"):  # Python 3.10+: `X | Y`
    _UNION_TYPES = (Union, _pytypes.UnionType)

__all__ = [
    "Model",
    "parse_datetime",
    # inputs
    "ChatMessage",
    "SessionMessageInput",
    "RememberItem",
    "SourceInput",
    # memories and tools
    "Memory",
    "SourceRef",
    "Routing",
    "RememberResult",
    "RememberBatchResult",
    "RecallResult",
    "RecallResponse",
    "Association",
    "ActivationResult",
    "SpreadingActivationResponse",
    "ForgetResponse",
    "ContextSection",
    "ContextMetadata",
    "BuildContextResponse",
    "StoredMemories",
    "HistoryEntry",
    "HistoryResponse",
    "TagCount",
    "ReflectResponse",
    "Run",
    "RunsResponse",
    "ListResponse",
    "DeleteResponse",
    "DeleteAllResponse",
    # browsing: agents, bulk changes, associations, graph, retention
    "AgentSummary",
    "AgentsResponse",
    "BulkResponse",
    "MemoryBrief",
    "MemoryAssociation",
    "AssociationsResponse",
    "GraphNode",
    "GraphEdge",
    "GraphResponse",
    "RetentionPoint",
    "RetentionResponse",
    # projects
    "Project",
    "ProjectsResponse",
    # KV namespaces
    "KvEntry",
    "KvPutResponse",
    "KvDeleteResponse",
    "KvSearchResult",
    "KvSearchResponse",
    "KvListResponse",
    "NamespaceStats",
    "NamespaceConfigureResponse",
    "NamespacesResponse",
    # sessions
    "SessionMessage",
    "Session",
    "SessionSummary",
    "SessionsResponse",
    "PostMessagesResponse",
    "CompactResponse",
    # admin
    "ApiKey",
    "CreatedKey",
    "KeysResponse",
    "RevokedKey",
    "AuditEntry",
    "AuditResponse",
    "ErasedRecords",
    "EraseResponse",
    "TenantEraseResponse",
    "FaultInjected",
    # service
    "ActorHealth",
    "Health",
]

M = TypeVar("M", bound="Model")

_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_datetime(value: Any) -> Any:
    """An RFC 3339 string as an aware ``datetime`` (nanoseconds are cut to
    microseconds); anything else is returned unchanged."""
    if not isinstance(value, str):
        return value
    text = _FRACTION.sub(r"\1", value.strip())
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return value
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed


def _convert(hint: Any, value: Any) -> Any:
    """``value`` (decoded JSON) converted to the annotation ``hint``."""
    if value is None:
        return None
    origin = get_origin(hint)
    if origin in _UNION_TYPES:
        for arg in get_args(hint):
            if arg is type(None):
                continue
            return _convert(arg, value)
        return value
    if origin in (list, List):
        (item,) = get_args(hint) or (Any,)
        if isinstance(value, list):
            return [_convert(item, v) for v in value]
        return value
    if origin in (dict, Dict):
        args = get_args(hint)
        item = args[1] if len(args) == 2 else Any
        if isinstance(value, dict):
            return {k: _convert(item, v) for k, v in value.items()}
        return value
    if isinstance(hint, type):
        if issubclass(hint, Model) and isinstance(value, dict):
            return hint.from_dict(value)
        if hint is datetime:
            return parse_datetime(value)
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
    return value


@dataclass
class Model:
    """Base of every result: typed fields, ``extra`` for fields this client does not
    know, ``to_dict()`` for the JSON as received, ``obj["field"]`` for dict-style reads."""

    @classmethod
    def _field_hints(cls) -> Dict[str, Any]:
        hints = cls.__dict__.get("_hints_cache")
        if hints is None:
            all_hints = get_type_hints(cls)
            hints = {
                f.name: all_hints[f.name]
                for f in dataclasses.fields(cls)
                if f.name != "extra"
            }
            setattr(cls, "_hints_cache", hints)
        return hints

    @classmethod
    def from_dict(cls: type[M], data: Mapping[str, Any]) -> M:
        """Build from the server's JSON object. Missing fields become ``None`` (or
        their default); unknown ones go to ``extra``."""
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__} expects a JSON object, got {type(data).__name__}")
        hints = cls._field_hints()
        kwargs: Dict[str, Any] = {}
        defaults = {f.name: f for f in dataclasses.fields(cls)}
        for name, hint in hints.items():
            if name in data:
                kwargs[name] = _convert(hint, data[name])
            else:
                f = defaults[name]
                if f.default is not dataclasses.MISSING:
                    kwargs[name] = f.default
                elif f.default_factory is not dataclasses.MISSING:
                    kwargs[name] = f.default_factory()
                else:
                    kwargs[name] = None
        extra = {k: v for k, v in data.items() if k not in hints}
        obj = cls(**kwargs, extra=extra)  # type: ignore[call-arg]
        object.__setattr__(obj, "_raw", dict(data))
        return obj

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object as the server sent it (or, for an object built in Python,
        its fields with times as RFC 3339 strings)."""
        raw = getattr(self, "_raw", None)
        if raw is not None:
            return dict(raw)
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            out[f.name] = _to_json(getattr(self, f.name))
        out.update(getattr(self, "extra", {}) or {})
        return out

    def __getitem__(self, key: str) -> Any:
        if key != "extra" and key in self._field_hints():
            return getattr(self, key)
        extra = getattr(self, "extra", {}) or {}
        if key in extra:
            return extra[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return key in self._field_hints() or key in (getattr(self, "extra", {}) or {})

    def get(self, key: str, default: Any = None) -> Any:
        """Dict-style read with a default."""
        try:
            return self[key]
        except KeyError:
            return default


def _to_json(value: Any) -> Any:
    if isinstance(value, Model):
        return value.to_dict()
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    return value


def _extra() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


# --------------------------------------------------------------------------- inputs


class ChatMessage(TypedDict):
    """One chat message of ``POST /v1/memories`` (``add``): role ``user``,
    ``assistant`` or ``system``."""

    role: str
    content: str


class _SessionMessageRequired(TypedDict):
    role: str
    content: str


class SessionMessageInput(_SessionMessageRequired, total=False):
    """One message posted to a session: role ``system``, ``user``, ``assistant`` or
    ``tool``; ``at`` (RFC 3339 string or ``datetime``) defaults to now."""

    at: Union[str, datetime]


class SourceInput(TypedDict):
    """A source file reference: path relative to the project root and its hash."""

    path: str
    hash: str


class RememberItem(TypedDict, total=False):
    """One memory of ``remember_batch`` (the body of ``remember`` without
    ``agent_id``); only ``content`` is required."""

    content: str
    type: str
    title: Optional[str]
    importance: float
    tags: List[str]
    session_id: str
    project_id: str
    occurred_at: Union[str, datetime]
    shared: bool
    metadata: Dict[str, Any]
    source: SourceInput
    valence: float
    arousal: float


MemoryType = Literal["working", "episodic", "affective", "semantic", "procedural"]
MemoryStatus = Literal["active", "superseded", "stale", "archived"]

# ----------------------------------------------------------------- memories and tools


@dataclass
class SourceRef(Model):
    """The source file a memory came from."""

    path: str
    hash: str
    extra: Dict[str, Any] = _extra()


@dataclass
class Memory(Model):
    """A memory (``MemoryView``). ``retention`` (how much of it is still alive now,
    0..1) is set on reads of memories as resources (a page of ``memories.list``,
    ``memories.get``) and ``None`` elsewhere."""

    id: str
    agent_id: str
    type: str
    content: str
    title: Optional[str]
    importance: float
    tags: List[str]
    session_id: Optional[str]
    project_id: Optional[str]
    occurred_at: datetime
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime
    access_count: int
    consolidation_level: float
    valence: Optional[float]
    arousal: Optional[float]
    status: str
    shared: bool
    metadata: Dict[str, Any]
    source: Optional[SourceRef] = None
    version: int = 1
    suspicious: bool = False
    suspicious_reasons: List[str] = field(default_factory=list)
    redacted: List[str] = field(default_factory=list)
    provenance: Optional[Dict[str, Any]] = None
    retention: Optional[float] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class Routing(Model):
    """How a memory's type was chosen."""

    type: str
    reason: str
    extra: Dict[str, Any] = _extra()


@dataclass
class RememberResult(Model):
    """Answer of ``remember``."""

    memory: Memory
    routing: Routing
    deduplicated_into: Optional[str] = None
    superseded: List[str] = field(default_factory=list)
    extra: Dict[str, Any] = _extra()


@dataclass
class RememberBatchResult(Model):
    """Answer of ``remember_batch``: one result per input, in order."""

    results: List[RememberResult]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[RememberResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)


@dataclass
class RecallResult(Model):
    """One recall hit: the memory, its score on 0..1, its retention and which
    retrievers found it (``vector``, ``keyword``, ``graph``, ``time``, ...)."""

    memory: Memory
    score: float
    retention: float
    matched_by: List[str]
    components: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class RecallResponse(Model):
    """Answer of ``recall`` / ``search``; iterating it iterates ``results``."""

    results: List[RecallResult]
    took_ms: float
    timings_ms: Optional[Dict[str, float]] = None
    sources: Optional[Dict[str, str]] = None
    note: Optional[str] = None
    facts: Optional[List[Fact]] = None
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[RecallResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def memories(self) -> List[Memory]:
        """The recalled memories, best first."""
        return [r.memory for r in self.results]


@dataclass
class Association(Model):
    """A link between two memories."""

    agent_id: str
    from_id: str
    to_id: str
    relation: str
    weight: float
    created_at: datetime
    extra: Dict[str, Any] = _extra()


@dataclass
class ActivationResult(Model):
    """One memory reached by spreading activation."""

    memory: Memory
    activation: float
    path: List[str]
    extra: Dict[str, Any] = _extra()


@dataclass
class SpreadingActivationResponse(Model):
    """Answer of ``spreading_activation``, strongest first."""

    results: List[ActivationResult]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[ActivationResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)


@dataclass
class ForgetResponse(Model):
    """Answer of ``forget``: the ids archived (or that would be, on a dry run)."""

    forgotten: List[str]
    dry_run: bool = False
    extra: Dict[str, Any] = _extra()


@dataclass
class ContextSection(Model):
    """One section of a ``build_context`` block: its heading, its estimated tokens
    (heading included) and how many memories it holds."""

    name: str
    tokens: int
    memories: int
    extra: Dict[str, Any] = _extra()


@dataclass
class ContextMetadata(Model):
    """What went into a ``build_context`` block; ``sections`` in the block's order
    (procedures first)."""

    injected_count: int
    tokens_used: int
    stale_files: List[str]
    untrusted_fenced: int = 0
    untrusted_withheld: int = 0
    sections: List[ContextSection] = field(default_factory=list)
    extra: Dict[str, Any] = _extra()


@dataclass
class BuildContextResponse(Model):
    """Answer of ``build_context``: a ready-to-inject block."""

    context: str
    metadata: ContextMetadata
    extra: Dict[str, Any] = _extra()


@dataclass
class StoredMemories(Model):
    """Answer of ``extract_turn`` and ``POST /v1/memories``: the memories the
    conversation landed on (new ones and existing ones it reinforced)."""

    stored: List[Memory]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[Memory]:
        return iter(self.stored)

    def __len__(self) -> int:
        return len(self.stored)


@dataclass
class HistoryEntry(Model):
    """A past version of a memory."""

    version: int
    content: str
    importance: float
    tags: List[str]
    status: str
    archived_at: datetime
    reason: str
    extra: Dict[str, Any] = _extra()


@dataclass
class HistoryResponse(Model):
    """Version history of a memory, oldest first."""

    id: str
    versions: List[HistoryEntry]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[HistoryEntry]:
        return iter(self.versions)

    def __len__(self) -> int:
        return len(self.versions)


@dataclass
class TagCount(Model):
    """A tag and how many memories carry it."""

    tag: str
    count: int
    extra: Dict[str, Any] = _extra()


@dataclass
class ReflectResponse(Model):
    """Statistics of an agent's memories."""

    agent_id: str
    total: int
    by_type: Dict[str, int]
    by_status: Dict[str, int]
    top_tags: List[TagCount]
    consolidation_ratio: float
    mean_retention: float
    sessions: int
    extra: Dict[str, Any] = _extra()


@dataclass
class Entity(Model):
    """Who or what an agent's memories name (a person, a place, a product …)."""

    id: str
    name: str
    kind: str
    mentions: int
    first_seen: datetime
    last_seen: datetime
    extra: Dict[str, Any] = _extra()


@dataclass
class EntitiesResponse(Model):
    """A page of an agent's entities, in name order."""

    entities: List[Entity]
    next_cursor: Optional[str] = None
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[Entity]:
        return iter(self.entities)

    def __len__(self) -> int:
        return len(self.entities)


@dataclass
class EntityMention(Model):
    """A memory naming an entity, with the words that name it (a byte span of its content)."""

    memory: Memory
    surface: str
    start: int
    end: int
    source: str = "rules"
    extra: Dict[str, Any] = _extra()


@dataclass
class RelatedEntity(Model):
    """An entity named beside another, with how many memories name both."""

    entity: Entity
    shared_memories: int
    extra: Dict[str, Any] = _extra()


@dataclass
class Fact(Model):
    """A fact with its validity window: ``subject`` ``attribute`` ``value`` from
    ``valid_from`` until ``valid_to`` (absent while it holds)."""

    subject: str
    attribute: str
    value: str
    valid_from: datetime
    current: bool
    source_memory_ids: List[str]
    subject_entity_id: Optional[str] = None
    value_entity_id: Optional[str] = None
    valid_to: Optional[datetime] = None
    closed_by_memory_id: Optional[str] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class FactsResponse(Model):
    """Facts by subject, attribute and start."""

    facts: List[Fact]
    truncated: bool
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[Fact]:
        return iter(self.facts)

    def __len__(self) -> int:
        return len(self.facts)


@dataclass
class EntityMergeRecord(Model):
    """A merge of one entity's name into another entity (``origin`` ``user`` or
    ``stated``); ``undone_at`` is set once it was split again."""

    id: str
    alias: str
    name: str
    entity_id: str
    origin: str
    created_at: datetime
    memory_id: Optional[str] = None
    undone_at: Optional[datetime] = None
    project_id: Optional[str] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class SameEntity(Model):
    """An entity that may be another one: ``reason`` its name's form gives (``short
    form``, ``a word of the name``, ``initials``) and how alike the memories naming
    each are (``similarity``, a cosine). Nothing is merged until someone merges."""

    entity: Entity
    reason: str
    similarity: float
    extra: Dict[str, Any] = _extra()


@dataclass
class EntityDetail(Model):
    """One entity, the memories naming it (newest first), the entities named beside
    it, the facts about it over time and the facts pointing at it."""

    entity: Entity
    memories: List[EntityMention]
    related: List[RelatedEntity]
    facts: List[Fact]
    referenced_by: List[Fact]
    aliases: List[str]
    merges: List[EntityMergeRecord]
    possibly_same: List[SameEntity] = field(default_factory=list)
    extra: Dict[str, Any] = _extra()


@dataclass
class MergeResult(Model):
    """A merge made or undone, and the entity that stays (merge) or was split off."""

    merge: EntityMergeRecord
    entity: Optional[Entity] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class ReembedStatus(Model):
    """The progress of re-embedding every memory with the configured model."""

    phase: str
    serving: str
    target: Optional[str]
    total: int
    done: int
    passes: int
    embedded: int
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    pause_ms: Optional[float] = None
    error: Optional[str] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class Run(Model):
    """A consolidation (sleep-cycle) or archival run."""

    id: str
    agent_id: Optional[str]
    trigger: str
    started_at: datetime
    finished_at: datetime
    processed: int
    consolidated: int
    forgotten: int
    new_semantic: int
    new_procedural: int
    report: Dict[str, Any]
    extra: Dict[str, Any] = _extra()


@dataclass
class RunsResponse(Model):
    """The run log, newest first."""

    runs: List[Run]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)


@dataclass
class ListResponse(Model):
    """A page of memories, newest first; pass ``next_cursor`` as ``cursor`` for the
    next page (``None`` at the end). ``total`` counts every memory that passes the
    filters (only when asked for with ``with_total=True``, else ``None``)."""

    memories: List[Memory]
    next_cursor: Optional[str] = None
    total: Optional[int] = None
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[Memory]:
        return iter(self.memories)

    def __len__(self) -> int:
        return len(self.memories)


@dataclass
class DeleteResponse(Model):
    """Answer of deleting one memory."""

    deleted: str
    extra: Dict[str, Any] = _extra()


@dataclass
class DeleteAllResponse(Model):
    """Answer of deleting every memory of an agent: how many went."""

    deleted: int
    extra: Dict[str, Any] = _extra()


# ------------------------------------------------------------------------ browsing


@dataclass
class AgentSummary(Model):
    """An agent of the caller's tenant with memories: how many (in every status),
    how many are active, and when its newest one was stored."""

    agent_id: str
    memories: int
    active: int
    last_at: Optional[datetime] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class AgentsResponse(Model):
    """Answer of ``GET /v1/agents``: the agents the key may see, by agent id."""

    agents: List[AgentSummary]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[AgentSummary]:
        return iter(self.agents)

    def __len__(self) -> int:
        return len(self.agents)


@dataclass
class BulkResponse(Model):
    """What a bulk forget or restore did to each id: ``changed``, ``unchanged``
    (already in the state asked for), ``missing`` (not a memory of the agent)."""

    changed: List[str]
    unchanged: List[str]
    missing: List[str]
    extra: Dict[str, Any] = _extra()


@dataclass
class MemoryBrief(Model):
    """A memory in brief (the other end of an association)."""

    id: str
    type: str
    content: str
    status: str
    importance: float
    extra: Dict[str, Any] = _extra()


@dataclass
class MemoryAssociation(Model):
    """One association of a memory, with the memory at its other end (``other``)."""

    from_id: str
    to_id: str
    relation: str
    weight: float
    created_at: datetime
    other: MemoryBrief
    extra: Dict[str, Any] = _extra()


@dataclass
class AssociationsResponse(Model):
    """A memory's associations, strongest first."""

    associations: List[MemoryAssociation]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[MemoryAssociation]:
        return iter(self.associations)

    def __len__(self) -> int:
        return len(self.associations)


@dataclass
class GraphNode(Model):
    """A memory of a neighbourhood, in brief, with its distance in hops from the
    memory asked about (0: itself)."""

    id: str
    type: str
    content: str
    status: str
    importance: float
    depth: int
    extra: Dict[str, Any] = _extra()


@dataclass
class GraphEdge(Model):
    """An association between two memories of a neighbourhood."""

    from_id: str
    to_id: str
    relation: str
    weight: float
    extra: Dict[str, Any] = _extra()


@dataclass
class GraphResponse(Model):
    """A memory's neighbourhood in the association graph: ``nodes`` nearest first
    (the memory asked about first), ``edges`` between them."""

    nodes: List[GraphNode]
    edges: List[GraphEdge]
    extra: Dict[str, Any] = _extra()


@dataclass
class RetentionPoint(Model):
    """One sample of a retention curve."""

    at: datetime
    retention: float
    extra: Dict[str, Any] = _extra()


@dataclass
class RetentionResponse(Model):
    """A memory's retention now (0..1) and its curve from the last access until
    ``days`` from now, assuming no further use."""

    retention: float
    points: List[RetentionPoint]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[RetentionPoint]:
        return iter(self.points)

    def __len__(self) -> int:
        return len(self.points)


# ------------------------------------------------------------------------- projects


@dataclass
class Project(Model):
    """A project of one agent; ``sessions`` is filled on reads of one project."""

    project_id: str
    agent_id: str
    name: str
    isolated: bool
    created_at: datetime
    updated_at: datetime
    sessions: Optional[List[str]] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class ProjectsResponse(Model):
    """An agent's projects, in id order."""

    projects: List[Project]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[Project]:
        return iter(self.projects)

    def __len__(self) -> int:
        return len(self.projects)


# -------------------------------------------------------------------- KV namespaces


@dataclass
class KvEntry(Model):
    """An entry of a KV namespace."""

    namespace: str
    key: str
    value: Any
    tags: List[str]
    written_by: str
    created_at: datetime
    updated_at: datetime
    expires_at: Optional[datetime]
    last_used: int
    extra: Dict[str, Any] = _extra()


@dataclass
class KvPutResponse(Model):
    """Answer of a put: the entry, whether the key was new, and what was evicted."""

    entry: KvEntry
    created: bool
    evicted: List[str]
    extra: Dict[str, Any] = _extra()


@dataclass
class KvDeleteResponse(Model):
    """Answer of deleting an entry."""

    deleted: str
    extra: Dict[str, Any] = _extra()


@dataclass
class KvSearchResult(Model):
    """One KV search hit."""

    entry: KvEntry
    score: float
    extra: Dict[str, Any] = _extra()


@dataclass
class KvSearchResponse(Model):
    """KV search hits, best first."""

    results: List[KvSearchResult]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[KvSearchResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)


@dataclass
class KvListResponse(Model):
    """Entries of a namespace, most recently used first."""

    entries: List[KvEntry]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[KvEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass
class NamespaceStats(Model):
    """Counters of a KV namespace."""

    namespace: str
    entries: int
    max_entries: int
    hits: int
    misses: int
    evictions: int
    puts: int
    created_at: datetime
    extra: Dict[str, Any] = _extra()


@dataclass
class NamespaceConfigureResponse(Model):
    """Answer of configuring a namespace."""

    stats: NamespaceStats
    evicted: List[str]
    extra: Dict[str, Any] = _extra()


@dataclass
class NamespacesResponse(Model):
    """The tenant's KV namespaces by name, each with its counters."""

    namespaces: List[NamespaceStats]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[NamespaceStats]:
        return iter(self.namespaces)

    def __len__(self) -> int:
        return len(self.namespaces)


# ------------------------------------------------------------------------- sessions


@dataclass
class SessionMessage(Model):
    """A stored session message."""

    seq: int
    role: str
    content: str
    tokens: int
    at: datetime
    extra: Dict[str, Any] = _extra()


@dataclass
class Session(Model):
    """A session's live window and budget."""

    agent_id: str
    session_id: str
    summary: Optional[str]
    messages: List[SessionMessage]
    beyond_window: int
    expired: bool
    total_messages: int
    compacted_through: int
    compactions: int
    tokens: int
    context_tokens: int
    compact_at_tokens: int
    last_message_at: Optional[datetime] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class SessionSummary(Model):
    """A session in a list: its counters and summary, without its messages."""

    session_id: str
    total_messages: int
    tokens: int
    compactions: int
    compacted_through: int
    summary: Optional[str]
    created_at: datetime
    last_message_at: datetime
    extra: Dict[str, Any] = _extra()


@dataclass
class SessionsResponse(Model):
    """An agent's sessions, the most recently spoken first."""

    sessions: List[SessionSummary]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[SessionSummary]:
        return iter(self.sessions)

    def __len__(self) -> int:
        return len(self.sessions)


@dataclass
class PostMessagesResponse(Model):
    """Answer of posting messages to a session."""

    messages: List[SessionMessage]
    session: Session
    compaction_scheduled: bool
    extractions_scheduled: int
    extra: Dict[str, Any] = _extra()


@dataclass
class CompactResponse(Model):
    """What a session compaction did."""

    agent_id: str
    session_id: str
    compacted: bool
    reason: Optional[str]
    archive_id: Optional[str]
    messages: int
    compacted_through: int
    summary: Optional[str]
    tokens_before: int
    tokens_after: int
    inner_thought: str
    fallback: Optional[str] = None
    extra: Dict[str, Any] = _extra()


# ---------------------------------------------------------------------------- admin


@dataclass
class ApiKey(Model):
    """An API key as listed (never its secret)."""

    id: str
    name: str
    tenant: str
    agent: str
    scopes: List[str]
    status: str
    created_at: datetime
    last_used_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    revoked_at: Optional[datetime] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class CreatedKey(Model):
    """A created key: ``secret`` is shown this once."""

    secret: str
    key: ApiKey
    extra: Dict[str, Any] = _extra()


@dataclass
class KeysResponse(Model):
    """API keys, newest first."""

    keys: List[ApiKey]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[ApiKey]:
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class RevokedKey(Model):
    """A revoked key's id."""

    revoked: str
    extra: Dict[str, Any] = _extra()


@dataclass
class AuditEntry(Model):
    """One audit log entry."""

    at: datetime
    actor: str
    tenant: Optional[str]
    action: str
    target: Optional[str]
    detail: Dict[str, Any]
    extra: Dict[str, Any] = _extra()


@dataclass
class AuditResponse(Model):
    """Audit entries, newest first."""

    entries: List[AuditEntry]
    extra: Dict[str, Any] = _extra()

    def __iter__(self) -> Iterator[AuditEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass
class ErasedRecords(Model):
    """Rows the system of record removed in an erase."""

    memories: int
    versions: int
    embeddings: int
    edges: int
    sessions: int
    session_messages: int
    projects: int
    runs: int
    kv_entries: int
    extra: Dict[str, Any] = _extra()


@dataclass
class EraseResponse(Model):
    """What erasing an agent removed from each store."""

    agent_id: str
    tenant: str
    system_of_record: ErasedRecords
    vector_index: int
    working_memory: int
    projection_deletes_queued: int
    extra: Dict[str, Any] = _extra()


@dataclass
class TenantEraseResponse(Model):
    """What erasing a tenant removed."""

    tenant: str
    agents: List[EraseResponse]
    keys_revoked: int
    extra: Dict[str, Any] = _extra()


@dataclass
class TransferCounts(Model):
    """Records of each kind an export holds (or an import read, wrote, left alone)."""

    memories: int
    edges: int
    sessions: int
    projects: int
    runs: int
    namespaces: int
    kv_entries: int
    extra: Dict[str, Any] = _extra()


@dataclass
class InvalidLine(Model):
    """A line an import refused: its number, kind, error code, field and message."""

    line: int
    kind: Optional[str]
    code: str
    field: Optional[str]
    message: str
    extra: Dict[str, Any] = _extra()


@dataclass
class ImportReport(Model):
    """What an import did (``POST /v1/import``)."""

    source_backend: str
    source_version: str
    read: TransferCounts
    written: TransferCounts
    unchanged: TransferCounts
    orphaned: TransferCounts
    embeddings_reused: int
    re_embedded: int
    skipped: List[InvalidLine]
    dry_run: bool
    extra: Dict[str, Any] = _extra()


@dataclass
class FaultInjected(Model):
    """Answer of the test-only fault injection route."""

    injected: str
    extra: Dict[str, Any] = _extra()


# -------------------------------------------------------------------------- service


@dataclass
class ActorHealth(Model):
    """Health of one supervised actor."""

    name: str
    state: str
    restarts: int
    last_error: Optional[str] = None
    extra: Dict[str, Any] = _extra()


@dataclass
class Health(Model):
    """``/health``: liveness; ``backends`` and ``actors`` only for an admin key (or
    with ``auth.public_metrics``)."""

    status: str
    version: str
    uptime_seconds: int
    backends: Optional[Dict[str, Any]] = None
    actors: Optional[List[ActorHealth]] = None
    extra: Dict[str, Any] = _extra()
