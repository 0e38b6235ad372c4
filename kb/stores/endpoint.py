"""Any SPARQL 1.1 endpoint: Query and Update protocols plus the Graph Store protocol.

`LUMA_KB_URL=http://host:port` points at an Oxigraph server (`oxigraph serve`), whose paths
are `/query`, `/update` and `/store`; other servers (Fuseki, GraphDB, Virtuoso) expose the
same protocols under their own paths, given with `LUMA_KB_QUERY_URL` and friends.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator

import pyoxigraph as ox

from luma.errors import QueryError, QueryTimeout, StoreError
from luma.kb.stores.base import RESULT_FORMATS, QueryOutput, QuadStore

_GRAPH_MEDIA = "application/n-triples"


class EndpointStore(QuadStore):
    """A remote quad store spoken to over the standard SPARQL protocols (no home-made protocol)."""

    backend = "sparql-endpoint"

    def __init__(self, base: str, timeout: float = 600.0):
        base = base.rstrip("/")
        self.query_url = os.environ.get("LUMA_KB_QUERY_URL", base + "/query")
        self.update_url = os.environ.get("LUMA_KB_UPDATE_URL", base + "/update")
        self.store_url = os.environ.get("LUMA_KB_STORE_URL", base + "/store")
        self.timeout = timeout

    def _request(self, url, data=None, headers=None, method="POST", timeout=None) -> tuple[str, bytes]:
        req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return resp.headers.get("Content-Type", ""), resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace").strip().splitlines()
            msg = detail[0] if detail else exc.reason
            if exc.code == 400:
                raise QueryError(f"the endpoint refused the request: {msg}", source=url) from None
            raise StoreError(f"HTTP {exc.code}: {msg}", source=url) from None
        except TimeoutError:
            raise QueryTimeout(f"no answer within {timeout or self.timeout:g} s", source=url) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise QueryTimeout(f"no answer within {timeout or self.timeout:g} s", source=url) from None
            raise StoreError(f"cannot reach the SPARQL endpoint: {reason}", source=url) from None

    def query(self, sparql, *, union=True, results="json", timeout=None, named_graphs=None, default_graphs=None):
        fmt = RESULT_FORMATS[results]
        # An explicit default graph replaces the server's union default graph.
        url = self.query_url + ("?union-default-graph" if union and default_graphs is None else "")
        accept = f"{fmt.media_type}, {_GRAPH_MEDIA};q=0.9"
        if named_graphs is not None or default_graphs is not None:
            # The protocol's dataset parameters; a form body, since a thousand graph IRIs would
            # not fit in a URL.
            form = [("query", sparql)] + [("named-graph-uri", g) for g in named_graphs or []]
            form += [("default-graph-uri", g) for g in default_graphs or []]
            data, ctype = urllib.parse.urlencode(form).encode(), "application/x-www-form-urlencoded"
        else:
            data, ctype = sparql.encode(), "application/sparql-query"
        ctype, body = self._request(url, data, {"Content-Type": ctype, "Accept": accept}, timeout=timeout)
        media = ctype.split(";")[0].strip()
        if media == _GRAPH_MEDIA:
            return QueryOutput("graph", media, body)
        return QueryOutput("ask" if _is_boolean(results, body) else "select", media, body)

    def update(self, sparql):
        self._request(self.update_url, sparql.encode(), {"Content-Type": "application/sparql-update"})

    def bulk_load_nquads(self, chunks: Iterable[bytes]) -> None:
        for chunk in chunks:
            if chunk:
                self.load_nquads(chunk)

    def load_nquads(self, data: bytes) -> None:
        self._request(self.store_url, data, {"Content-Type": "application/n-quads"})

    def iter_quads(self) -> Iterator[ox.Quad]:
        _, body = self._request(self.store_url, None, {"Accept": "application/n-quads"}, method="GET")
        try:
            quads = list(ox.parse(body, format=ox.RdfFormat.N_QUADS))
        except SyntaxError as exc:
            raise StoreError(f"the endpoint's dump is not complete N-Quads: {exc}", source=self.store_url) from None
        return (q for q in quads if not isinstance(q.graph_name, ox.DefaultGraph))

    def clear(self) -> None:
        self.update("CLEAR ALL")


def _is_boolean(results: str, body: bytes) -> bool:
    """Whether a results document answers an ASK (its media type is the same as a SELECT's)."""
    head = body[:300]
    if results == "json":
        return b'"boolean"' in head and b'"results"' not in head
    if results == "xml":
        return b"<boolean>" in head
    return body.strip() in (b"true", b"false")  # CSV/TSV: a bare boolean, no header line
