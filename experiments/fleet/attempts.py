"""Which nodes ran a unit. Each attempt Ray makes of a unit notes its node in the cluster's
key-value store (the GCS) as it starts; the head reads the notes, so a unit Ray re-ran after its
node died says so in `luma campaign status` and the state file (how many attempts, the node that
died) instead of showing a plain `done`. Ray retries such a task without telling the driver
(but in a log line), and its task-state API needs the dashboard, which runners keep off; the
GCS key-value store is reachable from every worker and the driver alike.
"""

from __future__ import annotations

import json
import socket
import time

NAMESPACE = "luma"
#: Seconds a listed node's manager gets to take a connection before the node counts as gone.
PROBE_S = 1.0


def _key(campaign_id: str, unit: str) -> bytes:
    return f"attempts/{campaign_id}/{unit}".encode()


def note(campaign_id: str, unit: str, node: str, host: str) -> None:
    """On the node, as an attempt starts (one attempt of a unit runs at a time)."""
    from ray.experimental import internal_kv as kv  # the fleet extra; Ray's GCS store as its libraries use it

    key = _key(campaign_id, unit)
    earlier = kv._internal_kv_get(key, namespace=NAMESPACE)
    seen = json.loads(earlier) if earlier else []
    seen.append({"node": node, "host": host, "started": round(time.time(), 1)})
    kv._internal_kv_put(key, json.dumps(seen).encode(), overwrite=True, namespace=NAMESPACE)


def read(campaign_id: str, unit: str) -> list[dict]:
    """The attempts noted so far, oldest first (on the head)."""
    from ray.experimental import internal_kv as kv  # the fleet extra

    raw = kv._internal_kv_get(_key(campaign_id, unit), namespace=NAMESPACE)
    try:
        out = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [a for a in out if isinstance(a, dict) and isinstance(a.get("node"), str)] if isinstance(out, list) else []


def clear(campaign_id: str, unit: str) -> None:
    """Forget a unit's attempts (the head, before it submits the unit again)."""
    from ray.experimental import internal_kv as kv  # the fleet extra

    kv._internal_kv_del(_key(campaign_id, unit), namespace=NAMESPACE)


def answering(listed: list[dict], alive: set[str], suspects: set[str]) -> set[str]:
    """`alive` less those of `suspects` whose node manager (raylet) no longer takes a TCP
    connection. `listed`: `ray.nodes()`. A killed node stays listed alive until Ray's health
    checks give up on it (~15 s), time enough for Ray to re-run its unit elsewhere and for that
    run to finish; its node manager's port is closed at once."""
    asked, gone = suspects & alive, set()
    for n in listed:
        address, port = n.get("NodeManagerAddress"), n.get("NodeManagerPort")
        if n.get("NodeID") in asked and address and port:
            try:
                with socket.create_connection((address, int(port)), timeout=PROBE_S):
                    pass
            except OSError:  # refused, unreachable or silent past PROBE_S
                gone.add(n["NodeID"])
    return alive - gone


def describe(attempts: list[dict], alive: set[str]) -> dict:
    """What the state file says of a unit's attempts: their number, and each earlier attempt's
    node and host with how it ended (`died`: the node is gone from the cluster)."""
    earlier = [{"node": a["node"][:12], "host": a.get("host"),
                "ended": "died" if a["node"] not in alive else "lost the attempt"} for a in attempts[:-1]]
    out: dict = {"attempts": len(attempts) or None}
    if earlier:
        out["retried_after"] = earlier
    return out


def note_text(described: dict) -> str | None:
    """The state's one-line note of a unit Ray ran more than once (None: it ran once)."""
    earlier = described.get("retried_after")
    if not earlier:
        return None
    return f"run {described['attempts']} times; " + "; ".join(
        f"node {r['node']} on {r['host']} {r['ended']}" for r in earlier)
