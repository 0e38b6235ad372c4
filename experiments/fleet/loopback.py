"""Ray on one machine's loopback: a node address of 127.0.0.1 kept as given, so that every
server of the node listens on 127.0.0.1 only.

Ray (2.60) replaces a loopback node or cluster address with the machine's network address
(`ray._private.services.resolve_ip_for_localhost`, called by `ray start`, `ray.init` and its
address lookup), and its gRPC servers (GCS, raylet, object manager) listen on every interface
unless the node's address is loopback; there is no bind-address setting. `keep_loopback`
replaces that one function with one that keeps the address; `python -m
luma.experiments.fleet.loopback start ...` is Ray's own CLI with it (`luma runner join` uses it
for a node on 127.0.0.1). Non-loopback addresses are untouched: on a real network the servers
listen on every interface (docs/fleet.md: firewall, private network, token).
"""

from __future__ import annotations

import ipaddress
import sys


def host(address: str) -> str:
    """The host part of HOST:PORT (or [V6]:PORT, or a bare host)."""
    text = address.strip()
    if text.startswith("["):
        return text[1:text.index("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def is_loopback(address: str | None) -> bool:
    """Whether `address` (a host, or HOST:PORT) is this machine's loopback."""
    if not address:
        return False
    name = host(address)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def keep_loopback() -> None:
    """Make this process's Ray keep loopback addresses as given (see the module's docstring)."""
    from ray._private import services  # the fleet extra; Ray's private name: checked by tests/experiments/fleet

    if not callable(getattr(services, "resolve_ip_for_localhost", None)):
        raise RuntimeError("this Ray has no ray._private.services.resolve_ip_for_localhost: "
                           "a node on 127.0.0.1 cannot be kept off the other interfaces")
    services.resolve_ip_for_localhost = lambda address: address


def main() -> None:
    """`ray ARGS...` with loopback addresses kept."""
    keep_loopback()
    from ray.scripts.scripts import main as ray_main  # the fleet extra

    sys.argv = ["ray", *sys.argv[1:]]
    ray_main()


if __name__ == "__main__":
    main()
