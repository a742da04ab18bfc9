"""The client: one method per group protocol request, sync and async.

Requests go to the leader of `partition_for(group_id)` (Kafka's placement).
The routing table is cached from the controller. When a leader answers
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE,
or cannot be reached, the client asks the controller for the routing *after*
that leader's epoch (`routing_after`): the controller checks the partition at
once and answers when a new leader serves it (or the check found the old one
sound), so the retry goes straight to the new leader instead of polling
with backoff. The call is retried with backoff until its deadline, then
`CoordinatorUnavailableError` is raised (actors/client/retry.py). A request the
leader refuses as malformed raises `InvalidRequestError` at once.
After a failover every request in flight fails at about the same time; their
refreshes share one controller call. Each attempt notes the routing version
it used, and a refresh is skipped when the routing changed since: threads
wait on one lock, coroutines await the one refresh in flight.
The sync methods are for plain processes and threads; inside an async Ray
actor use the `*_async` methods.
`credential` (issue 49, docs/security.md): the Ray-path credential sent with
every call to a leader, where the service authorizes Ray callers; a refused
one raises `CredentialError` (coordinator/credentials.py) at once, never retried.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any
from uuid import UUID

import ray

from actors.client.coalesce import CallAs, coalescer_for, process_sender, retire
from actors.client.fanout import ByGroup, EveryPartition, Plan, Through, deleted, described, lagged
from actors.client.retry import (
    MIN_ATTEMPT_S,
    Backoff,
    NoLeaderError,
    Retry,
    call_with_retry,
    call_with_retry_async,
    retriable,
)
from actors.core.settings import CONTROLLER_NAME, DEFAULT_NAMESPACE
from actors.core.wire import loads_response
from coordinator.errors import Errors
from coordinator.lag import GroupLag
from coordinator.lag_query import LagRequest, LagResponse, PartitionRow, rows_to_groups
from coordinator.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribeGroupsRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Request,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.routing import Routing

DEFAULT_TIMEOUT_S = 30.0
# The longest one retry waits for the controller to name a new leader; a
# partition left offline is asked again after the next backoff.
ROUTING_WAIT_S = 1.0


class Client:
    """`coalesce`: requests travel to their leader together (actors/client/coalesce.py):
    the sync methods, from any thread, through the process's sender; the async methods
    through a coalescer on the caller's event loop; both from the process's one
    registry, shared by every client. False: one Ray call per request."""

    def __init__(
        self,
        controller: Any,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        backoff: Backoff | None = None,
        coalesce: bool = True,
        credential: str | None = None,
        service: bool = False,
    ):
        self.controller = controller
        # Who the calls are from (actors/client/coalesce.py); `service`: the service's own components.
        self.call_as = CallAs(credential, service)
        self.timeout_s = timeout_s
        self.backoff = backoff or Backoff()
        self.coalesce = coalesce
        self.num_partitions = 0
        # Which partition serves each group (it changes while the count does).
        self.routing = Routing(1)
        self._leaders: list[Any] = []
        self._epochs: list[int] = []
        # Bumped by every new routing table; see the module docstring.
        self._version = 0
        self._refresh_lock = threading.Lock()
        self._refreshing: asyncio.Task[None] | None = None
        self.refresh()

    @property
    def credential(self) -> str | None:
        """The Ray-path credential this client's calls carry (None: none)."""
        return self.call_as.credential

    def __reduce__(self) -> tuple[Any, ...]:
        """A client sent to another process (captured by a Ray task) is a new
        client there, with its own routing, locks and coalescers."""
        call_as = self.call_as
        return (Client, (self.controller, self.timeout_s, self.backoff, self.coalesce, call_as.credential,
                         call_as.service))

    # ------------------------------------------------------------- routing

    def refresh(self) -> None:
        """Fetch the routing table from the controller."""
        with self._refresh_lock:
            self._set_routing(ray.get(self.controller.routing.remote()))

    async def refresh_async(self) -> None:
        """Fetch the routing table, or await the fetch already in flight."""
        await self._refresh_shared(None, self.controller.routing.remote)

    def _refresh_after(self, route: _Route) -> None:
        """The routing after the leader `route` failed on, unless it changed
        since: a thread that waited for another's refresh does not refresh again."""
        with self._refresh_lock:
            if route.version == self._version:
                self._set_routing(ray.get(self._routing_after(route)))

    async def _refresh_after_async(self, route: _Route) -> None:
        await self._refresh_shared(route.version, lambda: self._routing_after(route))

    def _routing_after(self, route: _Route) -> Any:
        wait_s = min(ROUTING_WAIT_S, self.timeout_s)
        return self.controller.routing_after.remote(route.partition, route.epoch, wait_s)

    async def _refresh_shared(self, version: int | None, fetch: Callable[[], Awaitable[Any]]) -> None:
        if version is not None and version != self._version:
            return
        loop = asyncio.get_running_loop()
        task = self._refreshing
        if task is None or task.done() or task.get_loop() is not loop:
            task = self._refreshing = loop.create_task(self._fetch_routing(fetch))
        # Shielded: one caller cancelled must not cancel the others' refresh.
        await asyncio.shield(task)

    async def _fetch_routing(self, fetch: Callable[[], Awaitable[Any]]) -> None:
        self._set_routing(await fetch())

    def _set_routing(self, routing: tuple[int, list[Any], list[int], Routing]) -> None:
        replaced = self._leaders
        self.num_partitions, self._leaders, self._epochs, self.routing = routing
        retire(replaced, keep=self._leaders)
        self._version += 1

    def partition_for(self, group_id: str) -> int:
        return self.routing.partition_for(group_id)

    def leader(self, partition: int) -> Any:
        return self._leaders[partition]

    # ------------------------------------------------------------- sending

    def send(self, request: Request, partition: int | None = None, timeout_s: float | None = None) -> Any:
        """Send one request to its group's coordinator; retried as described above."""
        route = self._route(request, partition)

        def attempt(timeout_s: float) -> Any:
            return self._once(route, request, timeout_s)

        def on_retry(last: object) -> None:
            self._refresh_after(route)

        return call_with_retry(attempt, self._retry(request, timeout_s), on_retry)

    def _once(self, route: _Route, request: Request, timeout_s: float) -> Any:
        """One attempt of `request` to the leader `route` names now."""
        leader = route.take()
        if self.coalesce:
            return process_sender().call(leader, request, timeout_s, self.call_as)
        return _answer(loads_response(ray.get(self._single(leader, request), timeout=timeout_s)))

    def send_later(self, request: Request) -> concurrent.futures.Future[Any]:
        """One attempt, not waited for (no retry): the response, or the error, in a future.
        For a request that may stay parked, such as an assignment watch. A cached
        routing without a leader (the partition was between two) is refreshed first."""
        route = self._route(request, None)
        try:
            leader = route.take()
        except NoLeaderError:
            self._refresh_after(route)
            leader = route.take()
        if self.coalesce:
            return process_sender().submit(leader, request, self.call_as)
        ref = self._single(leader, request)
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def resolve(done: concurrent.futures.Future[Any]) -> None:
            try:
                answer.set_result(_answer(loads_response(done.result())))
            except Exception as exc:
                answer.set_exception(exc)

        ref.future().add_done_callback(resolve)
        return answer

    async def send_async(
        self, request: Request, partition: int | None = None, timeout_s: float | None = None
    ) -> Any:
        route = self._route(request, partition)

        async def attempt() -> Any:
            return await self._attempt_async(request, route)

        async def on_retry(last: object) -> None:
            await self._refresh_after_async(route)

        return await call_with_retry_async(attempt, self._retry(request, timeout_s), on_retry)

    async def send_once_async(self, request: Request) -> Any:
        """`send_later` for coroutines: one attempt, no retry."""
        return await self._attempt_async(request, self._route(request, None))

    async def _attempt_async(self, request: Request, route: _Route) -> Any:
        leader = route.take()
        if self.coalesce:
            return await coalescer_for(leader, asyncio.get_running_loop(), self.call_as).submit(request)
        return _answer(loads_response(await self._single(leader, request)))

    def _single(self, leader: Any, request: Request) -> Any:
        """One uncoalesced call of `request` to `leader`: its object ref."""
        call_as = self.call_as
        return getattr(leader, call_as.methods[0]).remote(request, *call_as.extra())

    def _retry(self, request: Request, timeout_s: float | None) -> Retry:
        what = f"{type(request).__name__} for group {getattr(request, 'group_id', '?')!r}"
        return Retry(timeout_s or self.timeout_s, self.backoff, what)

    def _route(self, request: Request, partition: int | None) -> _Route:
        """To `partition`, or to the group's partition by the routing of each attempt (a
        repartition moves groups: NOT_COORDINATOR, then the new routing sends it on)."""
        if partition is not None:
            return _Route(self, partition)
        group_id: str = request.group_id  # type: ignore[union-attr]
        return _Route(self, self.partition_for(group_id), group_id)

    # ------------------------------------------------------ group requests

    def join_group(self, request: JoinGroupRequest) -> JoinGroupResponse:
        return self.send(request, timeout_s=max(self.timeout_s, request.rebalance_timeout_ms / 1000 + 5))  # type: ignore[no-any-return]

    async def join_group_async(self, request: JoinGroupRequest) -> JoinGroupResponse:
        timeout = max(self.timeout_s, request.rebalance_timeout_ms / 1000 + 5)
        return await self.send_async(request, timeout_s=timeout)  # type: ignore[no-any-return]

    def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        return self.send(request)  # type: ignore[no-any-return]

    async def sync_group_async(self, request: SyncGroupRequest) -> SyncGroupResponse:
        return await self.send_async(request)  # type: ignore[no-any-return]

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> HeartbeatResponse:
        return self.send(HeartbeatRequest(group_id, generation_id, member_id, group_instance_id))  # type: ignore[no-any-return]

    async def heartbeat_async(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> HeartbeatResponse:
        request = HeartbeatRequest(group_id, generation_id, member_id, group_instance_id)
        return await self.send_async(request)  # type: ignore[no-any-return]

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, timeout_s: float | None = None
    ) -> ConsumerGroupHeartbeatResponse:
        """KIP-848's ConsumerGroupHeartbeat (join with epoch 0, leave with -1 or -2)."""
        return self.send(request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def consumer_group_heartbeat_async(
        self, request: ConsumerGroupHeartbeatRequest, timeout_s: float | None = None
    ) -> ConsumerGroupHeartbeatResponse:
        return await self.send_async(request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def leave_group(self, group_id: str, members: Iterable[MemberIdentity]) -> LeaveGroupResponse:
        return self.send(LeaveGroupRequest(group_id, tuple(members)))  # type: ignore[no-any-return]

    async def leave_group_async(self, group_id: str, members: Iterable[MemberIdentity]) -> LeaveGroupResponse:
        return await self.send_async(LeaveGroupRequest(group_id, tuple(members)))  # type: ignore[no-any-return]

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[tuple[str, int], int | OffsetCommitPartition],
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        retention_time_ms: int = -1,
    ) -> OffsetCommitResponse:
        request = commit_request(
            group_id, offsets, generation_id, member_id, group_instance_id, retention_time_ms
        )
        return self.send(request)  # type: ignore[no-any-return]

    async def commit_offsets_async(
        self,
        group_id: str,
        offsets: Mapping[tuple[str, int], int | OffsetCommitPartition],
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        retention_time_ms: int = -1,
    ) -> OffsetCommitResponse:
        request = commit_request(
            group_id, offsets, generation_id, member_id, group_instance_id, retention_time_ms
        )
        return await self.send_async(request)  # type: ignore[no-any-return]

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> OffsetFetchResponse:
        return self.send(OffsetFetchRequest(group_id, None if partitions is None else tuple(partitions)))  # type: ignore[no-any-return]

    async def fetch_offsets_async(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> OffsetFetchResponse:
        request = OffsetFetchRequest(group_id, None if partitions is None else tuple(partitions))
        return await self.send_async(request)  # type: ignore[no-any-return]

    def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> OffsetDeleteResponse:
        return self.send(OffsetDeleteRequest(group_id, tuple(partitions)))  # type: ignore[no-any-return]

    async def delete_offsets_async(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> OffsetDeleteResponse:
        return await self.send_async(OffsetDeleteRequest(group_id, tuple(partitions)))  # type: ignore[no-any-return]

    # ------------------------------------------------- admin, fanned out
    # One request per offsets partition concerned: the sync methods ask the partitions one
    # after another, their `*_async` twins all at once; correct across a repartition
    # (actors/client/fanout.py).

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """DescribeGroups: classic groups. A consumer group, like an unknown id, is "Dead"."""
        plan = ByGroup(DescribeGroupsRequest, group_ids, described)
        return _described(plan, self._fan_out(plan))

    async def describe_groups_async(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        plan = ByGroup(DescribeGroupsRequest, group_ids, described)
        return _described(plan, await self.fan_out_async(plan))

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        """ConsumerGroupDescribe (KIP-848): consumer groups, with member epochs and target
        assignments. A classic or unknown id is answered GROUP_ID_NOT_FOUND (its
        `error_message` says which); describe those with `describe_groups`, as Kafka's
        admin client falls back to DescribeGroups."""
        plan = ByGroup(ConsumerGroupDescribeRequest, group_ids, described)
        return _described(plan, self._fan_out(plan))

    async def describe_consumer_groups_async(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        plan = ByGroup(ConsumerGroupDescribeRequest, group_ids, described)
        return _described(plan, await self.fan_out_async(plan))

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
        """Every group of every partition, sorted by id, with its type ("classic" or
        "consumer") and state; `states` and `types` filter, case-insensitive (an
        unknown name matches nothing)."""
        return _listed(self._fan_out(EveryPartition(ListGroupsRequest(tuple(states), tuple(types)))))

    async def list_groups_async(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[ListedGroup]:
        plan = EveryPartition(ListGroupsRequest(tuple(states), tuple(types)))
        return _listed(await self.fan_out_async(plan))

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, Any]:
        """DeleteGroups: each id's error (NONE once deleted, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND)."""
        plan = ByGroup(DeleteGroupsRequest, group_ids, deleted)
        return _deleted(plan, self._fan_out(plan))

    async def delete_groups_async(self, group_ids: Iterable[str]) -> dict[str, Any]:
        plan = ByGroup(DeleteGroupsRequest, group_ids, deleted)
        return _deleted(plan, await self.fan_out_async(plan))

    def lag(self, groups: Iterable[str] | None = None, partitions: bool = True) -> list[GroupLag]:
        """Live lag of `groups` (None: every group with committed offsets), sorted by group:
        per partition the committed offset against the topic registry's end offset, in
        messages and in ms (coordinator/lag.py), and each group's health. Kept by the
        leaders as commits and end-offset reports arrive; a group holding no committed
        offset is absent; lag is None (unknown) where no end offset was reported.
        `partitions=False`: each group's totals and health only (no partition rows)."""
        return _lagged(self._fan_out(self._lag_plan(groups, partitions)))

    async def lag_async(self, groups: Iterable[str] | None = None, partitions: bool = True) -> list[GroupLag]:
        return _lagged(await self.fan_out_async(self._lag_plan(groups, partitions)))

    async def lag_rows_async(self, groups: Iterable[str] | None = None) -> list[PartitionRow]:
        """`lag_async` as the leaders' plain rows (coordinator/lag_query.py `PartitionRow`), one per
        committed offset, sorted by group, topic and partition: no object per row, for a caller
        that prints or exports them column by column (`raygroups lag --live`)."""
        responses: list[LagResponse] = await self.fan_out_async(self._lag_plan(groups, True))
        rows = [row for response in responses for row in response.partitions]
        rows.sort(key=itemgetter(0))  # each leader's rows are sorted, and a group is on one leader
        return rows

    async def lag_json_async(self, groups: Iterable[str] | None = None) -> list[tuple[str, str]]:
        """`lag_rows_async` as the JSON text `raygroups lag --live --json` writes, each leader
        writing its own groups' rows at once (coordinator/lag_json.py): per group, sorted, its
        id and its rows' text, each row a compact JSON object and ",\\n"."""
        responses: list[LagResponse] = await self.fan_out_async(self._lag_plan(groups, True, as_json=True))
        texts = [text for response in responses for text in response.json_groups]
        texts.sort(key=itemgetter(0))  # each leader's are sorted, and a group is on one leader
        return texts

    @staticmethod
    def _lag_plan(groups: Iterable[str] | None, partitions: bool, as_json: bool = False) -> Plan:
        if groups is None:
            return EveryPartition(LagRequest(None, partitions, as_json))
        return ByGroup(lambda ids: LagRequest(ids, partitions, as_json), groups, lagged)

    def _fan_out(self, plan: Plan) -> list[Any]:
        """Rounds of `plan` until it is complete (actors/client/fanout.py), each partition
        asked once a round, one after another; refreshed between rounds."""
        retry = self._fan_out_retry(plan)
        deadline = retry.deadline()
        for attempt in itertools.count():
            failed: list[_Route] = []
            last: object = None
            for partition, request in plan.requests(self).items():
                route = _Route(self, partition)
                try:
                    response = self._once(route, request, max(MIN_ATTEMPT_S, deadline - time.monotonic()))
                except Exception as exc:
                    last = retriable(exc)
                    failed.append(route)
                    continue
                if not plan.take(partition, response):
                    last = response
                    failed.append(route)
            if plan.done(self):
                return plan.result()
            time.sleep(retry.delay_or_raise(attempt, deadline, last))
            for route in failed:  # one refresh: the others see the routing changed since
                self._refresh_after(route)
            if not failed:
                self.refresh()
        raise AssertionError("unreachable")

    async def fan_out_async(self, plan: Plan, through: Through | None = None) -> list[Any]:
        """`_fan_out` with every partition of a round asked at once; each request
        `through` a check where given (the Kafka gateway's authorizer)."""
        retry = self._fan_out_retry(plan)
        deadline = retry.deadline()

        async def ask(route: _Route, request: Request) -> Any:
            timeout = max(MIN_ATTEMPT_S, deadline - time.monotonic())

            def attempt(sent: Request) -> Awaitable[Any]:
                return self._attempt_async(sent, route)

            try:
                sent = attempt(request) if through is None else through(request, attempt)
                return await asyncio.wait_for(sent, timeout)
            except Exception as exc:
                return _Failed(retriable(exc))

        for attempt in itertools.count():
            requests = plan.requests(self)
            routes = [_Route(self, p) for p in requests]
            asked = zip(routes, requests.values(), strict=True)
            responses = await asyncio.gather(*(ask(route, request) for route, request in asked))
            failed: list[_Route] = []
            last: object = None
            for route, response in zip(routes, responses, strict=True):
                if isinstance(response, _Failed) or not plan.take(route.partition, response):
                    last = response.why if isinstance(response, _Failed) else response
                    failed.append(route)
            if plan.done(self):
                return plan.result()
            await asyncio.sleep(retry.delay_or_raise(attempt, deadline, last))
            for route in failed:
                await self._refresh_after_async(route)
            if not failed:
                await self.refresh_async()
        raise AssertionError("unreachable")

    def _fan_out_retry(self, plan: Plan) -> Retry:
        if isinstance(plan, EveryPartition):
            what = f"{type(plan.request).__name__} to every partition"
        else:
            what = f"{type(plan.kind(())).__name__} for {len(plan.order)} groups"
        return Retry(self.timeout_s, self.backoff, what)

    # --------------------------------------------------------------- admin

    def status(self) -> list[dict[str, Any]]:
        return ray.get(self.controller.status.remote())  # type: ignore[no-any-return]

    def reassign(self, partition: int, node_id: str | None = None) -> int:
        """Move a partition's leadership (to `node_id` only, if given); returns its new epoch.

        The call names the epoch it moves away from, so Ray's retry of it on a
        restarted controller does not move the partition a second time. The
        routing is refreshed first: a stale epoch would make the move a no-op."""
        self.refresh()
        # Out of range: the controller refuses it with its own message.
        expected = self._epochs[partition] if 0 <= partition < self.num_partitions else None
        moved = self.controller.reassign.remote(partition, node_id, expected, credential=self.credential)
        epoch = ray.get(moved)
        self.refresh()
        return epoch  # type: ignore[no-any-return]

    def repartition(self, count: int, wait: bool = True, timeout_s: float = 600.0) -> dict[str, Any]:
        """Change the offsets partition count to `count` (a multiple or a divisor of today's) while the
        service runs (`actors.controller.repartition`); raises RepartitionRefused with the
        reason when it cannot start. With `wait`, returns once it is done (TimeoutError
        after `timeout_s`: it goes on); the routing is refreshed after."""
        status = ray.get(self.controller.repartition.remote(count, credential=self.credential))
        if wait:
            status = _until_done(status, self.repartition_status, f"the repartition to {count} partitions",
                                 timeout_s, 0.05)
        self.refresh()
        return status  # type: ignore[no-any-return]

    def repartition_status(self) -> dict[str, Any]:
        return ray.get(self.controller.repartition_status.remote())  # type: ignore[no-any-return]

    def rolling_restart(
        self, runtime_env: dict[str, Any] | None = None, settings: dict[str, Any] | None = None,
        resume: bool = False, wait: bool = True, timeout_s: float = 3600.0,
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Restart every replica one node at a time, then the controller, the topic registry
        and the Kafka gateways deployed with the service, while the service runs
        (`actors.controller.rolling`): new replicas and gateways get `runtime_env` (Ray's),
        every actor the `settings` (KEY: VALUE, online or rolling keys). `resume`: drive a
        stopped one again. Raises RollRefused (wrapped by Ray) with the reason when it
        cannot start. With `wait`, returns once it is done or stopped (its status says
        which; TimeoutError after `timeout_s`: it goes on); `progress` is given each status
        whose `waiting` (what it waits for) changed meanwhile."""
        started = self.controller.rolling_restart.remote(
            runtime_env, settings, resume, credential=self.credential
        )
        status: dict[str, Any] = ray.get(started)
        if wait:
            status = _until_done(status, self.rolling_status, "the rolling restart", timeout_s, 0.2, progress)
        self.refresh()
        return status

    def rolling_stop(self) -> dict[str, Any]:
        """Stop the rolling restart under way for good (RollRefused, wrapped by Ray, when
        none runs); `rolling_restart(resume=True)` goes on. Its status."""
        return ray.get(self.controller.rolling_stop.remote(credential=self.credential))  # type: ignore[no-any-return]

    def rolling_status(self) -> dict[str, Any]:
        return ray.get(self.controller.rolling_status.remote())  # type: ignore[no-any-return]

    # ------------------------------------------------- topic registry (actors.client.topics)

    def create_topic(self, name: str, partitions: int) -> None:
        """Kafka's CreateTopics; TopicError TOPIC_ALREADY_EXISTS or INVALID_PARTITIONS."""
        from actors.client import topics
        topics.create_topic(self.controller, name, partitions, credential=self.credential)

    def create_partitions(self, name: str, total: int) -> None:
        """Kafka's CreatePartitions: grow a topic to `total`; subscribed groups rebalance."""
        from actors.client import topics
        topics.create_partitions(self.controller, name, total, credential=self.credential)

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """Partition count per existing topic (every topic when `names` is None)."""
        from actors.client import topics
        return topics.describe_topics(self.controller, names)

    async def describe_topics_async(self, names: Iterable[str] | None = None) -> dict[str, int]:
        from actors.client import topics
        return await topics.describe_topics_async(self.controller, names)

    def topic_ids(self, names: Iterable[str] | None = None) -> dict[str, UUID]:
        """Topic id (a stable, non-zero UUID) per existing topic (every topic when `names` is None)."""
        from actors.client import topics
        return topics.topic_ids(self.controller, names)

    async def topic_ids_async(self, names: Iterable[str] | None = None) -> dict[str, UUID]:
        from actors.client import topics
        return await topics.topic_ids_async(self.controller, names)

    def set_end_offsets(self, offsets: Mapping[tuple[str, int], int], at_ms: int | None = None) -> None:
        """Record end offsets of existing topic partitions (for lag), as a sample of
        their history at the registry's clock or at `at_ms` (a producer's time)."""
        from actors.client import topics
        topics.set_end_offsets(self.controller, offsets, at_ms, credential=self.credential)

    def end_offsets(self, names: Iterable[str] | None = None) -> dict[Any, int]:
        """End offset per TopicPartition of the topics (0 where never set)."""
        from actors.client import topics
        return topics.end_offsets(self.controller, names)

    def end_offset_history(
        self, names: Iterable[str] | None = None, since_ms: int | None = None
    ) -> list[tuple[str, int, int, int]]:
        """Recorded end offsets over time: (topic, partition, at_ms, end_offset) rows
        sorted by topic, partition, at_ms (actors.client.topics.end_offset_history)."""
        from actors.client import topics
        return topics.end_offset_history(self.controller, names, since_ms)

    def set_start_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Record log start offsets (Kafka's earliest offset; 0 where never set)."""
        from actors.client import topics
        topics.set_start_offsets(self.controller, offsets, credential=self.credential)

    def start_offsets(self, names: Iterable[str] | None = None) -> dict[Any, int]:
        """Log start offset per TopicPartition of the topics (0 where never set)."""
        from actors.client import topics
        return topics.start_offsets(self.controller, names)

    # ------------------------------------------------- ACLs (actors.client.acls)

    def create_acls(self, bindings: Iterable[Any]) -> list[tuple[Errors, str]]:
        """Kafka's CreateAcls: per AclBinding (error, message); INVALID_REQUEST for a bad one."""
        from actors.client import acls
        return acls.create_acls(self.controller, bindings, credential=self.credential)

    def describe_acls(self, acl_filter: Any) -> list[Any]:
        """Kafka's DescribeAcls: the AclBindings the AclFilter matches (AclError: a bad filter)."""
        from actors.client import acls
        return acls.describe_acls(self.controller, acl_filter, credential=self.credential)

    def issue_credential(self, principal: str, ttl_s: float) -> str:
        """A Ray-path credential of `principal` valid `ttl_s` seconds (docs/security.md);
        ValueError with the reason for a malformed principal or ttl."""
        from actors.client import acls
        return acls.issue_credential(self.controller, principal, ttl_s, credential=self.credential)

    def revoke_credential(self, credential: str) -> str:
        """Revoke a Ray-path credential on every leader (service state): its id."""
        from actors.client import acls
        return acls.revoke_credential(self.controller, credential, credential=self.credential)

    def delete_acls(self, filters: Iterable[Any]) -> list[tuple[Errors, str, list[Any]]]:
        """Kafka's DeleteAcls: per AclFilter (error, message, the AclBindings it deleted)."""
        from actors.client import acls
        return acls.delete_acls(self.controller, filters, credential=self.credential)

    # ------------------------------------------------- settings (actors.client.settings_table)

    def config(self, keys: Iterable[str] = ()) -> list[dict[str, Any]]:
        """Per setting (of `keys`, else every one): key, value in force (the start settings,
        the last rolling restart's, the online changes), start value, set_by ("start",
        "online" or the rolling restart that set it), change ("online", "rolling" or
        "fixed") and why. SettingError for an unknown key."""
        from actors.core.setting_keys import SettingError
        answer = ray.get(self.controller.config_get.remote(list(keys), credential=self.credential))
        if isinstance(answer, str):
            raise SettingError(answer)
        return answer  # type: ignore[no-any-return]

    def set_config(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Change settings online, all or none, applied by every leader within a second; a key
        that is unknown, not changeable online or out of range: SettingError with the reason."""
        from actors.client.topics import _call
        from actors.core.setting_keys import SettingError
        why = _call(self.controller, "config_set", {**(values or {}), **kwargs}, credential=self.credential)
        if why:
            raise SettingError(why)


class _Route:
    """The routing one call's last attempt used: its version (to share the
    refresh) and the leader's epoch (to ask for the routing after it)."""

    def __init__(self, client: Client, partition: int, group_id: str | None = None) -> None:
        self.client = client
        self.partition = partition
        self.group_id = group_id
        self.version = client._version
        self.epoch = -1

    def take(self) -> Any:
        """The partition's leader now, noted as this attempt's routing."""
        client = self.client
        if self.group_id is not None and self.version != client._version:
            self.partition = client.partition_for(self.group_id)
        p = self.partition
        if p >= len(client._leaders):  # a partition a shrink retired (the routing said so)
            self.version = client._version
            raise NoLeaderError(p)
        self.version, self.epoch = client._version, client._epochs[p]
        leader = client._leaders[p]
        if leader is None:
            raise NoLeaderError(p)
        return leader


def _described(plan: ByGroup, kept: list[list[Any]]) -> list[Any]:
    """The groups a plan's answers described, in the order asked."""
    return plan.in_order((group.group_id, group) for groups in kept for group in groups)


def _deleted(plan: ByGroup, kept: list[list[tuple[str, Errors]]]) -> dict[str, Any]:
    """Each group's DeleteGroups error, in the order asked."""
    return dict(zip(plan.order, plan.in_order(pair for pairs in kept for pair in pairs), strict=True))


def _listed(responses: list[ListGroupsResponse]) -> list[ListedGroup]:
    return sorted((group for response in responses for group in response.groups), key=lambda g: g.group_id)


def _lagged(responses: list[LagResponse]) -> list[GroupLag]:
    """The groups of every partition's LagResponse, sorted by id (a group is on one partition)."""
    lagged = [g for r in responses for g in rows_to_groups(r.groups, r.partitions)]
    return sorted(lagged, key=lambda g: g.group_id)


class _Failed:
    """A fanned-out attempt that raised something worth retrying (`why`)."""

    __slots__ = ("why",)

    def __init__(self, why: object) -> None:
        self.why = why


def _answer(response: Any) -> Any:
    """A response, or raise the error a leader answered in its place (as the
    coalescer does for a batch's entries)."""
    if isinstance(response, BaseException):
        raise response
    return response


def commit_request(
    group_id: str,
    offsets: Mapping[tuple[str, int], int | OffsetCommitPartition],
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    retention_time_ms: int,
) -> OffsetCommitRequest:
    parts = tuple(
        v if isinstance(v, OffsetCommitPartition) else OffsetCommitPartition(t, p, v)
        for (t, p), v in offsets.items()
    )
    return OffsetCommitRequest(
        group_id, parts, generation_id, member_id, group_instance_id, retention_time_ms
    )


def controller_handle(namespace: str = DEFAULT_NAMESPACE) -> Any:
    return ray.get_actor(CONTROLLER_NAME, namespace=namespace)


def _until_done(
    status: dict[str, Any], poll: Callable[[], dict[str, Any]], what: str, timeout_s: float,
    interval_s: float, progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Poll an operation's status until it no longer runs (TimeoutError after `timeout_s`:
    it goes on); `progress` is given each status whose `waiting` changed."""
    deadline = time.monotonic() + timeout_s
    while status["running"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} is still under way: {status}")
        time.sleep(interval_s)
        previous, status = status, poll()
        if progress is not None and status.get("waiting") != previous.get("waiting"):
            progress(status)
    return status
