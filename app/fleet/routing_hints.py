"""The hints an imbalance finding carries (``app.fleet.imbalance``): how to route, or
look at the replica itself. Data only."""

from __future__ import annotations

from app.diagnose.records import Hint

__all__ = ["HINTS"]

HINTS: dict[str, Hint] = {
    h.id: h
    for h in (
        Hint(
            "lb_least_request",
            "Route by outstanding requests, not round-robin",
            "use a least-request / least-connections policy in the load balancer "
            "(Envoy LEAST_REQUEST, nginx least_conn, or a router that reads "
            "vllm:num_requests_running/waiting)",
            "requests differ a hundredfold in length; round-robin or random routing "
            "keeps sending new work to a replica still busy with long ones",
        ),
        Hint(
            "sticky_sessions",
            "Check session affinity",
            "loosen sticky sessions or hash-by-user routing, or cap a session's share "
            "of one replica",
            "affinity pins heavy users or long conversations to one replica for as "
            "long as the session lasts, whatever its load",
        ),
        Hint(
            "prefix_routing",
            "Bound prefix-aware routing by load",
            "give the prefix-/KV-cache-aware router (llm-d, vLLM production-stack, "
            "Dynamo) a load threshold so a popular prefix spills to other replicas",
            "routing every request with a shared prefix to the replica that caches it "
            "saves prefill but piles that traffic onto one replica",
        ),
        Hint(
            "slow_replica",
            "Inspect the slow replica",
            "compare its GPU (clocks, throttling, ECC errors), vLLM version and flags "
            "(cache_config_info, --max-num-batched-tokens) with its peers; drain it "
            "from the load balancer meanwhile",
            "it is slower than its peers at a similar load: the cause is the replica, "
            "not the traffic it gets",
        ),
    )
}
