"""The async client, :class:`AsyncMnemos` (over ``httpx.AsyncClient``).

``_sync.py`` (:class:`~mnemos_client.Mnemos`) is generated from ``_async.py`` by
``scripts/unasync.py``: edit ``_async.py``, then run
``python clients/python/scripts/unasync.py``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import (
    Any,
    AsyncIterator,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Type,
    TypeVar,
    Union,
)

import httpx

from ._base import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_WAIT,
    DEFAULT_RETRY_BACKOFF,
    DEFAULT_TIMEOUT,
    NOT_GIVEN,
    BaseClient,
    NotGiven,
    body,
    messages_of,
    qs,
    seg,
    to_json,
)
from .errors import MnemosConnectionError, MnemosTimeoutError
from .types import (
    AgentsResponse,
    Association,
    AssociationsResponse,
    AuditResponse,
    BuildContextResponse,
    BulkResponse,
    ChatMessage,
    CompactResponse,
    CreatedKey,
    EntitiesResponse,
    EntityDetail,
    FactsResponse,
    MergeResult,
    DeleteAllResponse,
    DeleteResponse,
    EraseResponse,
    ImportReport,
    FaultInjected,
    ForgetResponse,
    GraphResponse,
    Health,
    HistoryEntry,
    HistoryResponse,
    KeysResponse,
    KvDeleteResponse,
    KvEntry,
    KvListResponse,
    KvPutResponse,
    KvSearchResponse,
    ListResponse,
    Memory,
    Model,
    NamespaceConfigureResponse,
    NamespaceStats,
    NamespacesResponse,
    PostMessagesResponse,
    Project,
    ProjectsResponse,
    RecallResponse,
    ReembedStatus,
    ReflectResponse,
    RememberBatchResult,
    RememberItem,
    RememberResult,
    RetentionResponse,
    RevokedKey,
    Run,
    RunsResponse,
    Session,
    SessionMessageInput,
    SessionsResponse,
    SourceInput,
    SpreadingActivationResponse,
    StoredMemories,
    TenantEraseResponse,
)

__all__ = [
    "AsyncMnemos",
    "AsyncTools",
    "AsyncMemories",
    "AsyncCognition",
    "AsyncProjects",
    "AsyncEntities",
    "AsyncKv",
    "AsyncSessions",
    "AsyncAdmin",
    "AsyncAdminKeys",
    "AsyncTransfer",
]

M = TypeVar("M", bound=Model)

Messages = Union[str, ChatMessage, Mapping[str, Any], Sequence[Union[ChatMessage, Mapping[str, Any], str]]]
Types = Union[str, Sequence[str]]
When = Union[str, datetime]

#: The most ids one ``POST /v1/memories/bulk`` takes (``forget_many`` and
#: ``restore_many`` send longer lists in chunks of this size).
MAX_BULK_IDS = 500


class _AsyncResource:
    def __init__(self, client: "AsyncMnemos") -> None:
        self._client = client

    def _agent(self, agent_id: Optional[str]) -> Optional[str]:
        return self._client._agent(agent_id)


class AsyncTools(_AsyncResource):
    """The tool routes ``/tools/*`` (the same names and arguments as the MCP tools)."""

    async def remember(
        self,
        content: str,
        *,
        agent_id: Optional[str] = None,
        memory_type: Optional[str] = None,
        title: Optional[str] = None,
        importance: Optional[float] = None,
        tags: Optional[Sequence[str]] = None,
        session_id: Optional[str] = None,
        project_id: Optional[str] = None,
        occurred_at: Optional[Union[str, datetime]] = None,
        shared: Optional[bool] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        source: Optional[SourceInput] = None,
        valence: Optional[float] = None,
        arousal: Optional[float] = None,
    ) -> RememberResult:
        """Store one memory (``POST /tools/remember``). The server picks the type
        when ``memory_type`` is not given, and answers a duplicate with the existing
        memory (``deduplicated_into``)."""
        payload = body(
            agent_id=self._agent(agent_id),
            content=content,
            type=memory_type,
            title=title,
            importance=importance,
            tags=tags,
            session_id=session_id,
            project_id=project_id,
            occurred_at=occurred_at,
            shared=shared,
            metadata=metadata,
            source=source,
            valence=valence,
            arousal=arousal,
        )
        return await self._client._call("POST", "/tools/remember", RememberResult, json=payload)

    async def remember_batch(
        self,
        memories: Sequence[Union[RememberItem, Mapping[str, Any], str]],
        *,
        agent_id: Optional[str] = None,
    ) -> RememberBatchResult:
        """Store several memories in one transaction (``POST /tools/remember_batch``);
        a string item is ``{"content": item}``."""
        items = [{"content": m} if isinstance(m, str) else dict(m) for m in memories]
        payload = body(agent_id=self._agent(agent_id), memories=items)
        return await self._client._call("POST", "/tools/remember_batch", RememberBatchResult, json=payload)

    async def recall(
        self,
        query: str,
        *,
        agent_id: Optional[str] = None,
        limit: Optional[int] = None,
        types: Optional[Types] = None,
        min_score: Optional[float] = None,
        time_query: Optional[str] = None,
        now: Optional[Union[str, datetime]] = None,
        session_id: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        include_shared: Optional[bool] = None,
        project_id: Optional[str] = None,
        debug: Optional[bool] = None,
        as_of: Optional[Union[str, datetime]] = None,
    ) -> RecallResponse:
        """Recall the memories that matter for ``query`` (``POST /tools/recall``):
        hybrid vector + keyword + time retrieval, best first, scores on 0..1;
        ``min_score`` drops weaker results. ``as_of`` (an instant, a date or a period)
        answers from what the memories said then; ``facts`` lists what held."""
        payload = body(
            agent_id=self._agent(agent_id),
            query=query,
            limit=limit,
            type=[types] if isinstance(types, str) else types,
            min_score=min_score,
            time_query=time_query,
            now=now,
            session_id=session_id,
            tags=tags,
            include_shared=include_shared,
            project_id=project_id,
            debug=debug,
            as_of=as_of,
        )
        return await self._client._call("POST", "/tools/recall", RecallResponse, json=payload)

    async def associate(
        self,
        from_id: str,
        to_id: str,
        *,
        relation: Optional[str] = None,
        weight: Optional[float] = None,
        agent_id: Optional[str] = None,
    ) -> Association:
        """Link two memories (``POST /tools/associate``)."""
        payload = body(
            agent_id=self._agent(agent_id), from_id=from_id, to_id=to_id, relation=relation, weight=weight
        )
        return await self._client._call("POST", "/tools/associate", Association, json=payload)

    async def spreading_activation(
        self,
        seed_id: str,
        *,
        depth: Optional[int] = None,
        limit: Optional[int] = None,
        agent_id: Optional[str] = None,
    ) -> SpreadingActivationResponse:
        """Spread activation from a memory through its associations
        (``POST /tools/spreading_activation``)."""
        payload = body(agent_id=self._agent(agent_id), seed_id=seed_id, depth=depth, limit=limit)
        return await self._client._call(
            "POST", "/tools/spreading_activation", SpreadingActivationResponse, json=payload
        )

    async def forget(
        self,
        memory_id: Optional[str] = None,
        *,
        query: Optional[str] = None,
        limit: Optional[int] = None,
        dry_run: Optional[bool] = None,
        agent_id: Optional[str] = None,
    ) -> ForgetResponse:
        """Forget (archive, never delete) one memory by id, or the memories a query
        keyword-matches (``POST /tools/forget``); ``dry_run`` only reports."""
        payload = body(
            agent_id=self._agent(agent_id), id=memory_id, query=query, limit=limit, dry_run=dry_run
        )
        return await self._client._call("POST", "/tools/forget", ForgetResponse, json=payload)

    async def consolidate(self, *, agent_id: Optional[str] = None) -> Run:
        """Run a sleep-cycle pass for the agent now (``POST /tools/consolidate``)."""
        payload = body(agent_id=self._agent(agent_id))
        return await self._client._call("POST", "/tools/consolidate", Run, json=payload)

    async def reflect(self, *, agent_id: Optional[str] = None) -> ReflectResponse:
        """Statistics of the agent's memories (``POST /tools/reflect``)."""
        payload = body(agent_id=self._agent(agent_id))
        return await self._client._call("POST", "/tools/reflect", ReflectResponse, json=payload)

    async def memory_history(self, memory_id: str, *, agent_id: Optional[str] = None) -> HistoryResponse:
        """Version history of a memory (``POST /tools/memory_history``)."""
        payload = body(id=memory_id, agent_id=self._agent(agent_id))
        return await self._client._call("POST", "/tools/memory_history", HistoryResponse, json=payload)

    async def build_context(
        self,
        query: str,
        *,
        context_budget: Optional[int] = None,
        project_root: Optional[str] = None,
        session_id: Optional[str] = None,
        include_shared: Optional[bool] = None,
        project_id: Optional[str] = None,
        agent_id: Optional[str] = None,
    ) -> BuildContextResponse:
        """A ready-to-inject context block within ``context_budget`` tokens
        (``POST /tools/build_context``)."""
        payload = body(
            agent_id=self._agent(agent_id),
            query=query,
            context_budget=context_budget,
            project_root=project_root,
            session_id=session_id,
            include_shared=include_shared,
            project_id=project_id,
        )
        return await self._client._call("POST", "/tools/build_context", BuildContextResponse, json=payload)

    async def extract_turn(
        self,
        user: str,
        assistant: str,
        *,
        session_id: Optional[str] = None,
        agent_id: Optional[str] = None,
    ) -> StoredMemories:
        """Mine one user/assistant exchange for memories (``POST /tools/extract_turn``)."""
        payload = body(agent_id=self._agent(agent_id), user=user, assistant=assistant, session_id=session_id)
        return await self._client._call("POST", "/tools/extract_turn", StoredMemories, json=payload)


class AsyncMemories(_AsyncResource):
    """The memory resources ``/v1/memories``."""

    async def list(
        self,
        *,
        agent_id: Optional[str] = None,
        memory_type: Optional[str] = None,
        status: Optional[str] = None,
        tag: Optional[str] = None,
        project_id: Optional[str] = None,
        session_id: Optional[str] = None,
        occurred_after: Optional[When] = None,
        occurred_before: Optional[When] = None,
        q: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        with_total: Optional[bool] = None,
    ) -> ListResponse:
        """One page of the agent's memories, newest first (``GET /v1/memories``);
        pass ``next_cursor`` as ``cursor`` for the next page.

        Filters: ``memory_type``, ``status``, ``tag``, ``project_id``, ``session_id``,
        ``occurred_after`` (inclusive) / ``occurred_before`` (exclusive) as RFC 3339
        strings or ``datetime``s (naive ones are UTC), and ``q``: only memories whose
        content holds every word of it. ``with_total=True`` also counts every memory
        that passes the filters (``total``)."""
        params = qs(
            agent_id=self._agent(agent_id),
            type=memory_type,
            status=status,
            tag=tag,
            project_id=project_id,
            session_id=session_id,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            q=q,
            limit=limit,
            cursor=cursor,
            with_total=with_total,
        )
        return await self._client._call("GET", "/v1/memories", ListResponse, params=params)

    async def iter(
        self,
        *,
        agent_id: Optional[str] = None,
        memory_type: Optional[str] = None,
        status: Optional[str] = None,
        tag: Optional[str] = None,
        project_id: Optional[str] = None,
        session_id: Optional[str] = None,
        occurred_after: Optional[When] = None,
        occurred_before: Optional[When] = None,
        q: Optional[str] = None,
        page_size: int = 100,
        max_items: Optional[int] = None,
    ) -> AsyncIterator[Memory]:
        """Every memory of the agent that passes the filters (those of :meth:`list`),
        newest first, fetching pages of ``page_size`` as it goes (following
        ``next_cursor``); stops after ``max_items`` if given."""
        cursor: Optional[str] = None
        seen = 0
        if max_items is not None and max_items <= 0:
            return
        while True:
            page = await self.list(
                agent_id=agent_id,
                memory_type=memory_type,
                status=status,
                tag=tag,
                project_id=project_id,
                session_id=session_id,
                occurred_after=occurred_after,
                occurred_before=occurred_before,
                q=q,
                limit=page_size,
                cursor=cursor,
            )
            for memory in page.memories:
                yield memory
                seen += 1
                if max_items is not None and seen >= max_items:
                    return
            if not page.next_cursor or not page.memories:
                return
            cursor = page.next_cursor

    async def add(
        self,
        messages: Messages,
        *,
        agent_id: Optional[str] = None,
        session_id: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> StoredMemories:
        """Mine a conversation for memories (``POST /v1/memories``): each user message
        with the assistant replies that follow it is one exchange, mined as
        ``extract_turn`` mines one; system messages are context. A string is one user
        message."""
        payload = body(
            agent_id=self._agent(agent_id),
            messages=messages_of(messages),
            session_id=session_id,
            metadata=metadata,
        )
        return await self._client._call("POST", "/v1/memories", StoredMemories, json=payload)

    async def get(self, memory_id: str, *, agent_id: Optional[str] = None) -> Memory:
        """One memory by id (``GET /v1/memories/{id}``); the owner must be named
        (``agent_id`` or the client's default) unless the key is bound to it."""
        params = qs(agent_id=self._agent(agent_id))
        return await self._client._call("GET", f"/v1/memories/{seg(memory_id)}", Memory, params=params)

    async def update(
        self,
        memory_id: str,
        *,
        agent_id: Optional[str] = None,
        content: Optional[str] = None,
        title: Union[str, None, NotGiven] = NOT_GIVEN,
        importance: Optional[float] = None,
        tags: Optional[Sequence[str]] = None,
        status: Optional[str] = None,
        shared: Optional[bool] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        memory_type: Optional[str] = None,
    ) -> Memory:
        """Change a memory (``PATCH /v1/memories/{id}``); the previous state is kept
        in its history. Fields left ``None`` are unchanged; ``title=None`` clears
        the title."""
        payload = body(
            content=content,
            importance=importance,
            tags=tags,
            status=status,
            shared=shared,
            metadata=metadata,
            type=memory_type,
        )
        if not isinstance(title, NotGiven):
            payload["title"] = title
        params = qs(agent_id=self._agent(agent_id))
        return await self._client._call(
            "PATCH", f"/v1/memories/{seg(memory_id)}", Memory, params=params, json=payload
        )

    async def delete(self, memory_id: str, *, agent_id: Optional[str] = None) -> DeleteResponse:
        """Delete a memory everywhere, history included (``DELETE /v1/memories/{id}``)."""
        params = qs(agent_id=self._agent(agent_id))
        return await self._client._call("DELETE", f"/v1/memories/{seg(memory_id)}", DeleteResponse, params=params)

    async def delete_all(self, *, agent_id: Optional[str] = None) -> DeleteAllResponse:
        """Delete every memory of one agent, history included (``DELETE /v1/memories``)."""
        params = qs(agent_id=self._agent(agent_id))
        return await self._client._call("DELETE", "/v1/memories", DeleteAllResponse, params=params)

    async def history(self, memory_id: str, *, agent_id: Optional[str] = None) -> HistoryResponse:
        """Version history of a memory, oldest first (``GET /v1/memories/{id}/history``)."""
        params = qs(agent_id=self._agent(agent_id))
        return await self._client._call(
            "GET", f"/v1/memories/{seg(memory_id)}/history", HistoryResponse, params=params
        )

    async def bulk(
        self, ids: Sequence[str], action: str, *, agent_id: Optional[str] = None
    ) -> BulkResponse:
        """Forget (archive, kept with its history) or restore (make active again) up
        to 500 memories of one agent in one request (``POST /v1/memories/bulk``);
        ``action`` is ``"forget"`` or ``"restore"``. A missing id does not stop the
        others: the answer sorts the ids into ``changed``, ``unchanged`` and
        ``missing``."""
        if isinstance(ids, str):
            raise TypeError("ids must be a sequence of memory ids, not one string")
        payload = body(agent_id=self._agent(agent_id), ids=[str(i) for i in ids], action=action)
        return await self._client._call("POST", "/v1/memories/bulk", BulkResponse, json=payload)

    async def _bulk_chunked(
        self, ids: Sequence[str], action: str, agent_id: Optional[str]
    ) -> BulkResponse:
        if isinstance(ids, str):
            raise TypeError("ids must be a sequence of memory ids, not one string")
        wanted = [str(i) for i in ids]
        merged: Dict[str, List[str]] = {"changed": [], "unchanged": [], "missing": []}
        for start in range(0, len(wanted), MAX_BULK_IDS):
            part = await self.bulk(wanted[start : start + MAX_BULK_IDS], action, agent_id=agent_id)
            merged["changed"].extend(part.changed)
            merged["unchanged"].extend(part.unchanged)
            merged["missing"].extend(part.missing)
        return BulkResponse.from_dict(merged)

    async def forget_many(self, ids: Sequence[str], *, agent_id: Optional[str] = None) -> BulkResponse:
        """Forget (archive) these memories (``bulk(ids, "forget")``, in requests of
        at most 500 ids; no request for an empty list)."""
        return await self._bulk_chunked(ids, "forget", agent_id)

    async def restore_many(self, ids: Sequence[str], *, agent_id: Optional[str] = None) -> BulkResponse:
        """Make these memories active again (``bulk(ids, "restore")``, in requests
        of at most 500 ids; no request for an empty list)."""
        return await self._bulk_chunked(ids, "restore", agent_id)

    async def associations(self, memory_id: str, *, agent_id: Optional[str] = None) -> AssociationsResponse:
        """A memory's associations, strongest first, each with the memory at its other
        end (``GET /v1/memories/{id}/associations``)."""
        params = qs(agent_id=self._agent(agent_id))
        return await self._client._call(
            "GET", f"/v1/memories/{seg(memory_id)}/associations", AssociationsResponse, params=params
        )

    async def graph(
        self,
        memory_id: str,
        *,
        depth: Optional[int] = None,
        limit: Optional[int] = None,
        agent_id: Optional[str] = None,
    ) -> GraphResponse:
        """A memory's neighbourhood in the association graph
        (``GET /v1/memories/{id}/graph``): the memories up to ``depth`` hops away
        (1 to 4, default 2), at most ``limit`` of them with itself (1 to 1000, default
        200), nearest first, and the edges between them."""
        params = qs(agent_id=self._agent(agent_id), depth=depth, limit=limit)
        return await self._client._call(
            "GET", f"/v1/memories/{seg(memory_id)}/graph", GraphResponse, params=params
        )

    async def retention(
        self,
        memory_id: str,
        *,
        days: Optional[int] = None,
        points: Optional[int] = None,
        agent_id: Optional[str] = None,
    ) -> RetentionResponse:
        """A memory's retention now and its curve (``GET /v1/memories/{id}/retention``):
        ``points`` samples (2 to 500, default 31) from its last access until ``days``
        from now (0 to 3650, default 30), assuming no further use."""
        params = qs(agent_id=self._agent(agent_id), days=days, points=points)
        return await self._client._call(
            "GET", f"/v1/memories/{seg(memory_id)}/retention", RetentionResponse, params=params
        )


class AsyncCognition(_AsyncResource):
    """The sleep cycle's run log ``/v1/cognition``."""

    async def runs(self, *, agent_id: Optional[str] = None, limit: Optional[int] = None) -> RunsResponse:
        """Consolidation runs, newest first (``GET /v1/cognition/runs``): of one agent,
        or (an admin of the default tenant, no agent) of every agent."""
        params = qs(agent_id=self._agent(agent_id), limit=limit)
        return await self._client._call("GET", "/v1/cognition/runs", RunsResponse, params=params)


class AsyncEntities(_AsyncResource):
    """Entities ``/v1/entities``: who and what an agent's memories name. The index
    follows writes within the projector's interval (a fraction of a second)."""

    async def list(
        self,
        *,
        agent_id: Optional[str] = None,
        q: Optional[str] = None,
        kind: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> EntitiesResponse:
        """A page of the agent's entities in name order (``GET /v1/entities``); ``q``
        matches part of a name, ``kind`` one of person, organization, place, product,
        title, handle, email, url, path, version, date, name."""
        params = qs(agent_id=self._agent(agent_id), q=q, kind=kind, limit=limit, cursor=cursor)
        return await self._client._call("GET", "/v1/entities", EntitiesResponse, params=params)

    async def get(self, entity_id: str, *, agent_id: Optional[str] = None, limit: Optional[int] = None) -> EntityDetail:
        """One entity with the memories naming it and its related entities (``GET /v1/entities/{id}``)."""
        params = qs(agent_id=self._agent(agent_id), limit=limit)
        return await self._client._call("GET", f"/v1/entities/{seg(entity_id)}", EntityDetail, params=params)

    async def merge(self, entity_id: str, *, into: str, agent_id: Optional[str] = None) -> MergeResult:
        """Merge entity ``entity_id`` into entity ``into`` (``POST /v1/entities/{id}/merge``):
        its name becomes an alias, its memories and facts move to ``into``."""
        payload = body(into=into, agent_id=self._agent(agent_id))
        return await self._client._call(
            "POST", f"/v1/entities/{seg(entity_id)}/merge", MergeResult, json=payload
        )

    async def split(
        self,
        entity_id: str,
        *,
        alias: Optional[str] = None,
        project_id: Optional[str] = None,
        agent_id: Optional[str] = None,
    ) -> MergeResult:
        """Split ``alias`` off entity ``entity_id`` again (``POST /v1/entities/{id}/split``),
        undoing its merge; or, with ``project_id``, give the name its own entity in that
        project's memories (the same name for someone else there)."""
        payload = body(alias=alias, project_id=project_id, agent_id=self._agent(agent_id))
        return await self._client._call(
            "POST", f"/v1/entities/{seg(entity_id)}/split", MergeResult, json=payload
        )


class AsyncFacts(_AsyncResource):
    """Facts ``/v1/facts``: what an agent's memories state about people and things, each
    with the window it held in; a replaced fact is kept with its end."""

    async def list(
        self,
        *,
        agent_id: Optional[str] = None,
        subject: Optional[str] = None,
        attribute: Optional[str] = None,
        as_of: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> FactsResponse:
        """Facts (``GET /v1/facts``), about ``subject`` (a name, any case) and
        ``attribute`` (``lives_in``, ``works_at``, ``email`` …) when given; ``as_of``
        (an RFC 3339 time, a date, or a period such as ``March 2023``) keeps those that
        held then."""
        params = qs(agent_id=self._agent(agent_id), subject=subject, attribute=attribute, as_of=as_of, limit=limit)
        return await self._client._call("GET", "/v1/facts", FactsResponse, params=params)


class AsyncProjects(_AsyncResource):
    """Projects ``/v1/projects``: an agent's groups of sessions and memories."""

    async def list(self, *, agent_id: Optional[str] = None) -> ProjectsResponse:
        """The agent's projects (``GET /v1/projects``)."""
        params = qs(agent_id=self._agent(agent_id))
        return await self._client._call("GET", "/v1/projects", ProjectsResponse, params=params)

    async def get(self, project_id: str, *, agent_id: Optional[str] = None) -> Project:
        """One project with its sessions (``GET /v1/projects/{project_id}``)."""
        params = qs(agent_id=self._agent(agent_id))
        return await self._client._call("GET", f"/v1/projects/{seg(project_id)}", Project, params=params)

    async def put(
        self,
        project_id: str,
        *,
        name: Optional[str] = None,
        isolated: Optional[bool] = None,
        agent_id: Optional[str] = None,
    ) -> Project:
        """Create a project or change its name or isolation (``PUT /v1/projects/{project_id}``)."""
        payload = body(agent_id=self._agent(agent_id), name=name, isolated=isolated)
        return await self._client._call("PUT", f"/v1/projects/{seg(project_id)}", Project, json=payload)

    async def attach_session(
        self, project_id: str, session_id: str, *, agent_id: Optional[str] = None
    ) -> Project:
        """Attach a session to a project: its memories from now on belong to it
        (``PUT /v1/projects/{project_id}/sessions/{session_id}``)."""
        payload = body(agent_id=self._agent(agent_id))
        return await self._client._call(
            "PUT", f"/v1/projects/{seg(project_id)}/sessions/{seg(session_id)}", Project, json=payload
        )


class AsyncKv(_AsyncResource):
    """KV namespaces ``/v1/namespaces``: bounded LRU key-value stores shared by agents."""

    async def configure(
        self, namespace: str, max_entries: int, *, agent_id: Optional[str] = None
    ) -> NamespaceConfigureResponse:
        """Create a namespace with a bound, or change its bound
        (``PUT /v1/namespaces/{namespace}``)."""
        payload = body(max_entries=max_entries, agent_id=self._agent(agent_id))
        return await self._client._call(
            "PUT", f"/v1/namespaces/{seg(namespace)}", NamespaceConfigureResponse, json=payload
        )

    async def namespaces(self) -> NamespacesResponse:
        """The tenant's namespaces by name, each with its counters
        (``GET /v1/namespaces``)."""
        return await self._client._call("GET", "/v1/namespaces", NamespacesResponse)

    async def stats(self, namespace: str) -> NamespaceStats:
        """Counters of a namespace (``GET /v1/namespaces/{namespace}/stats``)."""
        return await self._client._call("GET", f"/v1/namespaces/{seg(namespace)}/stats", NamespaceStats)

    async def put(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        tags: Optional[Sequence[str]] = None,
        ttl_seconds: Optional[int] = None,
        agent_id: Optional[str] = None,
    ) -> KvPutResponse:
        """Write an entry (``PUT /v1/namespaces/{namespace}/entries/{key}``); the
        namespace is created on first put. ``created`` says whether the key was new;
        ``evicted`` names what the bound pushed out."""
        payload = body(agent_id=self._agent(agent_id), tags=tags, ttl_seconds=ttl_seconds)
        payload["value"] = value
        return await self._client._call(
            "PUT", f"/v1/namespaces/{seg(namespace)}/entries/{seg(key)}", KvPutResponse, json=payload
        )

    async def get(self, namespace: str, key: str) -> KvEntry:
        """Read an entry; it becomes the most recently used
        (``GET /v1/namespaces/{namespace}/entries/{key}``)."""
        return await self._client._call("GET", f"/v1/namespaces/{seg(namespace)}/entries/{seg(key)}", KvEntry)

    async def delete(self, namespace: str, key: str) -> KvDeleteResponse:
        """Remove an entry (``DELETE /v1/namespaces/{namespace}/entries/{key}``)."""
        return await self._client._call(
            "DELETE", f"/v1/namespaces/{seg(namespace)}/entries/{seg(key)}", KvDeleteResponse
        )

    async def list(
        self,
        namespace: str,
        *,
        tag: Optional[str] = None,
        limit: Optional[int] = None,
        agent_id: Optional[str] = None,
    ) -> KvListResponse:
        """Entries (with a tag, if given), most recently used first
        (``GET /v1/namespaces/{namespace}/entries``)."""
        params = qs(tag=tag, limit=limit, agent_id=self._agent(agent_id))
        return await self._client._call(
            "GET", f"/v1/namespaces/{seg(namespace)}/entries", KvListResponse, params=params
        )

    async def search(
        self,
        namespace: str,
        query: str,
        *,
        limit: Optional[int] = None,
        agent_id: Optional[str] = None,
    ) -> KvSearchResponse:
        """Ranked text search over keys, tags and values
        (``POST /v1/namespaces/{namespace}/search``)."""
        payload = body(query=query, limit=limit, agent_id=self._agent(agent_id))
        return await self._client._call(
            "POST", f"/v1/namespaces/{seg(namespace)}/search", KvSearchResponse, json=payload
        )


class AsyncSessions(_AsyncResource):
    """Sessions ``/v1/sessions``: a conversation's durable message log."""

    async def list(self, *, agent_id: Optional[str] = None, limit: Optional[int] = None) -> SessionsResponse:
        """The agent's sessions, the most recently spoken first, without their
        messages (``GET /v1/sessions``; ``limit`` 1 to 1000, default 100)."""
        params = qs(agent_id=self._agent(agent_id), limit=limit)
        return await self._client._call("GET", "/v1/sessions", SessionsResponse, params=params)

    async def post_messages(
        self,
        session_id: str,
        messages: Optional[Sequence[Union[SessionMessageInput, Mapping[str, Any]]]] = None,
        *,
        role: Optional[str] = None,
        content: Optional[str] = None,
        at: Optional[Union[str, datetime]] = None,
        agent_id: Optional[str] = None,
    ) -> PostMessagesResponse:
        """Add messages to a session, creating it (``POST /v1/sessions/{id}/messages``):
        either ``messages`` (several) or ``role`` + ``content`` (one)."""
        payload = body(
            agent_id=self._agent(agent_id),
            messages=[dict(m) for m in messages] if messages is not None else None,
            role=role,
            content=content,
            at=at,
        )
        return await self._client._call(
            "POST", f"/v1/sessions/{seg(session_id)}/messages", PostMessagesResponse, json=payload
        )

    async def add_message(
        self,
        session_id: str,
        role: str,
        content: str,
        *,
        at: Optional[Union[str, datetime]] = None,
        agent_id: Optional[str] = None,
    ) -> PostMessagesResponse:
        """Add one message to a session (``POST /v1/sessions/{id}/messages``)."""
        return await self.post_messages(session_id, role=role, content=content, at=at, agent_id=agent_id)

    async def get(self, session_id: str, *, agent_id: Optional[str] = None) -> Session:
        """The session's running summary and newest messages
        (``GET /v1/sessions/{id}/messages``)."""
        params = qs(agent_id=self._agent(agent_id))
        return await self._client._call("GET", f"/v1/sessions/{seg(session_id)}/messages", Session, params=params)

    async def compact(self, session_id: str, *, agent_id: Optional[str] = None) -> CompactResponse:
        """Compact the session now (``POST /v1/sessions/{id}/compact``)."""
        payload = body(agent_id=self._agent(agent_id))
        return await self._client._call(
            "POST", f"/v1/sessions/{seg(session_id)}/compact", CompactResponse, json=payload
        )


class AsyncAdminKeys(_AsyncResource):
    """API keys ``/v1/admin/keys`` (an admin key's tenant, or every tenant for an
    admin of the default tenant)."""

    async def create(
        self,
        agent: str,
        scopes: Sequence[str] = ("read", "write"),
        *,
        tenant: Optional[str] = None,
        name: Optional[str] = None,
        expires_at: Optional[Union[str, datetime]] = None,
    ) -> CreatedKey:
        """Create a key acting as ``agent`` (or ``"*"``: every agent of the tenant)
        with ``scopes`` (``read``, ``write``, ``admin``) (``POST /v1/admin/keys``). The
        answer's ``secret`` is shown this once."""
        payload = body(agent=agent, scopes=list(scopes), tenant=tenant, name=name, expires_at=expires_at)
        return await self._client._call("POST", "/v1/admin/keys", CreatedKey, json=payload)

    async def list(self, *, tenant: Optional[str] = None, limit: Optional[int] = None) -> KeysResponse:
        """The keys, newest first, never a secret (``GET /v1/admin/keys``)."""
        params = qs(tenant=tenant, limit=limit)
        return await self._client._call("GET", "/v1/admin/keys", KeysResponse, params=params)

    async def revoke(self, key_id: str) -> RevokedKey:
        """Revoke a key by id (``DELETE /v1/admin/keys/{id}``); it stops working at once."""
        return await self._client._call("DELETE", f"/v1/admin/keys/{seg(key_id)}", RevokedKey)


class AsyncAdmin(_AsyncResource):
    """Admin routes: keys, the audit log, archival, re-embedding, erasure."""

    def __init__(self, client: "AsyncMnemos") -> None:
        super().__init__(client)
        self.keys = AsyncAdminKeys(client)

    async def audit(self, *, tenant: Optional[str] = None, limit: Optional[int] = None) -> AuditResponse:
        """The audit log, newest first (``GET /v1/admin/audit``)."""
        params = qs(tenant=tenant, limit=limit)
        return await self._client._call("GET", "/v1/admin/audit", AuditResponse, params=params)

    async def archive(self) -> Run:
        """Summarise idle sessions now, what the 03:00 job does (``POST /v1/admin/archive``)."""
        return await self._client._call("POST", "/v1/admin/archive", Run)

    async def reembed(self) -> ReembedStatus:
        """Start re-embedding every memory with the configured embedding model, in the
        background (``POST /v1/admin/reembed``; the server's admin). The stored vectors
        answer recall until the new set is complete. ``Conflict`` when the stored vectors
        already come from the configured model."""
        return await self._client._call("POST", "/v1/admin/reembed", ReembedStatus)

    async def reembed_status(self) -> ReembedStatus:
        """The progress of the current or last re-embedding (``GET /v1/admin/reembed``)."""
        return await self._client._call("GET", "/v1/admin/reembed", ReembedStatus)

    async def erase_agent(self, agent: str) -> EraseResponse:
        """Erase an agent from every store (``DELETE /v1/agents/{agent}``)."""
        return await self._client._call("DELETE", f"/v1/agents/{seg(agent)}", EraseResponse)

    async def erase_tenant(self, tenant: str) -> TenantEraseResponse:
        """Erase every agent of a tenant and revoke its keys (``DELETE /v1/tenants/{tenant}``)."""
        return await self._client._call("DELETE", f"/v1/tenants/{seg(tenant)}", TenantEraseResponse)

    async def inject_fault(self, child: str) -> FaultInjected:
        """Make an actor fail, for supervision tests (``POST /v1/admin/actors/{child}/fail``;
        only on a server with ``server.fault_injection = true``, else ``NotFound``)."""
        return await self._client._call("POST", f"/v1/admin/actors/{seg(child)}/fail", FaultInjected)


class AsyncTransfer(_AsyncResource):
    """Export and import as JSONL (``GET /v1/export``, ``POST /v1/import``)."""

    async def export(
        self,
        *,
        agent_id: Optional[str] = None,
        tenant: Optional[str] = None,
        with_embeddings: Optional[bool] = None,
    ) -> str:
        """One agent (or with ``tenant`` and an admin key, a tenant) as JSONL text: a
        header, every record, a trailer (``GET /v1/export``)."""
        params = qs(
            agent_id=self._agent(agent_id) if tenant is None else agent_id,
            tenant=tenant,
            with_embeddings=with_embeddings,
        )
        response = await self._client._send(
            "GET", "/v1/export", params=params, headers={"Accept": "application/x-ndjson"}
        )
        return response.text

    async def import_(
        self,
        data: Union[str, bytes],
        *,
        skip_invalid: Optional[bool] = None,
        dry_run: Optional[bool] = None,
    ) -> ImportReport:
        """Import an export (``POST /v1/import``): ids are kept, what is stored already
        is left alone; an invalid line refuses the whole import (``InvalidArgument``
        naming its line) unless ``skip_invalid``."""
        content = data.encode("utf-8") if isinstance(data, str) else data
        response = await self._client._send(
            "POST",
            "/v1/import",
            params=qs(skip_invalid=skip_invalid, dry_run=dry_run),
            content=content,
            headers={"Content-Type": "application/x-ndjson"},
        )
        return self._client._model(response, ImportReport)


class AsyncMnemos(BaseClient):
    """Async client of a mnemos server.

    ::

        async with AsyncMnemos(agent_id="alice") as m:
            await m.tools.remember("The staging DB runs on port 5433", tags=["db"])
            hits = await m.search("which port does staging use?")

    Args:
        base_url: the server (default: env ``MNEMOS_URL``, else ``http://127.0.0.1:8077``).
        api_key: sent as ``Authorization: Bearer <key>`` (default: env ``MNEMOS_API_KEY``).
        agent_id: the agent calls act as when they name none.
        timeout: seconds (or an ``httpx.Timeout``) per request.
        max_retries: retries of a 429 or 503 answer (honouring ``Retry-After``); 0: none.
        retry_backoff: first wait in seconds when the answer has no ``Retry-After``
            (doubled each retry).
        max_retry_wait: a wait longer than this is not waited for: the error is raised.
        headers: extra headers sent with every request.
        http_client: an ``httpx.AsyncClient`` to send with (proxies, TLS, transports):
            requests still go to ``base_url`` with the headers above, and ``close()``
            leaves it open.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        agent_id: Optional[str] = None,
        timeout: Union[float, httpx.Timeout, None] = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry_backoff: float = DEFAULT_RETRY_BACKOFF,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
        headers: Optional[Mapping[str, str]] = None,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self._configure(base_url, api_key, agent_id, max_retries, retry_backoff, max_retry_wait, headers)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(base_url=self.base_url, timeout=timeout)
        self._url_prefix = "" if http_client is None else self.base_url
        self.tools = AsyncTools(self)
        self.memories = AsyncMemories(self)
        self.cognition = AsyncCognition(self)
        self.projects = AsyncProjects(self)
        self.entities = AsyncEntities(self)
        self.facts = AsyncFacts(self)
        self.kv = AsyncKv(self)
        self.sessions = AsyncSessions(self)
        self.admin = AsyncAdmin(self)
        self.transfer = AsyncTransfer(self)

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Close the connections (only those of an HTTP client this client made)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncMnemos":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, agent_id={self.agent_id!r})"

    # --------------------------------------------------------------------- plumbing

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, str]] = None,
        json: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        content: Optional[bytes] = None,
    ) -> httpx.Response:
        """Send one request, retrying 429/503 as configured; raise the contract's
        error for any answer that is not 2xx."""
        request_headers = self._default_headers()
        if headers:
            request_headers.update(headers)
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    method,
                    self._url_prefix + path,
                    params=params or None,
                    json=json,
                    content=content,
                    headers=request_headers,
                )
            except httpx.TimeoutException as exc:
                raise MnemosTimeoutError(f"no answer from {self.base_url} in time: {exc}") from exc
            except httpx.TransportError as exc:
                raise MnemosConnectionError(f"could not reach {self.base_url}: {exc}") from exc
            if response.is_success:
                return response
            error = self._error(response)
            delay = self._retry_delay(error, attempt)
            if delay is None:
                raise error
            attempt += 1
            await asyncio.sleep(delay)

    async def _call(
        self,
        method: str,
        path: str,
        model: Type[M],
        *,
        params: Optional[Mapping[str, str]] = None,
        json: Any = None,
    ) -> M:
        response = await self._send(method, path, params=params, json=json)
        return self._model(response, model)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, Any]] = None,
        json: Any = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Any:
        """Any route, untyped: the decoded JSON answer (``None`` for an empty body).
        Errors are raised as for every other call."""
        response = await self._send(
            method, path, params=qs(**dict(params or {})), json=json, headers=headers
        )
        if not response.content:
            return None
        return self._decode(response)

    # ---------------------------------------------------------------------- service

    async def health(self) -> Health:
        """Liveness (``GET /health``); with an admin key also each backend and actor."""
        return await self._call("GET", "/health", Health)

    async def metrics(self) -> str:
        """Prometheus metrics text (``GET /metrics``; an admin key unless
        ``auth.public_metrics``)."""
        response = await self._send("GET", "/metrics", headers={"Accept": "text/plain"})
        return response.text

    async def agents(self) -> AgentsResponse:
        """The agents with memories the key may see, by id, with their counts
        (``GET /v1/agents``): those of the key's tenant, or its own agent for a key
        bound to one."""
        return await self._call("GET", "/v1/agents", AgentsResponse)

    async def openapi(self) -> Dict[str, Any]:
        """The server's OpenAPI document (``GET /openapi.json``)."""
        response = await self._send("GET", "/openapi.json")
        document: Dict[str, Any] = self._decode(response)
        return document

    # ------------------------------------------------------------- mem0-style API

    async def add(
        self,
        messages: Messages,
        agent_id: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        infer: bool = True,
        *,
        session_id: Optional[str] = None,
        memory_type: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        importance: Optional[float] = None,
    ) -> List[Memory]:
        """Add memories from a conversation, as mem0's ``add``.

        ``messages`` is a string (one user message), one ``{"role", "content"}`` dict,
        or a list of them. With ``infer=True`` (default) the server mines the
        conversation for facts, preferences, decisions and procedures
        (``POST /v1/memories``); with ``infer=False`` each non-system message is
        stored verbatim (``remember_batch``, where ``memory_type``, ``tags`` and
        ``importance`` apply). Returns the memories stored (or reinforced)."""
        items = messages_of(messages)
        if infer:
            if memory_type is not None or tags is not None or importance is not None:
                raise ValueError("memory_type, tags and importance apply only with infer=False")
            stored = await self.memories.add(items, agent_id=agent_id, session_id=session_id, metadata=metadata)
            return stored.stored
        batch: List[Dict[str, Any]] = []
        for message in items:
            if message.get("role") == "system":
                continue
            batch.append(
                body(
                    content=message.get("content"),
                    type=memory_type,
                    tags=tags,
                    importance=importance,
                    session_id=session_id,
                    metadata=metadata,
                )
            )
        if not batch:
            return []
        result = await self.tools.remember_batch(batch, agent_id=agent_id)
        return [r.memory for r in result.results]

    async def search(
        self,
        query: str,
        agent_id: Optional[str] = None,
        limit: int = 10,
        min_score: Optional[float] = None,
        filters: Optional[Mapping[str, Any]] = None,
        *,
        types: Optional[Types] = None,
        tags: Optional[Sequence[str]] = None,
        time_query: Optional[str] = None,
        session_id: Optional[str] = None,
        project_id: Optional[str] = None,
        include_shared: Optional[bool] = None,
    ) -> RecallResponse:
        """Search memories, as mem0's ``search`` (``recall``): best first, each with
        a ``score`` on 0..1; ``min_score`` drops weaker results. ``filters`` are more
        recall fields (``type``, ``tags``, ``time_query``, ``session_id``,
        ``project_id``, ``include_shared``, ``now``, ...), sent as given."""
        payload = body(
            agent_id=self._agent(agent_id),
            query=query,
            limit=limit,
            min_score=min_score,
            type=[types] if isinstance(types, str) else types,
            tags=tags,
            time_query=time_query,
            session_id=session_id,
            project_id=project_id,
            include_shared=include_shared,
        )
        for key, value in (filters or {}).items():
            payload[key] = to_json(value)
        return await self._call("POST", "/tools/recall", RecallResponse, json=payload)

    async def get_all(
        self,
        agent_id: Optional[str] = None,
        *,
        memory_type: Optional[str] = None,
        status: Optional[str] = None,
        tag: Optional[str] = None,
        project_id: Optional[str] = None,
        session_id: Optional[str] = None,
        occurred_after: Optional[When] = None,
        occurred_before: Optional[When] = None,
        q: Optional[str] = None,
        limit: Optional[int] = None,
        page_size: int = 100,
    ) -> List[Memory]:
        """Every memory of the agent (at most ``limit``), newest first, as mem0's
        ``get_all``; follows ``next_cursor`` page by page (see :meth:`iter_all` to
        stream instead). The filters are those of ``memories.list``."""
        return [
            memory
            async for memory in self.iter_all(
                agent_id,
                memory_type=memory_type,
                status=status,
                tag=tag,
                project_id=project_id,
                session_id=session_id,
                occurred_after=occurred_after,
                occurred_before=occurred_before,
                q=q,
                limit=limit,
                page_size=page_size,
            )
        ]

    async def iter_all(
        self,
        agent_id: Optional[str] = None,
        *,
        memory_type: Optional[str] = None,
        status: Optional[str] = None,
        tag: Optional[str] = None,
        project_id: Optional[str] = None,
        session_id: Optional[str] = None,
        occurred_after: Optional[When] = None,
        occurred_before: Optional[When] = None,
        q: Optional[str] = None,
        limit: Optional[int] = None,
        page_size: int = 100,
    ) -> AsyncIterator[Memory]:
        """Iterate every memory of the agent that passes the filters, newest first,
        a page at a time."""
        async for memory in self.memories.iter(
            agent_id=agent_id,
            memory_type=memory_type,
            status=status,
            tag=tag,
            project_id=project_id,
            session_id=session_id,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            q=q,
            page_size=page_size,
            max_items=limit,
        ):
            yield memory

    async def get(self, memory_id: str, agent_id: Optional[str] = None) -> Memory:
        """One memory by id, as mem0's ``get``."""
        return await self.memories.get(memory_id, agent_id=agent_id)

    async def update(
        self,
        memory_id: str,
        data: Optional[str] = None,
        agent_id: Optional[str] = None,
        *,
        content: Optional[str] = None,
        title: Union[str, None, NotGiven] = NOT_GIVEN,
        importance: Optional[float] = None,
        tags: Optional[Sequence[str]] = None,
        status: Optional[str] = None,
        shared: Optional[bool] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        memory_type: Optional[str] = None,
    ) -> Memory:
        """Change a memory, as mem0's ``update(memory_id, data)``: ``data`` (or
        ``content``) is the new text; the previous version goes to its history."""
        if data is not None and content is not None and data != content:
            raise ValueError("give the new text as data or as content, not both")
        return await self.memories.update(
            memory_id,
            agent_id=agent_id,
            content=content if content is not None else data,
            title=title,
            importance=importance,
            tags=tags,
            status=status,
            shared=shared,
            metadata=metadata,
            memory_type=memory_type,
        )

    async def delete(self, memory_id: str, agent_id: Optional[str] = None) -> None:
        """Delete a memory everywhere, history included, as mem0's ``delete``."""
        await self.memories.delete(memory_id, agent_id=agent_id)

    async def delete_all(self, agent_id: Optional[str] = None) -> int:
        """Delete every memory of the agent, as mem0's ``delete_all``; returns how many."""
        return (await self.memories.delete_all(agent_id=agent_id)).deleted

    async def history(self, memory_id: str, agent_id: Optional[str] = None) -> List[HistoryEntry]:
        """The past versions of a memory, oldest first, as mem0's ``history``."""
        return (await self.memories.history(memory_id, agent_id=agent_id)).versions

